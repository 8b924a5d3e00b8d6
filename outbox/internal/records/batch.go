package records

import (
	"time"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/outbox/internal/traceparent"
	"github.com/outboxd/outbox/store"
)

// Batch is the records of the events of one enqueue call.
type Batch struct {
	Recs []*store.Record
	IDs  []string // the events' IDs
	// owner is the index of each record's event: a topic event has one
	// record per delivery, and an event dropped unrouted none.
	owner []int
	// Router is the router the topic events were routed with, and Unrouted
	// tells whether one of them was kept unrouted.
	Router   *route.Router
	Unrouted bool
	// Dropped counts the topic events dropped unrouted.
	Dropped int
	topics  bool // a topic event is among the events: owner is not the identity
}

// BatchConfig is what building a batch needs besides its events.
type BatchConfig struct {
	Limits  Limits
	Resolve Resolver
	// Router returns the subscriptions in use, read once per batch.
	Router func() *route.Router
	// DropUnrouted drops a topic event no endpoint subscribes to, instead
	// of keeping it unrouted for UnroutedRetention.
	DropUnrouted      bool
	UnroutedRetention time.Duration
	// TraceParent and TraceState are the trace context of an event
	// without a valid TraceParent of its own (the caller's, or none).
	TraceParent, TraceState string
}

// NewBatch checks events and builds their records and IDs, created now
// (checkNow is the time DeliverAt is checked against). A topic event gets
// one record per subscribed endpoint, one record kept unrouted, or none
// when it is dropped unrouted (counted in Dropped).
func NewBatch(events []Fields, c *BatchConfig, now, checkNow time.Time) (*Batch, error) {
	b := &Batch{Recs: make([]*store.Record, 0, len(events)), IDs: make([]string, len(events))}
	for i := range events {
		f := events[i]
		if f.TraceParent == "" || !traceparent.Valid(f.TraceParent) {
			f.TraceParent, f.TraceState = c.TraceParent, c.TraceState
		}
		endpoint, bad := Check(i, &f, c.Limits, c.Resolve, checkNow)
		if bad != nil {
			return nil, bad
		}
		r, err := Build(f, endpoint, now)
		if err != nil {
			return nil, err
		}
		b.IDs[i] = r.ID
		if r.Topic == "" {
			b.Recs = append(b.Recs, r)
			b.owner = append(b.owner, i)
			continue
		}
		if b.Router == nil {
			b.Router = c.Router()
			b.topics = true
		}
		n := len(b.Recs)
		b.Recs = b.Router.FanOut(b.Recs, r)
		switch {
		case len(b.Recs) > n:
		case c.DropUnrouted:
			b.Dropped++
			continue
		default:
			b.Recs = append(b.Recs, route.KeepUnrouted(r, c.UnroutedRetention))
			b.Unrouted = true
		}
		for range len(b.Recs) - n {
			b.owner = append(b.owner, i)
		}
	}
	return b, nil
}

// PerEvent folds the statuses of the batch's records into one per stored
// event: Inserted when its records were (all of them are, or none), the
// status of one that was not otherwise (a duplicate). An event dropped
// unrouted has none.
func (b *Batch) PerEvent(statuses []store.InsertStatus) []store.InsertStatus {
	if !b.topics {
		return statuses // one record per event
	}
	out := make([]store.InsertStatus, 0, len(b.IDs))
	for i, s := range statuses {
		if i > 0 && b.owner[i] == b.owner[i-1] {
			if s != store.Inserted {
				out[len(out)-1] = s
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// Count returns how many of statuses are Inserted and how many duplicates.
func Count(statuses []store.InsertStatus) (inserted, dups int) {
	for _, s := range statuses {
		if s == store.Inserted {
			inserted++
		} else {
			dups++
		}
	}
	return inserted, dups
}
