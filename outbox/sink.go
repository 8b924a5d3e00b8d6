package outbox

import (
	"context"
	"maps"
	"time"

	"github.com/outboxd/outbox/outbox/internal/engine"
	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

// Sink delivers one event to its destination. The outbox calls Deliver from
// many goroutines at once, with no store transaction open, and applies the
// returned Result through its policy: it never interprets transport details
// itself.
//
// Deliver must honour ctx: when the outbox stops, ctx is cancelled and Deliver
// should return promptly (a Result with ActionRetry and the context's error is
// the usual answer).
type Sink interface {
	Deliver(ctx context.Context, d *Delivery) Result
}

// EndpointResolver is an optional interface a Sink implements when it knows
// named endpoints. The outbox calls it at enqueue time to validate a
// destination and to learn the endpoint that owns it: throttling, disabling and
// per-endpoint concurrency are tracked per endpoint name.
//
// A Sink without it accepts every destination, and each destination is its own
// endpoint.
type EndpointResolver interface {
	// ResolveEndpoint returns the endpoint name for destination (a configured
	// endpoint name, or a key such as scheme://host:port for an absolute URL),
	// or an error that says why the destination cannot be delivered to.
	ResolveEndpoint(destination string) (endpoint string, err error)
}

// EndpointLister is an optional interface a Sink implements when it has
// configured endpoints: Outbox.Endpoints lists them even before they have a
// delivery state of their own.
type EndpointLister interface {
	// EndpointNames returns the names of the configured endpoints.
	EndpointNames() []string
}

// EndpointPager is an optional interface an EndpointLister implements when
// it can list its names in order from a cursor: Outbox.EndpointsPage then
// reads one page of them instead of every name.
type EndpointPager interface {
	// EndpointNamesAfter returns up to limit of the configured endpoint
	// names that sort after after, in order.
	EndpointNamesAfter(after string, limit int) []string
}

// Batcher is an optional interface a Sink implements when concurrent
// deliveries to some of its endpoints share requests (a Kafka producer's
// produce requests): for those, many deliveries in flight cost no more
// than a few, and a delivery's latency grows with the batch it shares, not
// with the receiver's load. The outbox does not adapt the in-flight limit
// of such an endpoint (see Config.NoAdaptiveConcurrency): it may have
// MaxPerEndpoint deliveries in flight.
type Batcher interface {
	// Batches reports whether concurrent deliveries to endpoint share
	// requests.
	Batches(endpoint string) bool
}

// batchingEndpoints returns the Batches method of sink, nil when it has
// none.
func batchingEndpoints(sink Sink) func(string) bool {
	if b, ok := sink.(Batcher); ok {
		return b.Batches
	}
	return nil
}

// Delivery is what a Sink receives: one attempt at one event. It is a copy;
// the Sink may keep it but must not expect changes to reach the store.
type Delivery struct {
	// ID is the event's ID. It is the same on every attempt and is what
	// receivers deduplicate on (Idempotency-Key, webhook-id).
	ID string
	// Key is the event's ordering/coalescing key, possibly empty.
	Key string
	// Destination is a configured endpoint name or an absolute URL.
	Destination string
	// Endpoint is the endpoint name the destination resolved to. For a
	// topic event it is the subscribed endpoint of this delivery, and so
	// is Destination.
	Endpoint string
	// Topic is the event's topic, "" for an event with a Destination.
	Topic string
	// Method is the HTTP method (never empty; POST by default).
	Method string
	// Headers are the event's own headers, sent verbatim.
	Headers map[string]string
	// Payload is delivered verbatim.
	Payload []byte
	// Attempt is 1 for the first attempt, counting parks too.
	Attempt int
	// CreatedAt is when the event was first enqueued.
	CreatedAt time.Time
	// LogResponse is set when the outbox records this attempt in its
	// attempt log: the sink should return the response's headers that
	// IsLoggedHeader accepts in Result.Header, and the first ExcerptBytes
	// bytes of the response body (or all of a shorter one) in Result.Body
	// whatever the outcome (success included), as received, without the
	// request's secrets. The log keeps ExcerptBytes of what it returns.
	LogResponse bool
	// ExcerptBytes is how much of the response body the attempt log keeps
	// (0: none). Set with LogResponse.
	ExcerptBytes int
	// Probe is set when this attempt is the probe of its endpoint's
	// half-open circuit breaker: the one delivery that finds out whether
	// the receiver is back. The sink should make a single request for it,
	// without retrying inline, so that a probe costs a dead receiver one
	// connection however the sink judged the endpoint before (its state
	// may have come from other stores or other instances of the group).
	Probe bool
}

// Action is what the outbox does with an event after an attempt. The status
// policy table of a sink maps responses to actions.
type Action uint8

// The actions of the status policy table.
const (
	// ActionSuccess deletes the event through the changelog (compare-and-delete
	// on the delivered version).
	ActionSuccess Action = iota + 1
	// ActionRetry spends an attempt and schedules the next one after a
	// jittered backoff, or after Result.RetryAfter when that is set.
	ActionRetry
	// ActionPark means "not yet" (a 404 from a receiver still creating the
	// resource): the event is checked again after the park interval, without
	// spending an attempt, until its max age.
	ActionPark
	// ActionThrottle retries the event and makes its whole endpoint wait until
	// a durable not-before time (Retry-After, capped, or the backoff).
	ActionThrottle
	// ActionDisable disables the endpoint (410 Gone); its events stay pending
	// until an operator enables it again.
	ActionDisable
	// ActionDead moves the event to the dead letters with the status and the
	// start of the response body.
	ActionDead
)

// String returns the action's name as used in the policy table, logs and
// metrics: success, retry, park, throttle, disable or dead.
func (a Action) String() string { return engine.Action(a).String() }

// The actions and breaker states are the engine's, value for value, so
// that converting is a
// cast (a constant index out of range fails the build).
var _ = [...]struct{}{
	[1]struct{}{}[int(ActionSuccess)-int(engine.ActionSuccess)],
	[1]struct{}{}[int(ActionRetry)-int(engine.ActionRetry)],
	[1]struct{}{}[int(ActionPark)-int(engine.ActionPark)],
	[1]struct{}{}[int(ActionThrottle)-int(engine.ActionThrottle)],
	[1]struct{}{}[int(ActionDisable)-int(engine.ActionDisable)],
	[1]struct{}{}[int(ActionDead)-int(engine.ActionDead)],
	[1]struct{}{}[int(BreakerClosed)-int(engine.BreakerClosed)],
	[1]struct{}{}[int(BreakerOpen)-int(engine.BreakerOpen)],
	[1]struct{}{}[int(BreakerHalfOpen)-int(engine.BreakerHalfOpen)],
	[1]struct{}{}[MaxTopicBytes-route.MaxTopicBytes],
}

// ParseAction parses an action name as returned by Action.String.
func ParseAction(s string) (Action, bool) {
	for a := ActionSuccess; a <= ActionDead; a++ {
		if a.String() == s {
			return a, true
		}
	}
	return 0, false
}

// Result is the outcome of one delivery attempt.
type Result struct {
	// Action tells the outbox what to do next.
	Action Action
	// Status is the HTTP status code, or 0 when no response was received.
	Status int
	// RetryAfter, when positive, is the wait the receiver asked for (already
	// capped by the sink).
	RetryAfter time.Duration
	// Body is a bounded excerpt of the response body, for dead letters,
	// the event's last error and the attempt log. It may hold any bytes:
	// the outbox makes it valid UTF-8 where it needs text.
	Body string
	// Header holds response headers for the attempt log (see
	// Delivery.LogResponse), by name; the outbox keeps only those
	// IsLoggedHeader accepts, whatever a sink puts here.
	Header map[string]string
	// Err is the transport or protocol error, if any. It must not contain
	// credentials or secrets.
	Err error
}

// deliver is the engine's call of the Sink: one attempt at r, in the
// outbox's types.
func (o *Outbox) deliver(ctx context.Context, r *store.Record, probe bool) engine.Result {
	d := &Delivery{
		ID:          store.GroupOf(r.ID), // the event's ID, for every delivery of it
		Key:         r.Key,
		Destination: r.Destination,
		Endpoint:    r.Endpoint,
		Topic:       r.Topic,
		Method:      r.Method,
		Headers:     maps.Clone(r.Headers),
		Payload:     r.Payload,
		Attempt:     r.Deliveries + 1,
		CreatedAt:   r.CreatedAt,
		Probe:       probe,
	}
	if o.cfg.logsAttempts() {
		d.LogResponse, d.ExcerptBytes = true, o.cfg.excerptBytes()
	}
	res := o.sink.Deliver(ctx, d)
	return engine.Result{Action: engine.Action(res.Action), Status: res.Status, RetryAfter: res.RetryAfter,
		Body: res.Body, Header: res.Header, Err: res.Err}
}
