package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outbox/outbox/internal/records"
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

// afterInsert has the events just kept unrouted routed when the
// subscriptions changed while they were being stored: the backfill of the
// new subscriptions may have looked for unrouted events before they were
// committed.
func (o *Outbox) afterInsert(_ context.Context, routed *route.Router, unrouted bool) {
	if unrouted && o.router.Load() != routed {
		o.kickBackfill()
	}
}

// getGroup is Get for a topic event: the event with the state of each of
// its deliveries. ok is false when id has no group.
func (o *Outbox) getGroup(id string) (Event, bool, error) {
	g, ok, err := o.admin.ReadGroup(id)
	if !ok {
		return Event{}, false, err
	}
	var states []DeliveryStatus
	for _, d := range g.Deliveries {
		states = append(states, DeliveryStatus{Endpoint: d.Endpoint, State: State(d.State), Attempts: d.Attempts,
			Deliveries: d.Deliveries, NextAttemptAt: d.NextAttemptAt, LastStatus: d.LastStatus, LastError: d.LastError,
			DeadReason: d.DeadReason, DeadAt: d.DeadAt, Version: d.Version})
	}
	if g.Record == nil {
		return Event{ID: id, State: State(g.State), DeliveryStates: states}, true, nil
	}
	ev := eventFromRecord(g.Record, State(g.State))
	ev.DeliveryStates = states
	return ev, true, nil
}

// Subscription subscribes an endpoint to topics: every event enqueued with
// a Topic that one of Topics matches (and that carries Headers, when set)
// gets a delivery to Endpoint. An endpoint may have several subscriptions
// (each with its own header filter); an event that matches more than one
// of them still gets one delivery to that endpoint.
type Subscription struct {
	// Endpoint is an endpoint name the Sink resolves to itself (when the
	// Sink implements EndpointResolver, ResolveEndpoint(Endpoint) must
	// return Endpoint). Required.
	Endpoint string
	// Topics are topic names or patterns (see ValidateTopicPattern):
	// "order.paid", "order.*", "*". At least one.
	Topics []string
	// Headers is an optional filter: the event must carry each of these
	// headers (names compared case-insensitively) with exactly this value.
	Headers map[string]string
}

// UnroutedPolicy says what becomes of an event whose topic no endpoint
// subscribes to when it is enqueued.
type UnroutedPolicy uint8

const (
	// UnroutedKeep keeps such an event as unrouted (counted in
	// Stats.Unrouted, listed by ListOptions.Unrouted) for
	// Config.UnroutedRetention: a subscription that matches it set within
	// that time (SetSubscriptions) routes it to its endpoints; after it, it
	// becomes a dead letter with the reason "unrouted: no endpoint
	// subscribes to topic ...". The default.
	UnroutedKeep UnroutedPolicy = iota
	// UnroutedDrop drops such an event: Enqueue succeeds, nothing is
	// stored (no dedup either), the drop is counted in
	// Stats.UnroutedDroppedTotal and logged.
	UnroutedDrop
)

// String returns "keep" or "drop".
func (p UnroutedPolicy) String() string {
	switch p {
	case UnroutedKeep:
		return "keep"
	case UnroutedDrop:
		return "drop"
	}
	return "unknown"
}

// SetSubscriptions replaces every subscription with subs. They are
// validated as a whole first: on error nothing changes and the error is a
// *ValidationError with Index the subscription's index in subs and Field
// "endpoint", "topics" or "headers". Events enqueued after it returns are
// routed with subs.
//
// The kept unrouted events that the new subscriptions match are routed to
// their endpoints in the background, not before SetSubscriptions returns:
// the backfill (Stats.Backfill, EndpointBackfill) routes them in batches,
// a few hundred events (at most a thousand or so deliveries) per write
// transaction, each event's unrouted record removed in the transaction
// that stores its deliveries, so an event is routed once; enqueues and
// other calls go on between batches. It reads every pending event once
// (none when Stats.Unrouted is 0). One backfill runs at a time: a change
// of subscriptions while it runs makes it run again once done. It is
// owned by the outbox: Stop cancels it between batches and waits for it,
// and Start starts it for the subscriptions in use, so a backfill cut
// short by Stop or a crash resumes at the next Start (the events not yet
// routed are still unrouted). On an outbox opened but not started,
// SetSubscriptions routes nothing: Start does. A backfill that fails
// (a store error, logged) runs again at the next maintenance.
//
// Events already routed keep their deliveries: a new subscriber does not
// receive events enqueued before it subscribed, and an endpoint that no
// longer subscribes keeps its pending deliveries (DeadLetterEndpoint
// moves those of an endpoint that is removed). Safe while the outbox
// runs; subs is copied.
func (o *Outbox) SetSubscriptions(ctx context.Context, subs []Subscription) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	r, err := o.newRouter(subs)
	if err != nil {
		return err
	}
	o.subsMu.Lock()
	o.router.Store(r)
	o.subsMu.Unlock()
	o.kickBackfill()
	return nil
}

