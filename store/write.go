package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// InsertStatus tells what Insert did with one record.
type InsertStatus uint8

// Insert statuses.
const (
	// Inserted: the record is stored (pending, or dead when DeadReason was set).
	Inserted InsertStatus = iota
	// AlreadyPresent: a pending or dead record with the same ID and the same
	// content exists; nothing was written (idempotent re-enqueue).
	AlreadyPresent
	// Duplicate: the ID has a live tombstone of a delivered or superseded
	// record (within the retention); the record was dropped.
	Duplicate
	// Deleted: the ID has a live tombstone of a record an operator dropped
	// (Drop); the record was dropped, as a Duplicate is. With
	// InsertOptions.RefuseDeleted the call fails instead.
	Deleted
)

// String returns "inserted", "already-present", "duplicate" or "deleted".
func (s InsertStatus) String() string {
	switch s {
	case Inserted:
		return "inserted"
	case AlreadyPresent:
		return "already-present"
	case Duplicate:
		return "duplicate"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("InsertStatus(%d)", uint8(s))
}

func validateRecord(r *Record) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: nil record", ErrInvalid)
	case r.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalid)
	case len(r.ID) > MaxIDLen:
		return fmt.Errorf("%w: ID of %d bytes (max %d)", ErrInvalid, len(r.ID), MaxIDLen)
	case len(r.Key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes (max %d)", ErrInvalid, len(r.Key), MaxKeyLen)
	case len(r.Endpoint) > MaxEndpointLen:
		return fmt.Errorf("%w: endpoint of %d bytes (max %d)", ErrInvalid, len(r.Endpoint), MaxEndpointLen)
	}
	return nil
}

// Insert stores recs atomically and durably: it returns after the
// transaction holding them has committed and been fsynced. Concurrent calls
// share commits (group commit). It returns one status per record and sets
// each record's Version (for AlreadyPresent, the stored version); every other
// field is the caller's and is not modified.
//
// A zero CreatedAt becomes Options.Now(); a zero NextAttemptAt becomes
// CreatedAt (due at once), or DeliverAt when that is later. A record with DeadReason set goes straight to the
// dead letters (DeadAt defaults to now).
//
// A record whose ID has a live tombstone is not stored: its status is
// Duplicate when the tombstone is of a delivered or superseded record, and
// Deleted when an operator dropped the record (Drop).
//
// If any record conflicts (same ID stored with other content, or repeated in
// recs with other content), nothing of this call is stored and the error is a
// *ConflictError; other callers sharing the commit are unaffected. When ctx
// ends while the call waits, it returns ctx.Err() and the records may still
// be committed.
func (s *Store) Insert(ctx context.Context, recs []*Record) ([]InsertStatus, error) {
	return s.InsertWith(ctx, recs, InsertOptions{})
}

// InsertOptions change what InsertWith does with IDs that are already known.
// The zero value is Insert's behaviour.
type InsertOptions struct {
	// RefuseDeleted fails the whole call with a *DeletedError, storing
	// nothing of it, when a record's ID was dropped by an operator (Drop)
	// and its tombstone is live, instead of skipping that record with
	// status Deleted. It is for a caller that must tell whoever sent the
	// record that it will not be delivered.
	RefuseDeleted bool
}

// InsertWith is Insert with options.
func (s *Store) InsertWith(ctx context.Context, recs []*Record, opt InsertOptions) ([]InsertStatus, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ins, err := s.prepareInsert(recs)
	if err != nil {
		return nil, err
	}
	if err := s.do(ctx, len(ins.items), func(w *wtx) error { return w.insert(ins, opt) }); err != nil {
		return nil, err
	}
	ins.setVersions(recs)
	return ins.statuses, nil
}

// preparedInsert is an Insert call encoded before its transaction, and what
// the transaction did with it.
type preparedInsert struct {
	items    []insertItem
	statuses []InsertStatus
	versions []uint64
}

