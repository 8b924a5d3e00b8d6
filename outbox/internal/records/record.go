package records

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outbox/outbox/internal/traceparent"
	"github.com/outboxd/outbox/store"
)

// Build returns the record of the checked event f for endpoint, created
// now. An event without an ID gets a UUIDv7.
func Build(f Fields, endpoint string, now time.Time) (*store.Record, error) {
	if f.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("outbox: generate ID: %w", err)
		}
		f.ID = id.String()
	}
	var deliverAt time.Time
	if !f.DeliverAt.IsZero() {
		deliverAt = f.DeliverAt.UTC()
	}
	tp, ts := traceparent.Normalize(f.TraceParent, f.TraceState)
	return &store.Record{
		ID:            f.ID,
		Key:           f.Key,
		Destination:   f.Destination,
		Endpoint:      endpoint,
		Topic:         f.Topic,
		Method:        f.Method,
		Headers:       maps.Clone(f.Headers),
		Payload:       append([]byte(nil), f.Payload...),
		CreatedAt:     now,
		NextAttemptAt: NotBefore(now, deliverAt),
		DeliverAt:     deliverAt,
		TraceParent:   tp,
		TraceState:    ts,
	}, nil
}

// Update returns a copy of the pending record cur with the content of the
// checked event f for endpoint: its payload, headers, method and
// destination are replaced, its attempts and schedule kept, except that a
// changed DeliverAt reschedules it to the new time (or to now when that is
// zero or has passed).
func Update(cur *store.Record, f Fields, endpoint string, now time.Time) *store.Record {
	r := *cur
	r.Destination = f.Destination
	r.Endpoint = endpoint
	r.Method = f.Method
	r.Headers = maps.Clone(f.Headers)
	r.Payload = append([]byte(nil), f.Payload...)
	if !f.DeliverAt.Equal(cur.DeliverAt) {
		r.DeliverAt = time.Time{}
		if !f.DeliverAt.IsZero() {
			r.DeliverAt = f.DeliverAt.UTC()
		}
		r.NextAttemptAt = NotBefore(now, r.DeliverAt)
	}
	return &r
}

// NotBefore returns now, or deliverAt when that is later: when an event
// with that not-before time may next be attempted.
func NotBefore(now, deliverAt time.Time) time.Time {
	if deliverAt.After(now) {
		return deliverAt
	}
	return now
}

// FirstConflict finds an ID given twice in fs with other content (key,
// destination, method, headers or payload), as the store compares records
// (an empty Method is POST).
func FirstConflict(fs []Fields) (id string, found bool) {
	if len(fs) < 2 {
		return "", false
	}
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(fs[a].ID, fs[b].ID) })
	for k := 1; k < len(order); k++ {
		a, b := &fs[order[k-1]], &fs[order[k]]
		if a.ID == "" || a.ID != b.ID {
			continue
		}
		if !sameContent(a, b) {
			return b.ID, true
		}
	}
	return "", false
}

func sameContent(a, b *Fields) bool {
	return a.Key == b.Key && a.Destination == b.Destination &&
		cmp.Or(a.Method, "POST") == cmp.Or(b.Method, "POST") &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Payload, b.Payload)
}
