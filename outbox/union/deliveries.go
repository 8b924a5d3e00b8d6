package union

import (
	"context"

	"github.com/outboxd/outbox/outbox"
)

// DeleteDelivery drops the pending or dead delivery of topic event id to
// endpoint in the store that holds it (see Outbox.DeleteDelivery); the
// event's other deliveries are untouched. ErrNotFound when no store holds
// it.
func (v *View) DeleteDelivery(ctx context.Context, id, endpoint string) error {
	return v.first("delete delivery", func(o *outbox.Outbox) error {
		return v.settled(ctx, o.DeleteDelivery(ctx, id, endpoint), o)
	})
}

// ReplayDelivery moves the dead delivery of topic event id to endpoint back
// to pending in the store that holds it (see Outbox.ReplayDelivery).
// ErrNotFound when no store holds it, ErrNotDead when it is not dead.
func (v *View) ReplayDelivery(ctx context.Context, id, endpoint string) error {
	return v.first("replay delivery", func(o *outbox.Outbox) error {
		return v.settled(ctx, o.ReplayDelivery(ctx, id, endpoint), o)
	})
}

// cursorOf is the List cursor of an event as a store lists it: its ID, or
// for a delivery of a topic event (and a topic event kept unrouted) the ID,
// the unit separator and the endpoint ("" when unrouted), which is the
// store ID the outbox keeps it under.
func cursorOf(ev *outbox.Event) string {
	if ev.Topic == "" {
		return ev.ID
	}
	return ev.ID + "\x1f" + ev.Endpoint
}