// prepareInsert validates and encodes recs for insert. Everything the
// transaction needs is copied here, in the caller's goroutine: the record is
// encoded now (its Version and seq are patched in at commit), so the
// committer never reads the caller's memory.
func (s *Store) prepareInsert(recs []*Record) (*preparedInsert, error) {
	now := s.opts.Now()
	items := make([]insertItem, len(recs))
	size := 0
	for i, r := range recs {
		if err := validateRecord(r); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		size += entryHeadMax(r.ID, r.DeadReason) + recordSizeHint(r) + frameTrailer + 2*len(r.ID) + 16 + epDueKeyLen(r.Endpoint, r.ID) // as below
	}
	// One buffer holds every frame, changelog entry and key of the call:
	// the transaction writes from it without allocating or copying.
	buf := make([]byte, 0, size)
	for i, r := range recs {
		c := *r
		c.Version, c.seq = 0, 0
		if c.CreatedAt.IsZero() {
			c.CreatedAt = now
		}
		if c.NextAttemptAt.IsZero() {
			c.NextAttemptAt = notBefore(c.CreatedAt, c.DeliverAt)
		}
		if c.DeadReason == "" {
			c.DeadAt = time.Time{}
		} else if c.DeadAt.IsZero() {
			c.DeadAt = now
		}
		// [entry head room | record frame | entry trailer] [ID] [due key] [LSN] [endpoint due key]
		head := entryHeadMax(c.ID, c.DeadReason)
		buf = slices.Grow(buf, head+recordSizeHint(&c)+frameTrailer+2*len(c.ID)+16+epDueKeyLen(c.Endpoint, c.ID))
		region := len(buf)
		buf = buf[:region+head]
		start := len(buf)
		buf = appendRecord(buf, &c)
		frameEnd := len(buf)
		buf = buf[:frameEnd+frameTrailer]
		entry := buf[region:len(buf):len(buf)]
		start -= region
		buf = append(buf, c.ID...)
		idb := buf[len(buf)-len(c.ID) : len(buf) : len(buf)]
		buf = binary.BigEndian.AppendUint64(buf, nanos(c.NextAttemptAt))
		buf = append(buf, c.ID...)
		due := buf[len(buf)-8-len(c.ID) : len(buf) : len(buf)]
		buf = append(buf, make([]byte, 8)...)
		lsnKey := buf[len(buf)-8 : len(buf) : len(buf)]
		var epDue []byte
		buf, epDue = appendSub(buf, func(b []byte) []byte { return epDueKey(b, c.Endpoint, c.NextAttemptAt, c.ID) })
		items[i] = insertItem{id: c.ID, idb: idb, key: c.indexKey(), dueKey: due, lsnKey: lsnKey,
			endpoint: c.Endpoint, epDueKey: epDue, dead: c.DeadReason, entry: entry, frameOff: start, frame: entry[start : frameEnd-region],
			dupOf: -1, group: idb[:len(GroupOf(c.ID))], unrouted: c.Unrouted()}
	}
	if err := checkGroupsInCall(recs); err != nil {
		return nil, err
	}
	if len(recs) > 1 {
		// Repeated IDs in one call: same content is one insert, other
		// content a conflict.
		order := make([]int, len(recs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(recs[a].ID, recs[b].ID) })
		for k := 1; k < len(order); k++ {
			a, b := order[k-1], order[k]
			if recs[a].ID != recs[b].ID {
				continue
			}
			if !recs[a].SameContent(recs[b]) {
				return nil, &ConflictError{ID: recs[b].ID}
			}
			first := a
			if items[a].dupOf >= 0 {
				first = items[a].dupOf
			}
			items[b].dupOf = first
		}
	}
	return &preparedInsert{items: items, statuses: make([]InsertStatus, len(items)),
		versions: make([]uint64, len(items))}, nil
}

// appendSub appends to buf with add and returns buf and the part appended,
// capped so that appends to it never reach what follows.
func appendSub(buf []byte, add func([]byte) []byte) ([]byte, []byte) {
	start := len(buf)
	buf = add(buf)
	return buf, buf[start:len(buf):len(buf)]
}

