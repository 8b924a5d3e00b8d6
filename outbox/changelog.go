package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

// ChangelogOp says what a changelog entry records.
type ChangelogOp uint8

// Changelog operations. Deleting ops (OpDelete, OpDrop, OpSupersede) carry
// no event; all others carry the event as it is after the change.
const (
	// OpEnqueue: an event was enqueued pending.
	OpEnqueue ChangelogOp = iota + 1
	// OpUpdate: an event was updated in place (Upsert).
	OpUpdate
	// OpReschedule: an attempt's outcome was a retry, a park or a throttle.
	OpReschedule
	// OpDelete: the event was delivered; a tombstone remains.
	OpDelete
	// OpDead: the event became (or was enqueued as) a dead letter.
	OpDead
	// OpReplay: a dead letter went back to pending.
	OpReplay
	// OpDrop: an operator deleted the event (Delete); a tombstone remains.
	OpDrop
	// OpSupersede: Upsert replaced the event with one under another ID; a
	// tombstone remains.
	OpSupersede
)

// The ops are the store's, value for value, so that converting is a cast
// (a constant index out of range fails the build).
var _ = [...]struct{}{
	[1]struct{}{}[int(OpEnqueue)-int(store.OpEnqueue)],
	[1]struct{}{}[int(OpUpdate)-int(store.OpUpdate)],
	[1]struct{}{}[int(OpReschedule)-int(store.OpReschedule)],
	[1]struct{}{}[int(OpDelete)-int(store.OpDelete)],
	[1]struct{}{}[int(OpDead)-int(store.OpDead)],
	[1]struct{}{}[int(OpReplay)-int(store.OpReplay)],
	[1]struct{}{}[int(OpDrop)-int(store.OpDrop)],
	[1]struct{}{}[int(OpSupersede)-int(store.OpSupersede)],
}

// String returns the op's lower-case name ("enqueue", "delete", ...), the
// name ParseChangelogOp reads.
func (op ChangelogOp) String() string { return store.Op(op).String() }

// Deleting reports whether op removes the event (and leaves a tombstone).
func (op ChangelogOp) Deleting() bool { return store.Op(op).Deleting() }

// valid reports whether op is one of the ops above.
func (op ChangelogOp) valid() bool { return op >= OpEnqueue && op <= OpSupersede }

// ParseChangelogOp parses an op name as String writes it.
func ParseChangelogOp(name string) (ChangelogOp, bool) {
	for op := OpEnqueue; op <= OpSupersede; op++ {
		if op.String() == name {
			return op, true
		}
	}
	return 0, false
}

// ChangelogEntry is one entry of the changelog: one state change of one
// event. Entries that carry their event (every op that does not delete) are
// made by Changelog and DecodeChangelogEntry; an entry of a deleting op may
// be built from its fields.
type ChangelogEntry struct {
	// LSN is the entry's log sequence number, increasing by one per entry.
	LSN uint64
	// Op is what happened.
	Op ChangelogOp
	// ID is the event's ID.
	ID string
	// Version is the event's version after the change (the LSN).
	Version uint64
	// Time is when the change was committed.
	Time time.Time
	// Reason says why ("delivered", the dead reason, "dropped by operator",
	// ...).
	Reason string

	rec *store.Record // the event after the change; nil for deleting ops
}

// Event returns the event as it is after the change, and false for an
// entry without one (a deleting op).
func (e ChangelogEntry) Event() (Event, bool) {
	if e.rec == nil {
		return Event{}, false
	}
	st := StatePending
	if e.Op == OpDead {
		st = StateDead
	}
	return eventFromRecord(e.rec, st), true
}

// MarshalBinary returns the entry's framed binary encoding, the value a
// shipped changelog holds; DecodeChangelogEntry reads it back.
func (e ChangelogEntry) MarshalBinary() ([]byte, error) {
	return store.EncodeEntry(e.toStore()), nil
}

