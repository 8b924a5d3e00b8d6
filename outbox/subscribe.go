package outbox

import (
	"context"
	"fmt"

	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

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
// "endpoint", "topics" or "headers". Then the kept unrouted events that
// the new subscriptions match are routed to their endpoints, each in one
// write transaction with its deliveries (the event stays unrouted if that
// fails; the error is returned, and the next SetSubscriptions tries
// again). Events already routed keep their deliveries: a new subscriber
// does not receive events enqueued before it subscribed, and an endpoint
// that no longer subscribes keeps its pending deliveries (DeadLetterEndpoint
// moves those of an endpoint that is removed). Safe while the outbox runs;
// subs is copied. Routing the kept unrouted events reads every pending
// event once (none when Stats.Unrouted is 0).
func (o *Outbox) SetSubscriptions(ctx context.Context, subs []Subscription) error {
	if err := o.enter(); err != nil {
		return err
	}
	defer o.ops.Done()
	r, err := o.newRouter(subs)
	if err != nil {
		return err
	}
	o.router.Store(r)
	return o.routes.RouteUnrouted(ctx, r)
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
	bad := func(field, reason string) *ValidationError {
		return &ValidationError{Field: field, Reason: reason, subscription: true}
	}
	if s.Endpoint == "" {
		return bad("endpoint", "required")
	}
	if !ValidText(s.Endpoint) {
		return bad("endpoint", "must be valid UTF-8 without control characters")
	}
	// A delivery is stored under the event's ID, a separator and the
	// endpoint's name.
	if n := store.MaxIDLen - o.cfg.MaxIDBytes - len(store.GroupSep); len(s.Endpoint) > n {
		return bad("endpoint", "longer than "+itoa(n)+" bytes (the store's ID limit less Config.MaxIDBytes and a separator)")
	}
	if o.resolver != nil {
		ep, err := o.resolver.ResolveEndpoint(s.Endpoint)
		if err != nil {
			return bad("endpoint", "unknown endpoint "+quote(s.Endpoint)+": "+err.Error())
		}
		if ep != s.Endpoint {
			return bad("endpoint", quote(s.Endpoint)+" is not an endpoint name (it resolves to "+quote(ep)+")")
		}
	}
	if len(s.Topics) == 0 {
		return bad("topics", "at least one topic or pattern is required")
	}
	for _, p := range s.Topics {
		if err := ValidateTopicPattern(p); err != nil {
			return bad("topics", fmt.Sprintf("pattern %q %v", p, err))
		}
	}
	for name, value := range s.Headers {
		if !ValidHeaderName(name) {
			return bad("headers", "invalid header name "+quote(name))
		}
		if !ValidHeaderValue(value) {
			return bad("headers", "invalid value for header "+quote(name))
		}
	}
	if a, b, ok := sameHeaderTwice(s.Headers); ok {
		return bad("headers", "headers "+quote(a)+" and "+quote(b)+" are the same header (names are case-insensitive)")
	}
	return nil
}
