package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
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
	return o.routes.DeadLetterEndpoint(ctx, endpoint, reason)
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
	if _, err := o.st.Replay(ctx, route.DeliveryID(id, endpoint), o.clock.Now().UTC()); err != nil {
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
	return mapDeliveryErr("delete delivery", id, endpoint, o.st.Drop(ctx, route.DeliveryID(id, endpoint), "dropped by operator"))
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

// afterInsert routes the events just kept unrouted when the subscriptions
// changed while they were being stored: SetSubscriptions may have looked
// for unrouted events before they were committed.
func (o *Outbox) afterInsert(ctx context.Context, b *batch) {
	if !b.unrouted {
		return
	}
	if rt := o.router.Load(); rt != b.rt {
		if err := o.routes.RouteUnrouted(ctx, rt); err != nil {
			o.log.Warn("outbox: route unrouted events", "err", err)
		}
	}
}

// getGroup is Get for a topic event: the event with the state of each of
// its deliveries. ok is false when id has no group.
func (o *Outbox) getGroup(id string) (ev Event, ok bool, err error) {
	members, err := o.st.Group(id)
	if err != nil || len(members) == 0 {
		return Event{}, false, err
	}
	var (
		base                 *store.Record
		pending, dead, gone  bool
		deleted, anyRecorded bool
	)
	ev.ID = id
	for _, m := range members {
		switch m.State {
		case store.StatePending:
			pending = true
		case store.StateDead:
			dead = true
		case store.StateDeleted:
			deleted = true
		default:
			gone = true
		}
		ep := m.ID[len(id)+len(store.GroupSep):]
		if m.Record != nil {
			anyRecorded = true
			if base == nil || (base.Unrouted() && !m.Record.Unrouted()) {
				base = m.Record
			}
		}
		if ep == "" {
			continue // the event while it was unrouted
		}
		ds := DeliveryStatus{Endpoint: ep, State: State(m.State)}
		if r := m.Record; r != nil {
			ds.Attempts, ds.Deliveries = r.Attempts, r.Deliveries
			ds.NextAttemptAt = r.NextAttemptAt
			ds.LastStatus, ds.LastError = r.LastStatus, r.LastError
			ds.DeadReason, ds.DeadAt = r.DeadReason, r.DeadAt
			ds.Version = r.Version
		}
		ev.DeliveryStates = append(ev.DeliveryStates, ds)
	}
	state := StateDelivered
	switch {
	case pending:
		state = StatePending
	case dead:
		state = StateDead
	case deleted && !gone:
		state = StateDeleted
	}
	if !anyRecorded {
		return Event{ID: id, State: state, DeliveryStates: ev.DeliveryStates}, true, nil
	}
	out := eventFromRecord(base, state)
	out.DeliveryStates = ev.DeliveryStates
	if !base.Unrouted() {
		// The event, not one of its deliveries.
		out.Destination, out.Endpoint = "", ""
		out.Attempts, out.Deliveries, out.LastStatus, out.LastError = 0, 0, 0, ""
		out.NextAttemptAt, out.DeadReason, out.DeadAt, out.Version = time.Time{}, "", time.Time{}, 0
		for _, ds := range out.DeliveryStates {
			if ds.State == StatePending && (out.NextAttemptAt.IsZero() || ds.NextAttemptAt.Before(out.NextAttemptAt)) {
				out.NextAttemptAt = ds.NextAttemptAt
			}
			out.Attempts = max(out.Attempts, ds.Attempts)
			out.Deliveries = max(out.Deliveries, ds.Deliveries)
			out.Version = max(out.Version, ds.Version)
		}
	}
	return out, true, nil
}

// attemptsOfGroup is Attempts for a topic event: the attempts of all its
// deliveries, each with its Endpoint, in the order they started. ok is
// false when id has no group.
func (o *Outbox) attemptsOfGroup(id string) ([]Attempt, bool, error) {
	members, err := o.st.Group(id)
	if err != nil || len(members) == 0 {
		return nil, false, err
	}
	var out []Attempt
	for _, m := range members {
		as, err := o.st.Attempts(m.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue // trimmed meanwhile
		}
		if err != nil {
			return nil, true, err
		}
		ep := m.ID[len(id)+len(store.GroupSep):]
		for _, a := range as {
			out = append(out, attemptFromStore(a, ep))
		}
	}
	slices.SortStableFunc(out, func(a, b Attempt) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.Seq, b.Seq))
	})
	return out, true, nil
}

// hasUnrouted reports whether events are kept unrouted (List then leaves
// them out of the pending events).
func (o *Outbox) hasUnrouted() bool {
	ss, err := o.st.Stats()
	return err != nil || ss.Unrouted > 0
}
