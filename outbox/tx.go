package outbox

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/outboxd/outbox/outbox/internal/records"
	"github.com/outboxd/outbox/outbox/internal/traceparent"
	"github.com/outboxd/outbox/store"
)

// Tx is a read-write transaction on the outbox's file (Update): the
// application's own buckets and the events it enqueues commit together, or
// none of them does.
//
// The application's buckets are the file's top-level buckets that are not
// the outbox's. The outbox never reads or writes them; Check walks their
// pages without judging their values, Compact keeps them, and the changelog
// (what Kafka shipping sends) does not carry them. They are bbolt's own *bbolt.Bucket values, valid until fn
// returns: use their whole API (Get, Put, Delete, cursors, nested buckets,
// NextSequence), but not their Tx method, which reaches past the
// application's namespace, and do not keep them after fn.
type Tx struct {
	o  *Outbox
	at *store.AppTx
	// What this run of fn enqueued, counted once the commit is durable.
	inserted, dups int
	// deliveries is the records this run's Tx.Enqueue calls built, bounded
	// by Config.MaxDeliveriesPerCall over the whole Update.
	deliveries int
	// The trace context of Update's ctx, for events without their own.
	traceparent, tracestate string
	// routeAfter is set when an event was kept unrouted: subscriptions set
	// while the transaction ran may route it (see Outbox.afterInsert).
	routeAfter bool
}

// Bucket returns the application's top-level bucket name, nil when it does
// not exist. The name of one of the outbox's own buckets returns nil and
// fails the whole Update with ErrReservedBucket, whatever fn returns.
func (tx *Tx) Bucket(name []byte) *bolt.Bucket { return tx.at.Bucket(name) }

// CreateBucketIfNotExists returns the application's top-level bucket name,
// creating it when needed. An outbox bucket's name fails with
// ErrReservedBucket, and so does the whole Update.
func (tx *Tx) CreateBucketIfNotExists(name []byte) (*bolt.Bucket, error) {
	b, err := tx.at.CreateBucketIfNotExists(name)
	return b, wrapStoreErr("update", err)
}

// DeleteBucket deletes the application's top-level bucket name and
// everything in it. An outbox bucket's name fails with ErrReservedBucket,
// and so does the whole Update.
func (tx *Tx) DeleteBucket(name []byte) error {
	return wrapStoreErr("update", tx.at.DeleteBucket(name))
}

// Enqueue enqueues events in the transaction, with the validation, dedup and
// answers of Outbox.Enqueue: they are stored (and delivered) only if the
// Update commits. An error stores nothing of this call; the transaction goes
// on, so return the error from fn to give the whole Update up.
// Config.MaxDeliveriesPerCall bounds the deliveries of all the Enqueue calls
// of one Update together (they commit together): the call that would take
// them over fails with a *TooManyDeliveriesError counting them all.
func (tx *Tx) Enqueue(events ...Event) ([]string, error) {
	if len(events) == 0 {
		return nil, nil
	}
	b, err := tx.o.newRecords(events, tx.traceparent, tx.tracestate, tx.deliveries)
	if err != nil {
		return nil, err
	}
	var statuses []store.InsertStatus
	if len(b.Recs) > 0 {
		statuses, err = tx.at.InsertWith(b.Recs, store.InsertOptions{RefuseDeleted: true})
		if err != nil {
			return nil, tx.o.insertErr(b.IDs, err)
		}
	}
	tx.deliveries += len(b.Recs)
	if b.Unrouted {
		tx.routeAfter = true
	}
	inserted, dups := records.Count(b.PerEvent(statuses))
	tx.inserted += inserted
	tx.dups += dups
	return b.IDs, nil
}

// Upsert is Outbox.Upsert in the transaction: fn sees the key's pending
// event as this transaction left it, and what it returns is stored only if
// the Update commits.
func (tx *Tx) Upsert(key string, fn func(current *Event) (Event, error)) (Event, error) {
	o := tx.o
	if err := o.checkUpsert(key, fn); err != nil {
		return Event{}, err
	}
	inserted := false
	stored, err := tx.at.UpsertKey(key, o.upsertFn(key, fn, &inserted))
	if err != nil {
		if _, ok := err.(*ValidationError); ok {
			return Event{}, err
		}
		o.eng.NoteStoreErr(err)
		return Event{}, mapErr("upsert", key, err)
	}
	if inserted {
		tx.inserted++
	}
	return eventFromRecord(stored, StatePending), nil
}

