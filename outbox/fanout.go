package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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

// fanOut appends to recs one delivery of the topic event r per endpoint
// rt subscribes to it, and returns recs (unchanged when none does).
func (o *Outbox) fanOut(recs []*store.Record, r *store.Record, rt *router) []*store.Record {
	for _, ep := range rt.endpoints(r.Topic, r.Headers) {
		recs = append(recs, deliveryOf(r, ep))
	}
	return recs
}

// deliveryOf returns the delivery of the topic event r (its ID being the
// event's or the unrouted record's) to endpoint. It shares r's headers and
// payload, which the store only reads.
func deliveryOf(r *store.Record, endpoint string) *store.Record {
	d := *r
	d.ID = deliveryID(store.GroupOf(r.ID), endpoint)
	d.Destination, d.Endpoint = endpoint, endpoint
	return &d
}

// keepUnrouted turns the topic event r into its unrouted record: stored
// under ID ‖ sep, due when its retention ends (counted, as MaxAge is,
// from its DeliverAt when that is later), to become a dead letter then.
func (o *Outbox) keepUnrouted(r *store.Record) *store.Record {
	u := *r
	u.ID = deliveryID(r.ID, "")
	u.Destination, u.Endpoint = "", ""
	u.NextAttemptAt = notBefore(r.CreatedAt, r.DeliverAt).Add(o.cfg.UnroutedRetention)
	return &u
}

// afterInsert routes the events just kept unrouted when the subscriptions
// changed while they were being stored: SetSubscriptions may have looked
// for unrouted events before they were committed.
func (o *Outbox) afterInsert(ctx context.Context, b *batch) {
	if !b.unrouted {
		return
	}
	if rt := o.router.Load(); rt != b.rt {
		if err := o.routeUnrouted(ctx, rt); err != nil {
			o.log.Warn("outbox: route unrouted events", "err", err)
		}
	}
}

// routeUnrouted routes every kept unrouted event that rt now subscribes an
// endpoint to: each in one transaction that removes it and stores its
// deliveries. An event that changed meanwhile (expired, deleted or routed
// by another call) is left as it is.
func (o *Outbox) routeUnrouted(ctx context.Context, rt *router) error {
	if ss, err := o.st.Stats(); err != nil {
		return mapErr("route unrouted", "", err)
	} else if ss.Unrouted == 0 {
		return nil
	}
	after := ""
	routed := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, next, err := o.st.List(store.ListQuery{State: store.StatePending, After: after, Limit: MaxListLimit,
			Filter: func(r *store.Record) bool { return r.Unrouted() }})
		if err != nil {
			return mapErr("route unrouted", "", err)
		}
		for _, u := range recs {
			ok, err := o.routeOne(ctx, u, rt)
			if err != nil {
				return err
			}
			if ok {
				routed++
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if routed > 0 {
		o.log.Info("outbox: routed unrouted events to their new subscribers", "events", routed)
		o.wake()
	}
	return nil
}

// routeOne routes the unrouted record u to the endpoints rt subscribes to
// its topic; false when there are none, or u changed meanwhile.
func (o *Outbox) routeOne(ctx context.Context, u *store.Record, rt *router) (bool, error) {
	eps := rt.endpoints(u.Topic, u.Headers)
	if len(eps) == 0 {
		return false, nil
	}
	recs := make([]*store.Record, len(eps))
	for i, ep := range eps {
		d := deliveryOf(u, ep)
		d.NextAttemptAt = time.Time{} // due from its creation (or DeliverAt) on
		d.Attempts, d.Deliveries, d.LastStatus, d.LastError = 0, 0, 0, ""
		recs[i] = d
	}
	err := o.st.Route(ctx, u.ID, u.Version, recs)
	switch {
	case errors.Is(err, store.ErrStale):
		return false, nil
	case err != nil:
		return false, mapErr("route unrouted", store.GroupOf(u.ID), err)
	}
	return true, nil
}

// unroutedReason is the dead reason of an event kept unrouted past its
// retention.
func unroutedReason(topic string) string {
	return "unrouted: no endpoint subscribes to topic " + quote(topic)
}

// expireUnrouted handles the unrouted records a punctuation found due:
// routed when a subscription for them appeared meanwhile (one set while
// they were being stored, or a dead letter replayed), dead letters
// otherwise.
func (o *Outbox) expireUnrouted(ctx context.Context, recs []*store.Record) {
	rt := o.router.Load()
	var outs []store.Outcome
	for _, u := range recs {
		if ok, err := o.routeOne(ctx, u, rt); err != nil {
			o.logStoreErr("route unrouted event", err)
			return
		} else if ok {
			continue
		}
		outs = append(outs, store.Outcome{Kind: store.OutcomeDead, ID: u.ID, Version: u.Version,
			Attempts: u.Attempts, Deliveries: u.Deliveries, LastStatus: u.LastStatus, LastError: u.LastError,
			Reason: unroutedReason(u.Topic)})
	}
	if len(outs) == 0 {
		o.wake()
		return
	}
	if _, err := o.st.Apply(ctx, outs, nil); err != nil {
		o.logStoreErr("dead-letter unrouted events", err)
		return
	}
	o.log.Warn("outbox: unrouted events became dead letters: no endpoint subscribed to their topic within the retention", "events", len(outs))
}

// deadLetterEndpoint is DeadLetterEndpoint. It moves the endpoint's
// pending records page by page and goes over them again until a pass finds
// none, so that records rescheduled by a delivery outcome meanwhile (their
// version changed, the move was stale) are moved too.
func (o *Outbox) deadLetterEndpoint(ctx context.Context, endpoint, reason string) (int, error) {
	total := 0
	for pass := 0; ; pass++ {
		moved, stale, err := o.deadLetterPass(ctx, endpoint, reason)
		total += moved
		if err != nil {
			return total, err
		}
		if stale == 0 {
			return total, nil
		}
		if pass >= 100 {
			return total, fmt.Errorf("outbox: dead-letter endpoint %q: %d events kept changing under the move; call again", endpoint, stale)
		}
	}
}

// deadLetterPass moves the endpoint's pending records listed in one pass.
func (o *Outbox) deadLetterPass(ctx context.Context, endpoint, reason string) (moved, stale int, err error) {
	after := ""
	for {
		recs, next, err := o.st.List(store.ListQuery{State: store.StatePending, After: after, Limit: MaxListLimit,
			Filter: func(r *store.Record) bool { return r.Endpoint == endpoint }})
		if err != nil {
			return moved, stale, mapErr("dead-letter endpoint", endpoint, err)
		}
		if len(recs) > 0 {
			outs := make([]store.Outcome, len(recs))
			for i, r := range recs {
				outs[i] = store.Outcome{Kind: store.OutcomeDead, ID: r.ID, Version: r.Version,
					Attempts: r.Attempts, Deliveries: r.Deliveries, LastStatus: r.LastStatus, LastError: r.LastError,
					Reason: reason}
			}
			res, err := o.st.Apply(ctx, outs, nil)
			if err != nil {
				return moved, stale, mapErr("dead-letter endpoint", endpoint, err)
			}
			for _, r := range res {
				if r == store.Applied {
					moved++
				} else {
					stale++
				}
			}
		}
		if next == "" {
			return moved, stale, nil
		}
		after = next
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
		ep := m.ID[len(id)+len(sep):]
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
		ep := m.ID[len(id)+len(sep):]
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
