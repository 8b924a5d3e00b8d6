package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outbox/outbox/internal/records"
	"github.com/outboxd/outbox/outbox/internal/route"
	tracectx "github.com/outboxd/outbox/outbox/internal/traceparent"
	"github.com/outboxd/outbox/store"
)

// Enqueue stores events for delivery and returns their IDs in order (the
// generated UUIDv7 for events without one). It returns once the events are
// durable (committed and fsynced); concurrent callers share commits.
//
// Every event is validated first (*ValidationError naming the event and the
// field, errors.Is(err, ErrInvalid)); nothing is stored when one is invalid.
// An event whose ID is already pending or dead with the same content, or was
// delivered within the tombstone retention, is a duplicate: it is counted and
// skipped, not an error. An ID reused with other content fails the whole call
// with an error wrapping ErrConflict. An ID that an operator deleted (Delete)
// within the tombstone retention fails the whole call with a *DeletedError
// (errors.Is(err, ErrDeleted)): the event will not be delivered, and the
// caller is told so. Nothing of a failed call is stored.
//
// Only the caller-owned fields of the events are read (ID, Key,
// Destination, Method, Headers, Payload, DeliverAt, TraceParent,
// TraceState); the outbox keeps its own copies. An event with a DeliverAt
// ahead is first due then. An event without a valid TraceParent is stored
// with the trace context of ctx's span (see the package doc, "Tracing").
func (o *Outbox) Enqueue(ctx context.Context, events ...Event) ([]string, error) {
	return o.enqueue(ctx, events, true)
}

// Ingest is Enqueue for events read from a source that may hand over the
// same event again (a Kafka consumer re-reading after a rebalance, a queue
// that redelivers after a crash): an event whose ID an operator deleted
// within the tombstone retention is taken for a repeat of the deleted event
// and skipped as a duplicate (counted in Stats.DuplicatesTotal), where
// Enqueue fails with ErrDeleted. Nobody waits on such a source for the
// answer, and an error would only hold it up. Everything else is as Enqueue.
func (o *Outbox) Ingest(ctx context.Context, events ...Event) ([]string, error) {
	return o.enqueue(ctx, events, false)
}

// enqueue is Enqueue (refuseDeleted) and Ingest.
func (o *Outbox) enqueue(ctx context.Context, events []Event, refuseDeleted bool) ([]string, error) {
	if err := o.enter(); err != nil {
		return nil, err
	}
	defer o.ops.Done()
	if len(events) == 0 {
		return nil, nil
	}
	if err := o.refuseIfCorrupt(); err != nil {
		return nil, err
	}
	ctx, span, tp, ts := tracectx.StartEnqueue(ctx, o.tracer, SpanEnqueue, len(events))
	b, err := o.newRecords(events, tp, ts, 0)
	if err != nil {
		tracectx.EndSpan(span, err)
		return nil, err
	}
	var statuses []store.InsertStatus
	if len(b.Recs) > 0 {
		statuses, err = o.st.InsertWith(ctx, b.Recs, store.InsertOptions{RefuseDeleted: refuseDeleted})
		if err != nil {
			err = o.insertErr(b.IDs, err)
			tracectx.EndSpan(span, err)
			return nil, err
		}
	}
	span.End()
	o.countInserted(b.PerEvent(statuses))
	o.afterInsert(ctx, b.Router, b.Unrouted)
	return b.IDs, nil
}