// PutSubscription replaces the subscriptions of s.Endpoint with s and
// leaves every other endpoint's as they are: SetSubscriptions for one
// endpoint, which checks only s, so that its cost does not grow with the
// number of endpoints subscribed beyond one copy of the list. Its error is
// SetSubscriptions', with Index 0; the waiting unrouted events that s
// matches are routed in the background.
func (o *Outbox) PutSubscription(ctx context.Context, s Subscription) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	if err := o.validateSubscription(s); err != nil {
		return err
	}
	rule := route.Rule(s)
	o.subsMu.Lock()
	o.router.Store(o.router.Load().With(s.Endpoint, &rule))
	o.subsMu.Unlock()
	o.kickBackfill()
	return nil
}

// RemoveSubscriptions removes every subscription of endpoint, leaving the
// others as they are. The endpoint keeps its pending deliveries (see
// DeadLetterEndpoint).
func (o *Outbox) RemoveSubscriptions(ctx context.Context, endpoint string) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	o.subsMu.Lock()
	o.router.Store(o.router.Load().With(endpoint, nil))
	o.subsMu.Unlock()
	return nil
}

// Subscriptions returns a copy of the subscriptions in use.
func (o *Outbox) Subscriptions() []Subscription {
	rules := o.router.Load().Rules()
	if rules == nil {
		return nil
	}
	subs := make([]Subscription, len(rules))
	for i, r := range rules {
		subs[i] = Subscription(r)
	}
	return subs
}

// newRouter validates subs and builds their router; the error is a
// *ValidationError naming the subscription and its field.
func (o *Outbox) newRouter(subs []Subscription) (*route.Router, error) {
	var rules []route.Rule
	if subs != nil {
		rules = make([]route.Rule, len(subs))
	}
	for i, s := range subs {
		if err := o.validateSubscription(s); err != nil {
			err.Index = i
			return nil, err
		}
		rules[i] = route.Rule(s)
	}
	return route.New(rules), nil
}

// validateSubscription checks one subscription.
func (o *Outbox) validateSubscription(s Subscription) *ValidationError {
	var resolve records.Resolver
	if o.resolver != nil {
		resolve = o.resolver.ResolveEndpoint
	}
	// A delivery is stored under the event's ID, a separator and the
	// endpoint's name.
	maxEndpoint := store.MaxIDLen - o.cfg.MaxIDBytes - len(store.GroupSep)
	if field, reason := records.CheckSubscription(s.Endpoint, s.Topics, s.Headers, maxEndpoint, resolve); field != "" {
		return &ValidationError{Field: field, Reason: reason, subscription: true}
	}
	return nil
}

// MaxTopicBytes is the longest topic (and topic pattern) accepted.
const MaxTopicBytes = 200

// ValidateTopic returns nil when topic is a valid topic name, or an error
// saying what is wrong with it. A topic is 1 to MaxTopicBytes bytes of
// segments separated by dots, each segment one or more of the characters
// A-Z, a-z, 0-9, '_' and '-': "order.paid", "invoice_v2.created".
func ValidateTopic(topic string) error { return route.ValidateTopic(topic) }

// ValidateTopicPattern returns nil when pattern is a valid subscription
// pattern, or an error saying what is wrong with it. A pattern is a topic
// (matching that topic only), a topic followed by ".*" (matching every
// topic that starts with that topic and a dot, at any depth: "order.*"
// matches "order.paid" and "order.paid.eu" but not "order"), or "*" alone
// (matching every topic).
func ValidateTopicPattern(pattern string) error { return route.ValidateTopicPattern(pattern) }