// DecodeChangelogEntry decodes what MarshalBinary wrote. Bytes that fail
// their checksum or framing give an error matching ErrDamaged; an encoding
// of a newer build one matching ErrSchemaTooNew.
func DecodeChangelogEntry(b []byte) (ChangelogEntry, error) {
	en, err := store.DecodeEntry(b)
	if err != nil {
		return ChangelogEntry{}, wrapStoreErr("decode changelog entry", err)
	}
	return entryFromStore(en), nil
}

func entryFromStore(en *store.Entry) ChangelogEntry {
	return ChangelogEntry{LSN: en.LSN, Op: ChangelogOp(en.Op), ID: en.ID, Version: en.Version,
		Time: en.Time, Reason: en.Reason, rec: en.Record}
}

func entriesFromStore(es []*store.Entry) []ChangelogEntry {
	out := make([]ChangelogEntry, len(es))
	for i, e := range es {
		out[i] = entryFromStore(e)
	}
	return out
}

func (e ChangelogEntry) toStore() *store.Entry {
	return &store.Entry{LSN: e.LSN, Op: store.Op(e.Op), ID: e.ID, Version: e.Version,
		Time: e.Time, Reason: e.Reason, Record: e.rec}
}

// Changelog is a read view of an outbox's changelog, for shipping it (as
// package kafka does) and inspecting it: it reads entries and records how
// far they were shipped, and writes nothing else.
type Changelog struct{ o *Outbox }

// Changelog returns the read view of the outbox's changelog.
func (o *Outbox) Changelog() *Changelog { return &Changelog{o: o} }

// Entries returns up to limit entries (1000 when limit is not positive) in
// LSN order, from the first kept entry whose LSN is at least from. After
// Stop it fails with ErrClosed.
func (c *Changelog) Entries(from uint64, limit int) ([]ChangelogEntry, error) {
	if err := c.o.enter(); err != nil {
		return nil, err
	}
	defer c.o.ops.Done()
	es, err := c.o.st.Changelog(from, limit)
	if err != nil {
		return nil, mapErr("changelog", "", err)
	}
	return entriesFromStore(es), nil
}

// History returns every kept entry of the event with that ID, in LSN order:
// the changes it went through, as far back as the changelog reaches (see
// Config.ChangelogRetention). It reads the whole changelog. After Stop it
// fails with ErrClosed.
func (c *Changelog) History(id string) ([]ChangelogEntry, error) {
	if err := c.o.enter(); err != nil {
		return nil, err
	}
	defer c.o.ops.Done()
	es, err := c.o.st.History(id)
	if err != nil {
		return nil, mapErr("history", id, err)
	}
	return entriesFromStore(es), nil
}

// LastLSN returns the LSN of the last entry written (0 for none).
func (c *Changelog) LastLSN() uint64 { return c.o.st.LastLSN() }

// ShippedLSN returns the LSN last recorded by MarkShipped (0 for none).
func (c *Changelog) ShippedLSN() (uint64, error) {
	if err := c.o.enter(); err != nil {
		return 0, err
	}
	defer c.o.ops.Done()
	lsn, err := c.o.st.ShippedLSN()
	return lsn, mapErr("shipped LSN", "", err)
}

// MarkShipped records that every entry up to lsn was shipped, and turns
// shipping on: from then on the changelog is never trimmed past the shipped
// LSN, whatever Config.ChangelogRetention and ChangelogMaxEntries say. lsn
// must not pass LastLSN.
func (c *Changelog) MarkShipped(ctx context.Context, lsn uint64) error {
	if err := c.o.enter(); err != nil {
		return err
	}
	defer c.o.ops.Done()
	return mapErr("mark shipped", "", c.o.st.SetShippedLSN(ctx, lsn))
}

