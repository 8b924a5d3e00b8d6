package admin

import (
	"context"
	"time"

	"github.com/outboxd/outbox/outbox/internal/ratelimit"
	"github.com/outboxd/outbox/store"
)

// maxRequeueBatch is the most deliveries one transaction of a paced
// requeue stores: those whose paced time has come while the previous one
// committed.
const maxRequeueBatch = 64

// Requeue is a paced run of store.Requeue, as ReplayDead paces dead
// letters: the n-th delivery at n / PerSecond seconds from the start. It
// serves the replay from the archive and the backfill of a subscription.
type Requeue struct {
	// Target turns a stored record into the delivery to store (nil: the
	// record itself); Keep, when set, passes over the records it refuses.
	Target func(*store.Record) *store.Record
	Keep   func(*store.Record) bool
	// Limit caps the deliveries looked at (0: all), PerSecond paces them.
	Limit     int
	PerSecond float64
	// Options are the store's (a backfill skips the delivered).
	Options store.RequeueOptions
	// Progress is called after each transaction with the counts so far:
	// deliveries stored, and skipped because their ID was known.
	Progress func(requeued, skipped int)

	start           time.Time
	requeued, skips int
}

// full reports whether the run has looked at Limit deliveries.
func (r *Requeue) full() bool { return r.Limit > 0 && r.requeued+r.skips >= r.Limit }

// ReplayArchived stores the archived deliveries that q selects (page by
// page: q.After and q.Limit are the pages') as new pending deliveries,
// paced by r. It returns when they are all done or r is full, when ctx is
// done or the outbox stops (then with the error).
func (a *Admin) ReplayArchived(ctx context.Context, q store.ArchiveQuery, r *Requeue) error {
	for !r.full() {
		page, err := a.St.SearchArchive(q)
		if err != nil {
			return a.MapErr("replay archive", "", err)
		}
		recs := make([]*store.Record, len(page.Records))
		for i, ar := range page.Records {
			recs[i] = &ar.Record
		}
		if err := a.requeue(ctx, recs, r); err != nil || page.Next == "" {
			return err
		}
		q.After = page.Next
	}
	return nil
}

// RequeuePending stores, for the pending records that r keeps, the
// deliveries r.Target makes of them, paced by r (a backfill: the pending
// events' deliveries to a new endpoint).
func (a *Admin) RequeuePending(ctx context.Context, r *Requeue, pageSize int) error {
	after := ""
	for !r.full() {
		recs, next, err := a.St.List(store.ListQuery{State: store.StatePending, After: after, Limit: pageSize, Filter: r.Keep})
		if err != nil {
			return a.MapErr("backfill", "", err)
		}
		if err := a.requeue(ctx, recs, r); err != nil || next == "" {
			return err
		}
		after = next
	}
	return nil
}

// requeue stores the deliveries of recs that r keeps, paced, a batch of
// those due per transaction.
func (a *Admin) requeue(ctx context.Context, recs []*store.Record, r *Requeue) error {
	if r.start.IsZero() {
		r.start = time.Now()
	}
	if r.Keep != nil {
		kept := recs[:0:0]
		for _, rec := range recs {
			if r.Keep(rec) {
				kept = append(kept, rec)
			}
		}
		recs = kept
	}
	for len(recs) > 0 && !r.full() {
		if err := a.pace(ctx, r.start.Add(ratelimit.Span(r.requeued+r.skips, r.PerSecond))); err != nil {
			return err
		}
		n := r.dueNow(min(len(recs), maxRequeueBatch))
		batch := make([]*store.Record, n)
		for i := range batch {
			batch[i] = recs[i]
			if r.Target != nil {
				batch[i] = r.Target(recs[i])
			}
		}
		stored, err := a.St.Requeue(ctx, batch, a.Now().UTC(), r.Options)
		if err != nil {
			return a.MapErr("requeue", "", err)
		}
		for _, ok := range stored {
			if ok {
				r.requeued++
			} else {
				r.skips++
			}
		}
		if r.Progress != nil {
			r.Progress(r.requeued, r.skips)
		}
		a.Wake()
		recs = recs[n:]
	}
	return nil
}

// dueNow returns how many of the next deliveries, up to most, are due by
// the pace now: at least one.
func (r *Requeue) dueNow(most int) int {
	n := r.requeued + r.skips
	if r.Limit > 0 {
		most = min(most, r.Limit-n)
	}
	k := 1
	for k < most && !r.start.Add(ratelimit.Span(n+k, r.PerSecond)).After(time.Now()) {
		k++
	}
	return k
}
