package console

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// deliverySep separates a topic event's ID from the endpoint in the ID
// its deliveries' changelog entries carry (the store ID of the delivery;
// nothing after it for the event while it was kept unrouted).
const deliverySep = "\x1f"

// eventHistory returns the changelog entries of ev: for a topic event,
// those of each of its deliveries and of the event while it was kept
// unrouted, merged in LSN order (they are all in one store). ok is false
// when the Backend keeps no history.
func (c *Console) eventHistory(ctx context.Context, ev *outbox.Event) ([]outbox.ChangelogEntry, bool, error) {
	if ev.Topic == "" {
		return c.history(ctx, ev.ID)
	}
	ids := []string{ev.ID + deliverySep}
	for _, d := range ev.DeliveryStates {
		ids = append(ids, ev.ID+deliverySep+d.Endpoint)
	}
	var all []outbox.ChangelogEntry
	for _, id := range ids {
		es, ok, err := c.history(ctx, id)
		if err != nil || !ok {
			return nil, ok, err
		}
		all = append(all, es...)
	}
	slices.SortFunc(all, func(a, b outbox.ChangelogEntry) int { return cmp.Compare(a.LSN, b.LSN) })
	return all, true, nil
}

// deliveryOf names the delivery a changelog entry of a topic event is
// about: "to ENDPOINT", or "unrouted" for the event while no endpoint
// subscribed; ok is false for an entry of an event with a destination.
func deliveryOf(en outbox.ChangelogEntry) (string, bool) {
	_, ep, ok := strings.Cut(en.ID, deliverySep)
	switch {
	case !ok:
		return "", false
	case ep == "":
		return "unrouted", true
	}
	return "to " + ep, true
}
