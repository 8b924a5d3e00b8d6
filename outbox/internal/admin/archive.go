package admin

import (
	"context"
	"time"

	"github.com/outboxd/outbox/outbox/internal/ratelimit"
	"github.com/outboxd/outbox/store"
)

// maxRequeueBatch is the most replayed deliveries one transaction stores:
// those whose paced time has come while the previous one committed.
const maxRequeueBatch = 64

// ArchiveReplay is what ReplayArchived replays and how fast.
type ArchiveReplay struct {
	// Query selects the archived deliveries, page by page (its After and
	// Limit are the pages').
	Query store.ArchiveQuery
	// Target turns an archived delivery into the delivery to store.
	Target func(*store.Record) *store.Record
	// Limit caps the deliveries replayed (0: all), PerSecond paces them.
	Limit     int
	PerSecond float64
	// Progress is called after each transaction with the counts so far:
	// deliveries stored, and skipped because their ID was pending or dead.
	Progress func(replayed, skipped int)
}

// ReplayArchived stores the archived deliveries r selects as new pending
// deliveries, paced as ReplayDead paces dead letters: the n-th at n /
// PerSecond seconds from the start. It returns when they are all done,
// ctx is done or the outbox stops (then with the error).
func (a *Admin) ReplayArchived(ctx context.Context, r ArchiveReplay) error {
	start := time.Now()
	done, skipped := 0, 0
	q := r.Query
	for {
		page, err := a.St.SearchArchive(q)
		if err != nil {
			return a.MapErr("replay archive", "", err)
		}
		recs := page.Records
		for len(recs) > 0 {
			if r.Limit > 0 && done+skipped >= r.Limit {
				return nil
			}
			if err := a.pace(ctx, start.Add(ratelimit.Span(done+skipped, r.PerSecond))); err != nil {
				return err
			}
			n := a.dueNow(start, done+skipped, min(len(recs), maxRequeueBatch), r)
			batch := make([]*store.Record, n)
			for i := range batch {
				batch[i] = r.Target(&recs[i].Record)
			}
			stored, err := a.St.Requeue(ctx, batch, a.Now().UTC())
			if err != nil {
				return a.MapErr("replay archive", "", err)
			}
			for _, ok := range stored {
				if ok {
					done++
				} else {
					skipped++
				}
			}
			r.Progress(done, skipped)
			a.Wake()
			recs = recs[n:]
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}

// dueNow returns how many of the next deliveries, up to most (the first
// being the n-th of the replay) are due by the pace now: at least one.
func (a *Admin) dueNow(start time.Time, n, most int, r ArchiveReplay) int {
	if r.Limit > 0 {
		most = min(most, r.Limit-n)
	}
	k := 1
	for k < most && !start.Add(ratelimit.Span(n+k, r.PerSecond)).After(time.Now()) {
		k++
	}
	return k
}
