package console

import (
	"context"

	"github.com/outboxd/outbox/outbox"
)

// eventHistory returns the changelog entries of ev: for a topic event,
// those of each of its deliveries and of the event while it was kept
// unrouted, merged in LSN order (they are all in one store). ok is false
// when the Backend keeps no history.
func (c *Console) eventHistory(ctx context.Context, ev *outbox.Event) ([]outbox.ChangelogEntry, bool, error) {
	kept := true
	es, err := outbox.EventHistory(ev, func(id string) ([]outbox.ChangelogEntry, error) {
		es, ok, err := c.history(ctx, id)
		kept = ok
		return es, err
	})
	if !kept {
		return nil, false, nil
	}
	return es, true, err
}

// deliveryOf names the delivery a changelog entry of a topic event is
// about: "to ENDPOINT", or "unrouted" for the event while no endpoint
// subscribed; ok is false for an entry of an event with a destination.
func deliveryOf(en outbox.ChangelogEntry) (string, bool) {
	ep, ok := en.Delivery()
	switch {
	case !ok:
		return "", false
	case ep == "":
		return "unrouted", true
	}
	return "to " + ep, true
}
