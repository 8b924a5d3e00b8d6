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
	// MaxRecords bounds the records of the batch, with Spent: those the
	// same call made before (earlier enqueues of one transaction). Zero or
	// negative: no bound.
	MaxRecords, Spent int
}

// TooMany is the error of a batch whose events would make more records
// than BatchConfig.MaxRecords allows: Records counts them all (with
// BatchConfig.Spent), Limit is MaxRecords.
type TooMany struct {
	Records, Limit int
}

func (e *TooMany) Error() string {
	return Itoa(e.Records) + " records is over the limit of " + Itoa(e.Limit)
}

// NewBatch checks events and builds their records and IDs, created now
// (checkNow is the time DeliverAt is checked against). A topic event gets
// one record per subscribed endpoint, one record kept unrouted, or none
// when it is dropped unrouted (counted in Dropped). When the records would
// number more than c.MaxRecords (with c.Spent), it builds none of them and
// returns a *TooMany counting them all.
func NewBatch(events []Fields, c *BatchConfig, now, checkNow time.Time) (*Batch, error) {
	b := &Batch{Recs: make([]*store.Record, 0, len(events)), IDs: make([]string, len(events))}
	total := c.Spent
	for i := range events {
		f := events[i]
		if f.TraceParent == "" || !traceparent.Valid(f.TraceParent) {
			f.TraceParent, f.TraceState = c.TraceParent, c.TraceState
		}
		endpoint, bad := Check(i, &f, c.Limits, c.Resolve, checkNow)
		if bad != nil {
			return nil, bad
		}
		var eps []string
		if f.Topic != "" {
			if b.Router == nil {
				b.Router = c.Router()
				b.topics = true
			}
			eps = b.Router.Endpoints(f.Topic, f.Headers)
		}
		total += b.recordsOf(f.Topic, len(eps), c.DropUnrouted)
		if c.MaxRecords > 0 && total > c.MaxRecords {
			b.Recs = nil // counting on, to say how many there would be
			continue
		}
		if err := b.add(i, f, endpoint, eps, c, now); err != nil {
			return nil, err
		}
	}
	if c.MaxRecords > 0 && total > c.MaxRecords {
		return nil, &TooMany{Records: total, Limit: c.MaxRecords}
	}
	return b, nil
}

// recordsOf is how many records an event makes: one without a topic, one
// per subscribed endpoint (of n), one kept unrouted or none dropped.
func (b *Batch) recordsOf(topic string, n int, dropUnrouted bool) int {
	switch {
	case topic == "":
		return 1
	case n > 0:
		return n
	case dropUnrouted:
		return 0
	default:
		return 1
	}
}

// add builds the records of the checked event f with index i: its own, or
// one delivery per endpoint of eps (those subscribed to its topic).
func (b *Batch) add(i int, f Fields, endpoint string, eps []string, c *BatchConfig, now time.Time) error {
	r, err := Build(f, endpoint, now)
	if err != nil {
		return err
	}
	b.IDs[i] = r.ID
	n := len(b.Recs)
	switch {
	case r.Topic == "":
		b.Recs = append(b.Recs, r)
	case len(eps) > 0:
		for _, ep := range eps {
			b.Recs = append(b.Recs, route.DeliveryOf(r, ep))
		}
	case c.DropUnrouted:
		b.Dropped++
	default:
		b.Recs = append(b.Recs, route.KeepUnrouted(r, c.UnroutedRetention))
		b.Unrouted = true
	}
	for range len(b.Recs) - n {
		b.owner = append(b.owner, i)
	}
	return nil
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