// insert writes a prepared insert in the transaction. It checks every record
// before its first write, so an error leaves nothing of the call behind. It
// may run again on the same call (a transaction retried without another
// caller's op): it rewrites every result.
func (w *wtx) insert(ins *preparedInsert, opt InsertOptions) error {
	items, statuses, versions := ins.items, ins.statuses, ins.versions
	clear(versions)
	for i := range items {
		it := &items[i]
		if it.dupOf >= 0 {
			statuses[i] = AlreadyPresent
			continue
		}
		st, version, err := w.insertCheckFrame(it, opt.RefuseDeleted)
		if err != nil {
			return err
		}
		statuses[i], versions[i] = st, version
	}
	// Bucket by bucket: each run of puts appends at the right edge of
	// one tree, whose path stays in the cache.
	for i := range items {
		if it := &items[i]; it.dupOf < 0 && statuses[i] == Inserted {
			versions[i] = w.insertItem(it)
		}
	}
	for i := range items {
		if it := &items[i]; it.dupOf < 0 && statuses[i] == Inserted && it.dead == "" {
			w.put(w.due, it.dueKey, nil)
		}
	}
	for i := range items {
		if it := &items[i]; it.dupOf < 0 && statuses[i] == Inserted && it.dead == "" {
			w.touchEndpoint(it.endpoint)
			w.put(w.dueEP, it.epDueKey, nil)
		}
	}
	for i := range items {
		if it := &items[i]; it.dupOf < 0 && statuses[i] == Inserted {
			w.logItem(it, versions[i])
		}
	}
	for i := range items {
		if d := items[i].dupOf; d >= 0 {
			versions[i] = versions[d]
		}
	}
	return nil
}

// setVersions sets the Version of each record the insert stored or found.
func (ins *preparedInsert) setVersions(recs []*Record) {
	for i, r := range recs {
		if ins.versions[i] != 0 {
			r.Version = ins.versions[i]
		}
	}
}

// insertItem is one record of an Insert call, encoded before the commit.
type insertItem struct {
	id, key string // key: the key index key (Record.indexKey)
	idb     []byte // the ID's bytes, the key of every bucket write
	dueKey  []byte // the due index key
	// endpoint is the record's Endpoint, epDueKey its due_by_endpoint key.
	endpoint string
	epDueKey []byte
	lsnKey   []byte // room for the changelog key
	dead     string // DeadReason
	frame    []byte // EncodeRecord with Version and seq 0, inside entry
	// entry is room for the changelog entry around frame, which starts at
	// entry[frameOff:] (see entryAround).
	entry    []byte
	frameOff int
	dupOf    int // index of the first record with this ID in the call, or -1

	// group is the group ID's bytes (GroupOf), a prefix of idb; unrouted
	// is set for a fan-out event kept unrouted (Record.Unrouted).
	group    []byte
	unrouted bool
}

// insertCheckFrame is insertCheck for an encoded record: the record is
// decoded only when its ID is already stored.
func (w *wtx) insertCheckFrame(it *insertItem, refuseDeleted bool) (InsertStatus, uint64, error) {
	k := it.idb
	if w.knownNew(it.group) {
		// Every member of the group would sort after the group ID.
		return Inserted, 0, nil
	}
	r, err := DecodeRecord(it.frame)
	if err != nil {
		return 0, 0, err
	}
	if w.get(w.events, k) == nil && w.get(w.dead, k) == nil {
		st, err := w.insertCheckGroup(r, refuseDeleted)
		return st, 0, err
	}
	return w.insertCheck(r, refuseDeleted)
}

// insertCheckTombstone decides what inserting a record with an ID that is
// neither pending nor dead would do: Inserted, Duplicate or Deleted (a
// *DeletedError when refuseDeleted).
func (w *wtx) insertCheckTombstone(id []byte, refuseDeleted bool) (InsertStatus, error) {
	t, ok, err := w.lookupTombstone(id)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return Inserted, nil
	case t.kind != tombDeleted:
		return Duplicate, nil
	case refuseDeleted:
		return 0, &DeletedError{ID: string(id), DeletedAt: t.deletedAt}
	}
	return Deleted, nil
}

// insertItem writes a new record from its encoded form and returns its
// version; the caller then writes its due index entry (when pending) and
// its changelog entry (logItem).
func (w *wtx) insertItem(it *insertItem) uint64 {
	lsn := w.next()
	if it.dead != "" {
		patchRecord(it.frame, lsn, 0)
		w.raiseIDMax(it.idb)
		w.put(w.dead, it.idb, it.frame)
		w.deadN++
		return lsn
	}
	patchRecord(it.frame, lsn, lsn)
	w.putNewPending(it.idb, it.key, lsn, it.frame)
	if it.unrouted {
		w.unrouted++
	}
	return lsn
}