// Snapshot returns up to limit events in state (StatePending or StateDead)
// after the ID after, in ID order, as the entries that would bring a fresh
// outbox to them (OpEnqueue, or OpDead for dead letters, with the event's
// Version as LSN and Time now), and the ID to continue after ("" at the
// end). A shipper sends it when the changelog no longer starts at LSN 1.
func (c *Changelog) Snapshot(state State, after string, limit int) ([]ChangelogEntry, string, error) {
	if state != StatePending && state != StateDead {
		return nil, "", fmt.Errorf("outbox: changelog snapshot: %w: state %v", ErrInvalid, state)
	}
	if err := c.o.enter(); err != nil {
		return nil, "", err
	}
	defer c.o.ops.Done()
	recs, next, err := c.o.st.List(store.ListQuery{State: store.State(state), After: after, Limit: limit})
	if err != nil {
		return nil, "", mapErr("changelog snapshot", "", err)
	}
	op := OpEnqueue
	if state == StateDead {
		op = OpDead
	}
	now := c.o.clock.Now().UTC()
	out := make([]ChangelogEntry, len(recs))
	for i, r := range recs {
		out[i] = ChangelogEntry{LSN: r.Version, Op: op, ID: r.ID, Version: r.Version, Time: now, rec: r}
	}
	return out, next, nil
}

// Restore applies changelog entries shipped from another outbox to this one
// (meant for a fresh file, before Start) as the latest state per ID: the
// entry with the highest LSN per ID wins. A deleting op removes the event
// and keeps its tombstone (dated by the entry's Time), so the ID stays
// delivered or deleted for the dedup window; OpDead stores a dead letter and
// every other op a pending event. Each change gets this outbox's own
// changelog entry and version. Calling Restore again with the next entries
// of a stream continues it. It is refused once Start was called; an entry
// without its event (other than a deleting op) fails with ErrInvalid.
func (o *Outbox) Restore(ctx context.Context, entries []ChangelogEntry) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	o.mu.Lock()
	started := o.started
	o.mu.Unlock()
	if started {
		return errors.New("outbox: restore: the outbox is started; restore into one that is not")
	}
	ses := make([]*store.Entry, len(entries))
	for i, e := range entries {
		if !e.Op.valid() {
			return fmt.Errorf("outbox: restore: %w: entry %d (%q) has op %v", ErrInvalid, i, e.ID, e.Op)
		}
		if !e.Op.Deleting() && e.rec == nil {
			return fmt.Errorf("outbox: restore: %w: entry %d (%v %q) without its event", ErrInvalid, i, e.Op, e.ID)
		}
		ses[i] = e.toStore()
	}
	return mapErr("restore", "", o.st.Restore(ctx, ses))
}

// EventHistory returns the changelog entries of ev (as Get returned it, or
// with only its ID set when it is not found): for an event with a
// destination, those of its ID; for a topic event, those of each of its
// deliveries and of the event while it was kept unrouted, merged in LSN
// order. history returns the entries kept under one ID, as
// Changelog.History does; its first error is returned.
func EventHistory(ev *Event, history func(id string) ([]ChangelogEntry, error)) ([]ChangelogEntry, error) {
	if ev.Topic == "" {
		return history(ev.ID)
	}
	ids := []string{route.DeliveryID(ev.ID, "")}
	for _, d := range ev.DeliveryStates {
		ids = append(ids, route.DeliveryID(ev.ID, d.Endpoint))
	}
	var all []ChangelogEntry
	for _, id := range ids {
		es, err := history(id)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	slices.SortFunc(all, func(a, b ChangelogEntry) int { return cmp.Compare(a.LSN, b.LSN) })
	return all, nil
}

// Delivery returns the endpoint of the delivery of a topic event the entry
// is about ("" for the event while no endpoint subscribed, so it was kept
// unrouted); ok is false for an entry of an event with a destination.
func (e ChangelogEntry) Delivery() (endpoint string, ok bool) {
	_, endpoint, ok = strings.Cut(e.ID, store.GroupSep)
	return endpoint, ok
}