// ViewTx is a read-only transaction on the outbox's file (View): the
// application's own buckets, as Tx gives them, for reading.
type ViewTx struct {
	at *store.AppTx
}

// Bucket returns the application's top-level bucket name, nil when it does
// not exist; the bucket is read-only. The name of one of the outbox's own
// buckets returns nil and fails the View with ErrReservedBucket.
func (tx *ViewTx) Bucket(name []byte) *bolt.Bucket { return tx.at.Bucket(name) }

// Update runs fn in one read-write transaction on the outbox's file, in
// which the application reads and writes its own buckets and enqueues or
// upserts events (Tx): the outbox pattern. It returns nil once everything fn
// did is committed and fsynced; the events are then delivered as those of
// Enqueue are. Any error means none of it is stored:
//
//   - fn's error, returned as it is;
//   - a panic in fn, raised again in the caller's goroutine;
//   - fn naming one of the outbox's own buckets (ErrReservedBucket);
//   - ctx ending before the transaction starts to commit (ctx.Err()). Once
//     the commit started Update waits for it, whatever ctx does, so that its
//     answer is always the truth.
//
// Concurrent Updates and other writes share one commit (group commit), as
// concurrent Enqueues do. So fn runs on the outbox's committer while other
// writers wait, and it may run more than once: when another caller's
// function in the same commit fails or panics, the transaction is rolled
// back and run again without it. fn must keep to its Tx (no I/O, no calls
// to the Outbox, no effects a second run would repeat) and set any result
// it hands out anew on each run; the last run is the one that committed.
//
// Update fails with ErrClosed after Stop and with ErrReadOnly on an outbox
// opened with Config.ReadOnly.
func (o *Outbox) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if fn == nil {
		return errors.New("outbox: update: nil function")
	}
	if o.cfg.ReadOnly {
		return fmt.Errorf("outbox: update: %w", ErrReadOnly)
	}
	if err := o.refuseIfCorrupt(); err != nil {
		return err
	}
	var last *Tx
	tp, ts := traceparent.FromContext(ctx)
	rt := o.router.Load()
	err := o.st.AppUpdate(ctx, func(at *store.AppTx) error {
		last = &Tx{o: o, at: at, traceparent: tp, tracestate: ts}
		return fn(last)
	})
	if err != nil {
		return o.appErr("update", err)
	}
	o.enqueuedTotal.Add(uint64(last.inserted))
	o.duplicatesTotal.Add(uint64(last.dups))
	o.hookEnqueue(last.inserted)
	o.hookDuplicate(last.dups)
	if last.inserted > 0 {
		o.wake()
	}
	if last.routeAfter {
		o.afterInsert(ctx, rt, true)
	}
	return nil
}

// View runs fn in a read-only transaction on the outbox's file, with the
// application's own buckets (ViewTx). It works on an outbox opened with
// Config.ReadOnly. A ctx already ended returns its error before the
// transaction begins; fn's error is returned as it is and a panic in fn is
// raised again; naming an outbox bucket fails with ErrReservedBucket. Keep
// fn short: a long read transaction holds up the writers when the file must
// grow.
func (o *Outbox) View(ctx context.Context, fn func(tx *ViewTx) error) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if fn == nil {
		return errors.New("outbox: view: nil function")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := o.st.AppView(func(at *store.AppTx) error { return fn(&ViewTx{at: at}) })
	if err != nil {
		return o.appErr("view", err)
	}
	return nil
}

// appErr maps the error of an Update or View: the store's errors become the
// outbox's sentinels, the application's own come back as they are.
func (o *Outbox) appErr(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrReservedBucket), errors.Is(err, store.ErrClosed),
		errors.Is(err, store.ErrReadOnly):
		return wrapStoreErr(op, err)
	case errors.Is(err, store.ErrCorrupt):
		o.eng.NoteStoreErr(err)
		return wrapStoreErr(op, err)
	}
	return err
}