// newRecords validates events and builds their records and IDs (see
// records.NewBatch). An event without a valid TraceParent of its own takes
// traceparent and tracestate (the caller's trace context, or none). Topic
// events dropped unrouted are counted and logged here. spent is the
// deliveries the same call created before (earlier Tx.Enqueue calls of an
// Update), counted against Config.MaxDeliveriesPerCall.
func (o *Outbox) newRecords(events []Event, traceparent, tracestate string, spent int) (*records.Batch, error) {
	fs := make([]records.Fields, len(events))
	for i := range events {
		fs[i] = events[i].fields()
	}
	c := &records.BatchConfig{Limits: o.limits(), Router: o.router.Load,
		DropUnrouted: o.cfg.Unrouted == UnroutedDrop, UnroutedRetention: o.cfg.UnroutedRetention,
		TraceParent: traceparent, TraceState: tracestate, MaxRecords: o.cfg.MaxDeliveriesPerCall, Spent: spent}
	if o.resolver != nil {
		c.Resolve = o.resolver.ResolveEndpoint
	}
	now := o.clock.Now()
	b, err := records.NewBatch(fs, c, now.UTC(), now)
	var over *records.TooMany
	if errors.As(err, &over) {
		return nil, &TooManyDeliveriesError{Deliveries: over.Records, Limit: over.Limit}
	}
	if err != nil {
		return nil, validationErr(err)
	}
	if b.Dropped > 0 {
		o.unroutedDropped.Add(uint64(b.Dropped))
		o.log.Warn("outbox: events dropped: no endpoint subscribes to their topic (Config.Unrouted is drop)", "dropped", b.Dropped)
	}
	return b, nil
}

// insertErr maps the error of an insert of the events with ids.
func (o *Outbox) insertErr(ids []string, err error) error {
	var de *store.DeletedError
	if errors.As(err, &de) {
		i := 0
		for i < len(ids)-1 && ids[i] != de.ID {
			i++
		}
		return &DeletedError{Index: i, ID: de.ID, DeletedAt: de.DeletedAt.UTC()}
	}
	o.eng.NoteStoreErr(err)
	return mapErr("enqueue", "", err)
}

// EnqueueDead stores ev directly as a dead letter with reason, for input that
// cannot be delivered as it is (an unmappable Kafka record, say) but must not
// be lost. It validates like Enqueue, except that the destination may be
// unknown to the Sink, and treats known IDs as Ingest does: an ID that an
// operator deleted within the tombstone retention is a duplicate (such
// input is mostly read again from a source). It returns the event's ID.
func (o *Outbox) EnqueueDead(ctx context.Context, ev Event, reason string) (string, error) {
	if err := o.enter(); err != nil {
		return "", err
	}
	defer o.ops.Done()
	if reason == "" {
		reason = "enqueued as dead"
	}
	now := o.clock.Now().UTC()
	r, err := o.newRecordLax(ev, now)
	if err != nil {
		return "", err
	}
	r.DeadReason = reason
	r.DeadAt = now
	statuses, err := o.st.Insert(ctx, []*store.Record{r})
	if err != nil {
		return "", mapErr("enqueue dead", "", err)
	}
	o.countInserted(statuses)
	return store.GroupOf(r.ID), nil
}

func (o *Outbox) countInserted(statuses []store.InsertStatus) {
	inserted, dups := records.Count(statuses)
	o.enqueuedTotal.Add(uint64(inserted))
	o.duplicatesTotal.Add(uint64(dups))
	o.hookEnqueue(inserted)
	o.hookDuplicate(dups)
	if inserted > 0 {
		o.wake()
	}
}

// newRecordLax validates ev and builds its record, for dead letters: a
// destination the Sink rejects is kept as it is, as its own endpoint (that
// may be why the event is dead); everything else is validated as usual.
func (o *Outbox) newRecordLax(ev Event, now time.Time) (*store.Record, error) {
	f, endpoint, err := o.check(0, &ev, false)
	if err != nil {
		return nil, err
	}
	if o.resolver != nil && ev.Topic == "" {
		if ep, rerr := o.resolver.ResolveEndpoint(ev.Destination); rerr == nil && ep != "" {
			endpoint = ep
		}
	}
	r, err := records.Build(f, endpoint, now)
	if err == nil && r.Topic != "" {
		r.ID = route.DeliveryID(r.ID, "") // a topic event dead before it was routed
	}
	return r, err
}