// logItem writes the changelog entry of a record insertItem wrote.
func (w *wtx) logItem(it *insertItem, lsn uint64) {
	op := OpEnqueue
	if it.dead != "" {
		op = OpDead
	}
	e := Entry{LSN: lsn, Op: op, ID: it.id, Version: lsn, Time: w.now, Reason: it.dead}
	var entry []byte
	entry, w.scratch = entryAround(it.entry, it.frameOff, len(it.frame), &e, w.scratch)
	binary.BigEndian.PutUint64(it.lsnKey, lsn)
	w.put(w.changelog, it.lsnKey, entry)
	w.changeLen++
}

// insertCheck decides what inserting r would do, without writing.
func (w *wtx) insertCheck(r *Record, refuseDeleted bool) (InsertStatus, uint64, error) {
	cur, err := w.getPending(r.ID)
	if err != nil {
		return 0, 0, err
	}
	if cur == nil {
		if cur, err = w.getDead(r.ID); err != nil {
			return 0, 0, err
		}
	}
	if cur != nil {
		if !cur.SameContent(r) {
			return 0, 0, &ConflictError{ID: r.ID}
		}
		return AlreadyPresent, cur.Version, nil
	}
	st, err := w.insertCheckGroup(r, refuseDeleted)
	return st, 0, err
}

// insertNew writes a new record r (pending, or dead when DeadReason is set),
// with its changelog entry, and sets r.Version.
func (w *wtx) insertNew(r *Record) {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = w.now
	}
	if r.NextAttemptAt.IsZero() {
		r.NextAttemptAt = notBefore(r.CreatedAt, r.DeliverAt)
	}
	lsn := w.next()
	r.Version = lsn
	if r.DeadReason != "" {
		if r.DeadAt.IsZero() {
			r.DeadAt = w.now
		}
		r.seq = 0
		frame := EncodeRecord(r)
		w.putDead(r, frame, false)
		w.log(lsn, OpDead, r.ID, frame, r.DeadReason)
		return
	}
	r.DeadAt = time.Time{}
	r.seq = lsn
	frame := EncodeRecord(r)
	w.putPending(r, nil, frame)
	w.log(lsn, OpEnqueue, r.ID, frame, "")
}

// OutcomeKind is what to do with a delivered record.
type OutcomeKind uint8

// Outcome kinds.
const (
	// OutcomeDelete removes the record and writes a tombstone (delivered).
	OutcomeDelete OutcomeKind = iota
	// OutcomeReschedule records the attempt and sets the next attempt time.
	OutcomeReschedule
	// OutcomeDead moves the record to the dead letters.
	OutcomeDead
	// OutcomeAttempt only logs Outcome.Attempt: the record stays as it is
	// (an attempt whose answer changes nothing about its event, such as one
	// that disabled the endpoint). Version is not compared: it is Applied
	// when the ID is pending, dead or tombstoned, Stale otherwise.
	OutcomeAttempt
)

// String returns "delete", "reschedule", "dead" or "attempt".
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeAttempt:
		return "attempt"
	case OutcomeDelete:
		return "delete"
	case OutcomeReschedule:
		return "reschedule"
	case OutcomeDead:
		return "dead"
	}
	return fmt.Sprintf("OutcomeKind(%d)", uint8(k))
}

// Outcome is the result of one delivery attempt, applied by compare-and-set
// on the version that was delivered.
type Outcome struct {
	Kind OutcomeKind
	ID   string
	// Version is the record version that was delivered. When the stored
	// record has another version (or is gone), nothing is done: Stale.
	Version uint64
	// Attempts and Deliveries are the new counts (reschedule and dead).
	Attempts   int
	Deliveries int
	// NextAttemptAt is the next attempt time (reschedule).
	NextAttemptAt time.Time
	LastStatus    int
	LastError     string
	// Reason goes to the changelog entry; for OutcomeDead it is the dead
	// reason (default "dead"), for OutcomeDelete the default is "delivered".
	Reason string
	// Attempt, when set, is the attempt this outcome answers, written to the
	// attempt log in the same transaction (its Seq is the store's; the
	// caller's Attempt is not modified). A Stale outcome's attempt is
	// logged too while the ID is pending, dead or tombstoned: the request
	// was made. Required for OutcomeAttempt.
	Attempt *Attempt
}

