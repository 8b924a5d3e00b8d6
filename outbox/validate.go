package outbox

import (
	"bytes"
	"cmp"
	"maps"
	"slices"

	"github.com/outboxd/outbox/store"
)

// Validate checks events as Enqueue would before storing them, and stores
// nothing: an invalid event is a *ValidationError naming its index and field
// (errors.Is(err, ErrInvalid)), and an ID given twice in the call with other
// content (key, destination, method, headers or payload) is an error
// wrapping ErrConflict that ConflictingID reads. What only the store can
// tell (an ID already pending with other content, or deleted by an operator)
// is not checked.
//
// It is for callers that hand events to another outbox than this one, with
// the same configuration and Sink: outboxd in Kafka group mode validates
// what POST /v1/events receives against its local outbox before producing
// it to the topic the partition owners ingest from, so that a bad event is
// refused with the same answer as in single-machine mode instead of
// becoming a dead letter on its owner.
func (o *Outbox) Validate(events ...Event) error {
	for i := range events {
		ev := events[i]
		if _, err := o.validateEvent(i, &ev, true); err != nil {
			return err
		}
	}
	if len(events) < 2 {
		return nil
	}
	order := make([]int, len(events))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(events[a].ID, events[b].ID) })
	for k := 1; k < len(order); k++ {
		a, b := &events[order[k-1]], &events[order[k]]
		if a.ID == "" || a.ID != b.ID {
			continue
		}
		if !sameEventContent(a, b) {
			return mapErr("enqueue", "", &store.ConflictError{ID: b.ID})
		}
	}
	return nil
}

// sameEventContent reports whether a and b carry the same caller-owned
// content, as the store compares records (an empty Method is POST).
func sameEventContent(a, b *Event) bool {
	return a.Key == b.Key && a.Destination == b.Destination &&
		cmp.Or(a.Method, "POST") == cmp.Or(b.Method, "POST") &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Payload, b.Payload)
}
