package outbox

import (
	"cmp"
	"slices"
	"strings"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

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