// EndpointState is the durable state of one endpoint.
type EndpointState struct {
	Name           string
	Disabled       bool
	DisabledReason string
	DisabledAt     time.Time
	// NotBefore is the time the endpoint is throttled until.
	NotBefore     time.Time
	FailureStreak int
	LastStatus    int
	UpdatedAt     time.Time
	// ThrottledAt is when the current throttle episode last grew (zero
	// when there is none), and Throttles how often it grew: answers to
	// deliveries that began before ThrottledAt do not grow it again.
	ThrottledAt time.Time
	Throttles   int
	// BreakerUntil is when the endpoint's open circuit breaker half-opens
	// (zero when the breaker is closed); BreakerOpenedAt is when it last
	// opened, and BreakerOpens how often it opened since it was last
	// closed, which sets the length of the next cool-down.
	BreakerUntil    time.Time
	BreakerOpenedAt time.Time
	BreakerOpens    int
}

// OutcomeResult tells what Apply did with one outcome.
type OutcomeResult uint8

// Outcome results.
const (
	// Applied: the outcome was committed.
	Applied OutcomeResult = iota
	// Stale: the record's version changed or the record is gone; nothing
	// was done and the newer state is kept.
	Stale
)

// String returns "applied" or "stale".
func (r OutcomeResult) String() string {
	switch r {
	case Applied:
		return "applied"
	case Stale:
		return "stale"
	}
	return fmt.Sprintf("OutcomeResult(%d)", uint8(r))
}

// Err returns nil for Applied and ErrStale for Stale.
func (r OutcomeResult) Err() error {
	if r == Stale {
		return ErrStale
	}
	return nil
}

