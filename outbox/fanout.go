package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DeliveryStatus is the state of one delivery of a topic event: the event
// as sent to one subscribed endpoint. Each delivery has its own state,
// attempts, schedule and outcome (see Event.DeliveryStates).
type DeliveryStatus struct {
	// Endpoint is the endpoint the delivery goes to.
	Endpoint string
	// State is pending, dead, delivered or deleted (the last two while its
	// tombstone lasts).
	State State
	// Attempts is the number of attempts spent (parks do not spend one),
	// Deliveries the number made, parks included.
	Attempts, Deliveries int
	// NextAttemptAt is when the next attempt is due (pending deliveries).
	NextAttemptAt time.Time
	// LastStatus is the status of the last response, 0 when none.
	LastStatus int
	// LastError is the last transport error or response excerpt.
	LastError string
	// DeadReason says why a dead delivery is dead; DeadAt is when it
	// became dead.
	DeadReason string
	DeadAt     time.Time
	// Version is the changelog LSN of the delivery's last change.
	Version uint64
}

// sep separates an event ID from the endpoint in the store ID of one of
// its deliveries. ValidText refuses control characters, so it cannot occur
// in an event ID nor in an endpoint name.
const sep = "\x1f"

// deliveryID is the store ID of the delivery of event id to endpoint;
// with endpoint "", the store ID of the event kept unrouted.
func deliveryID(id, endpoint string) string { return id + sep + endpoint }

// DeadLetterEndpoint moves every pending event and delivery of endpoint to
// the dead letters with reason (for a deleted endpoint: nothing is lost
// silently) and returns how many it moved. Deliveries in flight at the
// time are moved too; their outcome no longer changes them. Dead letters
// can be replayed (once the endpoint exists again) or deleted as usual.
func (o *Outbox) DeadLetterEndpoint(ctx context.Context, endpoint, reason string) (int, error) {
	if err := o.enter(); err != nil {
		return 0, err
	}
	defer o.ops.Done()
	if endpoint == "" {
		return 0, fmt.Errorf("outbox: dead-letter endpoint: %w: endpoint is required", ErrInvalid)
	}
	if reason == "" {
		return 0, fmt.Errorf("outbox: dead-letter endpoint: %w: reason is required", ErrInvalid)
	}
	return o.deadLetterEndpoint(ctx, endpoint, reason)
}

// ReplayDelivery moves the dead delivery of topic event id to endpoint
// back to pending, as Replay does for a whole event. ErrNotFound when the
// event has no delivery to that endpoint, ErrNotDead when it is not dead.
func (o *Outbox) ReplayDelivery(ctx context.Context, id, endpoint string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if !validDeliveryRef(id, endpoint) {
		return fmt.Errorf("outbox: replay delivery %q to %q: %w", id, endpoint, ErrNotFound)
	}
	if _, err := o.st.Replay(ctx, deliveryID(id, endpoint), o.clock.Now().UTC()); err != nil {
		return mapDeliveryErr("replay delivery", id, endpoint, err)
	}
	o.wake()
	return nil
}

// DeleteDelivery drops the pending or dead delivery of topic event id to
// endpoint, as Delete does for a whole event; the event's other
// deliveries are untouched. ErrNotFound when the event has no pending or
// dead delivery to that endpoint.
func (o *Outbox) DeleteDelivery(ctx context.Context, id, endpoint string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if !validDeliveryRef(id, endpoint) {
		return fmt.Errorf("outbox: delete delivery %q to %q: %w", id, endpoint, ErrNotFound)
	}
	return mapDeliveryErr("delete delivery", id, endpoint, o.st.Drop(ctx, deliveryID(id, endpoint), "dropped by operator"))
}

// validDeliveryRef reports whether id and endpoint can name a delivery.
func validDeliveryRef(id, endpoint string) bool {
	return id != "" && endpoint != "" && ValidText(id) && ValidText(endpoint)
}

// mapDeliveryErr is mapErr for an operation on one delivery.
func mapDeliveryErr(op, id, endpoint string, err error) error {
	if err == nil {
		return nil
	}
	return mapErr(op, id+" to "+endpoint, err)
}

// deadLetterEndpoint and routeUnrouted are filled in by the store work.
func (o *Outbox) deadLetterEndpoint(ctx context.Context, endpoint, reason string) (int, error) {
	return 0, errors.New("outbox: dead-letter endpoint: not supported yet")
}

func (o *Outbox) routeUnrouted(ctx context.Context, r *router) error { return nil }