// Upsert coalesces by key (latest state wins, as a compacted topic would):
// inside one serialized write transaction it finds the oldest pending event
// with that key (nil when none), calls fn with a copy of it, and stores the
// event fn returns. Concurrent upserts of one key never lose an update, since
// each fn sees the result of the previous one.
//
// When fn returns an event with an empty ID or the current event's ID, the
// current event is updated in place: its payload, headers, method,
// destination and DeliverAt are replaced, its attempts and schedule are
// kept (except that a changed DeliverAt reschedules it to the new time, or
// to now when that is zero or has passed: copy current.DeliverAt to keep
// it), and its Version changes, so that a delivery of the old version that
// succeeds afterwards does not delete the new one (it is delivered in
// turn). Another ID replaces the current event (its tombstone says it was
// superseded) with a new one. fn runs while the store's write lock is held: keep it short and do
// not call the Outbox from it; an error from fn aborts the upsert and is
// returned. The event's Key is always key. Upsert needs the store's key
// index: with Config.NoKeyIndex it fails with ErrNoKeyIndex.
func (o *Outbox) Upsert(ctx context.Context, key string, fn func(current *Event) (Event, error)) (Event, error) {
	if err := o.enter(); err != nil {
		return Event{}, err
	}
	defer o.ops.Done()
	if err := o.checkUpsert(key, fn); err != nil {
		return Event{}, err
	}
	inserted := false
	stored, err := o.st.UpsertKey(ctx, key, o.upsertFn(key, fn, &inserted))
	if err != nil {
		if _, ok := err.(*ValidationError); ok {
			return Event{}, err
		}
		return Event{}, mapErr("upsert", key, err)
	}
	if inserted {
		o.enqueuedTotal.Add(1)
		o.hookEnqueue(1)
	}
	o.wake()
	return eventFromRecord(stored, StatePending), nil
}

// upsertFn is the store's upsert function for Upsert's fn: *inserted tells,
// after each call, whether it made a new event rather than an update.
func (o *Outbox) upsertFn(key string, fn func(current *Event) (Event, error), inserted *bool) func(cur *store.Record) (*store.Record, error) {
	return func(cur *store.Record) (*store.Record, error) {
		*inserted = false
		var curEv *Event
		if cur != nil {
			e := eventFromRecord(cur, StatePending)
			curEv = &e
		}
		ev, err := fn(curEv)
		if err != nil {
			return nil, err
		}
		if ev.Key != "" && ev.Key != key {
			return nil, &ValidationError{Field: "key", Reason: "differs from the upserted key " + quote(key)}
		}
		if ev.Topic != "" {
			return nil, &ValidationError{Field: "topic", Reason: "Upsert coalesces the events of one destination; a topic event cannot be upserted"}
		}
		ev.Key = key
		if ev.ID == "" && cur != nil {
			ev.ID = cur.ID
		}
		f, endpoint, err := o.check(0, &ev, true)
		if err != nil {
			return nil, err
		}
		now := o.clock.Now().UTC()
		if cur != nil && ev.ID == cur.ID {
			return records.Update(cur, f, endpoint, now), nil
		}
		*inserted = true
		return records.Build(f, endpoint, now)
	}
}

// checkUpsert refuses an Upsert call without a key or fn, or on an outbox
// without its key index.
func (o *Outbox) checkUpsert(key string, fn func(current *Event) (Event, error)) error {
	if key == "" {
		return &ValidationError{Field: "key", Reason: "required for Upsert"}
	}
	if fn == nil {
		return &ValidationError{Field: "fn", Reason: "required for Upsert"}
	}
	if o.cfg.NoKeyIndex {
		return fmt.Errorf("outbox: upsert %q: %w: %w", key, ErrNoKeyIndex, store.ErrNoKeyIndex)
	}
	return nil
}

// DefaultMaxSchedule is Config.MaxSchedule's default: 30 days.
const DefaultMaxSchedule = 30 * 24 * time.Hour

// TracerName is the instrumentation scope of the outbox's spans.
const TracerName = "github.com/outboxd/outbox/outbox"

// The names of the outbox's spans.
const (
	// SpanEnqueue covers one Enqueue or Ingest call: validation and the
	// wait for the durable (group) commit of its events.
	SpanEnqueue = "outbox.enqueue"
	// SpanDeliver covers one delivery attempt: the Sink's Deliver call.
	SpanDeliver = "outbox.deliver"
)