// Apply commits a batch of outcomes and endpoint state updates in one write
// transaction (processed in ID and name order), each change with its
// changelog entry. It returns one result per outcome, in the order given.
// Endpoint states are stored as given (UpdatedAt defaults to now).
func (s *Store) Apply(ctx context.Context, outs []Outcome, eps []EndpointState) ([]OutcomeResult, error) {
	for i := range outs {
		if outs[i].ID == "" || outs[i].Kind > OutcomeAttempt {
			return nil, fmt.Errorf("%w: outcome %d: empty ID or unknown kind", ErrInvalid, i)
		}
		if a := outs[i].Attempt; a != nil {
			if err := validateAttempt(a); err != nil {
				return nil, fmt.Errorf("outcome %d: %w", i, err)
			}
		} else if outs[i].Kind == OutcomeAttempt {
			return nil, fmt.Errorf("%w: outcome %d: an attempt outcome without its attempt", ErrInvalid, i)
		}
	}
	for i := range eps {
		if eps[i].Name == "" || len(eps[i].Name) > MaxIDLen {
			return nil, fmt.Errorf("%w: endpoint state %d: bad name", ErrInvalid, i)
		}
	}
	order := make([]int, len(outs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(outs[a].ID, outs[b].ID) })
	eps = slices.Clone(eps)
	slices.SortStableFunc(eps, func(a, b EndpointState) int { return cmp.Compare(a.Name, b.Name) })
	results := make([]OutcomeResult, len(outs))
	err := s.do(ctx, max(len(outs)+len(eps), 1), func(w *wtx) error {
		// Decode everything first: a damaged record fails the op before any write.
		cur := make([]*Record, len(outs))
		for _, i := range order {
			r, err := w.getPending(outs[i].ID)
			if err != nil {
				return fmt.Errorf("outcome for %q: %w", outs[i].ID, err)
			}
			cur[i] = r
		}
		logged := make([]bool, len(outs))
		for _, i := range order {
			o := &outs[i]
			old := cur[i]
			if o.Kind == OutcomeAttempt {
				logged[i] = w.known(o.ID)
				if !logged[i] {
					results[i] = Stale
				}
				continue
			}
			if old == nil || old.Version != o.Version {
				results[i] = Stale
				logged[i] = o.Attempt != nil && w.known(o.ID)
				continue
			}
			cur[i] = nil // a repeated ID finds the new version and is stale
			w.applyOutcome(o, old)
			logged[i] = o.Attempt != nil
		}
		for i := range eps {
			w.putEndpoint(&eps[i])
		}
		// The attempts last, in ID order: one run of writes in one tree.
		for _, i := range order {
			if logged[i] {
				a := *outs[i].Attempt
				w.putAttempt(outs[i].ID, &a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func (w *wtx) applyOutcome(o *Outcome, old *Record) {
	lsn := w.next()
	switch o.Kind {
	case OutcomeDelete:
		w.removePending(old)
		w.tombstone(old.ID, tombDelivered)
		if w.arch != nil {
			w.archive(archivedRecord(old, o))
		}
		w.log(lsn, OpDelete, old.ID, nil, cmp.Or(o.Reason, "delivered"))
	case OutcomeReschedule:
		r := old.clone()
		r.Attempts, r.Deliveries = o.Attempts, o.Deliveries
		r.NextAttemptAt = o.NextAttemptAt
		r.LastStatus, r.LastError = o.LastStatus, o.LastError
		r.Version = lsn
		frame := EncodeRecord(r)
		w.putPending(r, old, frame)
		w.dropSuperseded(old)
		w.log(lsn, OpReschedule, r.ID, frame, o.Reason)
	case OutcomeDead:
		r := old.clone()
		r.Attempts, r.Deliveries = o.Attempts, o.Deliveries
		r.LastStatus, r.LastError = o.LastStatus, o.LastError
		r.DeadAt = w.now
		r.DeadReason = cmp.Or(o.Reason, "dead")
		r.Version = lsn
		r.seq = 0
		frame := EncodeRecord(r)
		w.removePending(old)
		w.putDead(r, frame, false)
		w.log(lsn, OpDead, r.ID, frame, r.DeadReason)
	}
}

// keptReschedules is how many reschedule entries of an event's first
// attempts the changelog keeps for its history; later ones are replaced by
// the next (see dropSuperseded).
const keptReschedules = 3

// dropSuperseded removes the changelog entry of old's version when it is a
// reschedule of the same event after its first keptReschedules deliveries:
// the reschedule being logged carries the whole record again, so the older
// one says nothing that a restore or a compacted topic needs (they keep the
// last record per ID). Without it, every retry of a backlog whose receiver
// is down added a copy of the record, payload included, and the file grew
// with the retries instead of with the backlog. An event's changelog thus
// holds its enqueue, the outcomes of its first attempts, and its latest
// reschedule; every other op is kept.
func (w *wtx) dropSuperseded(old *Record) {
	if old.Deliveries <= keptReschedules {
		return
	}
	k := w.u64(old.Version)
	v := w.get(w.changelog, k)
	if v == nil {
		return // trimmed already
	}
	e, _, err := decodeEntryHead(v)
	if err != nil || e.Op != OpReschedule || e.ID != old.ID {
		return // not ours to judge; the trim and the checker see it
	}
	w.del(w.changelog, k)
	dec(&w.changeLen)
}

func (w *wtx) putEndpoint(ep *EndpointState) {
	if ep.UpdatedAt.IsZero() {
		ep.UpdatedAt = w.now
	}
	if w.endpoints.Get([]byte(ep.Name)) == nil {
		w.endpointsN++
	}
	w.put(w.endpoints, []byte(ep.Name), encodeEndpoint(ep))
}

// PutEndpoint stores one endpoint's state (UpdatedAt defaults to now).
func (s *Store) PutEndpoint(ctx context.Context, ep EndpointState) error {
	if ep.Name == "" || len(ep.Name) > MaxIDLen {
		return fmt.Errorf("%w: bad endpoint name", ErrInvalid)
	}
	return s.do(ctx, 1, func(w *wtx) error {
		w.putEndpoint(&ep)
		return nil
	})
}

// applyEdit copies the fields Update and UpsertKey let a function change
// from edited onto a copy of cur.
func applyEdit(cur, edited *Record) *Record {
	r := cur.clone()
	r.Payload = bytes.Clone(edited.Payload)
	r.Headers = edited.Headers
	if r.Headers != nil {
		r.Headers = cloneMap(edited.Headers)
	}
	r.Method = edited.Method
	r.Destination = edited.Destination
	r.Endpoint = edited.Endpoint
	r.NextAttemptAt = edited.NextAttemptAt
	r.DeliverAt = edited.DeliverAt
	r.Key = edited.Key
	return r
}

// notBefore returns t, or deliverAt when that is later: when a record with
// that not-before time may be due.
func notBefore(t, deliverAt time.Time) time.Time {
	if deliverAt.After(t) {
		return deliverAt
	}
	return t
}

func cloneMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Update runs fn on a copy of the pending record with that ID inside the
// write transaction, serialized with every other write, and stores the
// result: a read-modify-write that never loses a concurrent update. fn may
// change Payload, Headers, Method, Destination, Endpoint, NextAttemptAt,
// DeliverAt and Key; other changes are ignored. If fn returns an error nothing is written
// and Update returns it. fn runs once, on the committer goroutine, while
// other writers wait: keep it short and free of I/O. A panic in fn is raised
// again in the caller's goroutine.
//
// It returns a copy of the stored record (with its new Version), or
// ErrNotFound when no pending record has that ID.
func (s *Store) Update(ctx context.Context, id string, fn func(r *Record) error) (*Record, error) {
	var out *Record
	err := s.do(ctx, 1, func(w *wtx) error {
		cur, err := w.getPending(id)
		if err != nil {
			return err
		}
		if cur == nil {
			return fmt.Errorf("%w: no pending record %q", ErrNotFound, id)
		}
		edited := cur.clone()
		if err := w.user(func() error { return fn(edited) }); err != nil {
			return err
		}
		if len(edited.Key) > MaxKeyLen {
			return fmt.Errorf("%w: key of %d bytes (max %d)", ErrInvalid, len(edited.Key), MaxKeyLen)
		}
		if len(edited.Endpoint) > MaxEndpointLen {
			return fmt.Errorf("%w: endpoint of %d bytes (max %d)", ErrInvalid, len(edited.Endpoint), MaxEndpointLen)
		}
		r := applyEdit(cur, edited)
		w.update(r, cur)
		out = r.clone()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// update stores r, an edit of the pending record cur, with an OpUpdate entry.
func (w *wtx) update(r, cur *Record) {
	lsn := w.next()
	r.Version = lsn
	if r.Key != cur.Key {
		r.seq = lsn // joins the end of its new key's queue
	}
	frame := EncodeRecord(r)
	w.putPending(r, cur, frame)
	w.log(lsn, OpUpdate, r.ID, frame, "")
}

// oldestOfKey returns the oldest pending record with that key, or nil.
func (w *wtx) oldestOfKey(key string) (*Record, error) {
	if !w.keyIndex {
		return nil, ErrNoKeyIndex
	}
	w.flushKeyPuts()
	p := keyPrefix(key)
	k, _ := w.keys.Cursor().Seek(p)
	if k == nil || !bytes.HasPrefix(k, p) || len(k) < len(p)+8 {
		return nil, nil
	}
	id := string(k[len(p)+8:])
	r, err := w.getPending(id)
	if err == nil && r == nil {
		err = fmt.Errorf("%w: key index names %q, which is not pending", ErrCorrupt, id)
	}
	return r, err
}

// UpsertKey finds, inside one write transaction, the oldest pending record
// with that key (nil if none) and calls fn with a copy of it to get the
// record to store (coalescing: latest state wins).
//
//   - If current != nil and fn returns a record with the same ID, the record
//     is updated in place (OpUpdate, same fields as Update may change).
//   - Otherwise the returned record is inserted (OpEnqueue, defaults as in
//     Insert) and current, if any, is removed with OpSupersede and
//     tombstoned. The new ID must not be stored or tombstoned already
//     (*ConflictError).
//
// The returned record's Key must be key (an empty Key is set to it). It
// returns a copy of the stored record. fn runs once on the committer
// goroutine; a panic in it is raised again in the caller's goroutine.
//
// UpsertKey needs the key index: without it (Options.NoKeyIndex) it fails
// with ErrNoKeyIndex and fn is not called.
func (s *Store) UpsertKey(ctx context.Context, key string, fn func(current *Record) (*Record, error)) (*Record, error) {
	if key == "" || len(key) > MaxKeyLen {
		return nil, fmt.Errorf("%w: bad key", ErrInvalid)
	}
	var out *Record
	err := s.do(ctx, 1, func(w *wtx) (err error) {
		out, err = w.upsertKey(key, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// upsertKey is UpsertKey inside the transaction (key already validated). It
// returns a copy of the stored record.
func (w *wtx) upsertKey(key string, fn func(current *Record) (*Record, error)) (*Record, error) {
	cur, err := w.oldestOfKey(key)
	if err != nil {
		return nil, err
	}
	var rec *Record
	if err := w.user(func() (err error) { rec, err = fn(cur.clone()); return err }); err != nil {
		return nil, err
	}
	if err := validateRecord(rec); err != nil {
		return nil, err
	}
	rec = rec.clone()
	if rec.Key == "" {
		rec.Key = key
	}
	if rec.Key != key {
		return nil, fmt.Errorf("%w: upsert for key %q returned a record with key %q", ErrInvalid, key, rec.Key)
	}
	if cur != nil && rec.ID == cur.ID {
		r := applyEdit(cur, rec)
		w.update(r, cur)
		return r.clone(), nil
	}
	st, _, err := w.insertCheck(rec, false)
	if err != nil {
		return nil, err
	}
	if st != Inserted {
		return nil, &ConflictError{ID: rec.ID}
	}
	rec.DeadReason, rec.DeadAt = "", time.Time{}
	rec.Attempts, rec.Deliveries = 0, 0
	if cur != nil {
		lsn := w.next()
		w.removePending(cur)
		w.tombstone(cur.ID, tombDelivered)
		w.log(lsn, OpSupersede, cur.ID, nil, "superseded by "+rec.ID)
	}
	w.insertNew(rec)
	return rec.clone(), nil
}

// Drop deletes a pending or dead record and leaves a tombstone (OpDrop with
// reason, default "dropped by operator") that says so: while it lasts, Get
// reports StateDeleted and Insert reports the ID as Deleted. ErrNotFound
// when there is none.
func (s *Store) Drop(ctx context.Context, id string, reason string) error {
	return s.do(ctx, 1, func(w *wtx) error {
		cur, err := w.getPending(id)
		if err != nil {
			return err
		}
		var dead *Record
		if cur == nil {
			if dead, err = w.getDead(id); err != nil {
				return err
			}
			if dead == nil {
				return fmt.Errorf("%w: no pending or dead record %q", ErrNotFound, id)
			}
		}
		lsn := w.next()
		if cur != nil {
			w.removePending(cur)
		} else {
			w.removeDead(dead)
		}
		w.tombstone(id, tombDeleted)
		w.log(lsn, OpDrop, id, nil, cmp.Or(reason, "dropped by operator"))
		return nil
	})
}

// Replay moves a dead letter back to pending: Attempts reset to 0, DeadAt
// and DeadReason cleared, due at now, or at its DeliverAt when that is
// still ahead (OpReplay). Deliveries, LastStatus and
// LastError are kept. ErrNotDead when the record is pending, ErrNotFound when
// it is neither pending nor dead.
func (s *Store) Replay(ctx context.Context, id string, now time.Time) (*Record, error) {
	var out *Record
	err := s.do(ctx, 1, func(w *wtx) error {
		dead, err := w.getDead(id)
		if err != nil {
			return err
		}
		if dead == nil {
			if w.events.Get([]byte(id)) != nil {
				return fmt.Errorf("%w: %q is pending", ErrNotDead, id)
			}
			return fmt.Errorf("%w: no dead record %q", ErrNotFound, id)
		}
		out = w.replay(dead, now).clone()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// replay moves the dead record dead back to pending (see Replay) and
// returns the stored record.
func (w *wtx) replay(dead *Record, now time.Time) *Record {
	lsn := w.next()
	r := dead.clone()
	r.Attempts = 0
	r.DeadAt, r.DeadReason = time.Time{}, ""
	r.NextAttemptAt = notBefore(now, r.DeliverAt)
	r.Version, r.seq = lsn, lsn
	frame := EncodeRecord(r)
	w.removeDead(dead)
	w.putPending(r, nil, frame)
	w.log(lsn, OpReplay, r.ID, frame, "replayed")
	return r
}

// SetShippedLSN records that every changelog entry up to lsn has been
// shipped, and turns the shipping floor on for good: from then on
// TrimChangelog never removes an entry above the shipped LSN.
func (s *Store) SetShippedLSN(ctx context.Context, lsn uint64) error {
	return s.do(ctx, 1, func(w *wtx) error {
		if lsn > w.lsn {
			return fmt.Errorf("%w: shipped LSN %d is past the last LSN %d", ErrInvalid, lsn, w.lsn)
		}
		w.put(w.meta, metaShipped, u64(lsn))
		w.put(w.meta, metaShipping, []byte{1})
		return nil
	})
}
