package outbox

import (
	"errors"
	"maps"
	"strconv"
	"time"

	"github.com/outboxd/outbox/outbox/internal/records"
	"github.com/outboxd/outbox/store"
)

// Event is one message for one destination. Callers set ID (optional), Key,
// Destination, Method, Headers, Payload, DeliverAt (optional) and
// TraceParent and TraceState (optional); the outbox sets the rest.
type Event struct {
	// ID identifies the event for deduplication: re-enqueueing the same ID
	// with the same content is a no-op, within the tombstone retention after
	// delivery it is a duplicate, after an operator deleted the event it is
	// ErrDeleted, with other content it is ErrConflict.
	// Generated as a UUIDv7 when empty. Receivers see it as the
	// Idempotency-Key / webhook-id of every attempt.
	ID string
	// Key is optional: the unit of per-key ordering (Config.Ordered) and of
	// coalescing (Upsert).
	Key string
	// Destination is an endpoint name known to the Sink or an absolute URL.
	// Exactly one of Destination and Topic is set.
	Destination string
	// Topic publishes the event to the endpoints subscribed to it (see
	// Subscription and the package doc, "Topics and subscriptions")
	// instead of naming one Destination: enqueueing it stores one delivery
	// per subscribed endpoint in the same commit, or keeps it unrouted
	// when none subscribes (Config.Unrouted). See ValidateTopic for its
	// syntax; a *ValidationError for "topic" when it is malformed or set
	// together with Destination.
	Topic string
	// Method is the HTTP method, one ValidMethod accepts; POST when empty.
	Method string
	// Headers are sent verbatim with every attempt. Names are valid tokens,
	// values have no control characters but tab, no name is one
	// ReservedHeader reserves, and no two names differ only in case.
	Headers map[string]string
	// Payload is delivered verbatim.
	Payload []byte
	// DeliverAt is a not-before time (scheduled delivery): the event is
	// stored pending and first attempted at DeliverAt, not before. Zero or
	// a time that has passed: as soon as possible. At most
	// Config.MaxSchedule ahead (else a *ValidationError for "deliver_at").
	// It is stored in UTC and survives restarts; Config.MaxAge counts from
	// it. It is not content: re-enqueueing an ID with another DeliverAt is
	// an idempotent no-op that keeps the first schedule.
	DeliverAt time.Time
	// TraceParent is the W3C traceparent of the span that produced the
	// event ("00-<trace-id>-<parent-id>-<flags>"), and TraceState its
	// tracestate (optional). Both are stored with the event, and every
	// delivery attempt is traced as a child of that span (see the package
	// doc, "Tracing"). When empty, Enqueue, Ingest and Update take the span
	// context of their ctx (the caller's span, or the enqueue span when a
	// tracer records), and an event enqueued without either has none. A
	// malformed TraceParent is ignored as if empty (never a reason to
	// refuse the event); a malformed TraceState is dropped. Neither is
	// content: re-enqueueing an ID from another trace is a no-op.
	TraceParent string
	// TraceState is the W3C tracestate that goes with TraceParent.
	TraceState string

	// Endpoint is the endpoint the destination resolved to; for an event
	// returned per delivery (List, Sink), the endpoint of that delivery, and
	// "" for a topic event kept unrouted or returned as a whole (Get). Set
	// by the outbox.
	Endpoint string
	// DeliveryStates lists the state of each delivery of a topic event,
	// sorted by endpoint; set by Get and nil otherwise (and nil for a topic
	// event kept unrouted). (Deliveries, above, counts the attempts made.)
	// Set by the outbox.
	DeliveryStates []DeliveryStatus
	// State is pending, dead, delivered or deleted. Set by the outbox.
	State State
	// CreatedAt is when the event was first enqueued (UTC). Set by the outbox.
	CreatedAt time.Time
	// Attempts is the number of attempts spent (parks do not spend one).
	// Set by the outbox.
	Attempts int
	// Deliveries is the number of deliveries made, parks included (the
	// Attempt the Sink saw last); unlike Attempts, Replay does not reset
	// it. Set by the outbox.
	Deliveries int
	// NextAttemptAt is when the next attempt is due (pending events). Set by
	// the outbox.
	NextAttemptAt time.Time
	// LastStatus is the status of the last response, 0 when none. Set by the
	// outbox.
	LastStatus int
	// LastError is the last transport error or response excerpt. Set by the
	// outbox.
	LastError string
	// Version is the changelog LSN of the last change to the event. Set by
	// the outbox.
	Version uint64
	// DeadReason says why a dead event is dead; empty otherwise. Set by the
	// outbox.
	DeadReason string
	// DeadAt is when the event became dead; zero otherwise. Set by the outbox.
	DeadAt time.Time
}

// State is the life-cycle state of an event.
type State uint8

// The states of an event. The zero State means "unspecified" (ListOptions
// defaults it to StatePending).
const (
	// StatePending events wait for their next attempt or are in flight.
	StatePending State = iota + 1
	// StateDead events are dead letters: kept, listable and replayable.
	StateDead
	// StateDelivered events were delivered (or superseded by Upsert); only
	// their tombstone remains, for the tombstone retention.
	StateDelivered
	// StateDeleted events were deleted by an operator (Delete) while
	// pending or dead; only their tombstone remains, for the tombstone
	// retention, and Enqueue refuses their ID with ErrDeleted meanwhile.
	StateDeleted
)

// String returns "pending", "dead", "delivered" or "deleted" ("unknown"
// otherwise): the store's names, the states being the store's.
func (s State) String() string {
	if s < StatePending || s > StateDeleted {
		return "unknown"
	}
	return store.State(s).String()
}

// ParseState parses a state name as returned by State.String.
func ParseState(s string) (State, bool) {
	for st := StatePending; st <= StateDeleted; st++ {
		if st.String() == s {
			return st, true
		}
	}
	return 0, false
}

// The states are the store's, value for value (the store's zero State is
// "not found", as the outbox's is "unspecified"), so that converting is a
// cast; a constant index out of range fails the build.
var _ = [...]struct{}{
	[1]struct{}{}[int(StatePending)-int(store.StatePending)],
	[1]struct{}{}[int(StateDead)-int(store.StateDead)],
	[1]struct{}{}[int(StateDelivered)-int(store.StateDelivered)],
	[1]struct{}{}[int(StateDeleted)-int(store.StateDeleted)],
}

// eventFromRecord converts a stored record. It copies everything it keeps.
func eventFromRecord(r *store.Record, st State) Event {
	return Event{
		ID:            store.GroupOf(r.ID),
		Key:           r.Key,
		Destination:   r.Destination,
		Topic:         r.Topic,
		Method:        r.Method,
		Headers:       maps.Clone(r.Headers),
		Payload:       append([]byte(nil), r.Payload...),
		Endpoint:      r.Endpoint,
		State:         st,
		CreatedAt:     r.CreatedAt,
		Attempts:      r.Attempts,
		Deliveries:    r.Deliveries,
		NextAttemptAt: r.NextAttemptAt,
		DeliverAt:     r.DeliverAt,
		TraceParent:   r.TraceParent,
		TraceState:    r.TraceState,
		LastStatus:    r.LastStatus,
		LastError:     r.LastError,
		Version:       r.Version,
		DeadReason:    r.DeadReason,
		DeadAt:        r.DeadAt,
	}
}

// check validates the caller-owned fields of ev (index i of the call) and
// returns them, with the defaults filled (Method), and the endpoint the
// destination resolves to (itself when resolve is false or the Sink
// resolves nothing).
func (o *Outbox) check(i int, ev *Event, resolve bool) (records.Fields, string, error) {
	f := ev.fields()
	var res records.Resolver
	if resolve && o.resolver != nil {
		res = o.resolver.ResolveEndpoint
	}
	endpoint, bad := records.Check(i, &f, o.limits(), res, o.clock.Now())
	if bad != nil {
		return f, "", validationErr(bad)
	}
	return f, endpoint, nil
}

// fields returns the caller-owned fields of ev.
func (ev *Event) fields() records.Fields {
	return records.Fields{ID: ev.ID, Key: ev.Key, Destination: ev.Destination, Topic: ev.Topic, Method: ev.Method,
		Headers: ev.Headers, Payload: ev.Payload, DeliverAt: ev.DeliverAt, TraceParent: ev.TraceParent, TraceState: ev.TraceState}
}

// limits are the limits events are checked against.
func (o *Outbox) limits() records.Limits {
	return records.Limits{MaxIDBytes: o.cfg.MaxIDBytes, MaxHeaderBytes: o.cfg.MaxHeaderBytes,
		MaxPayloadBytes: o.cfg.MaxPayloadBytes, MaxSchedule: o.cfg.MaxSchedule}
}

// validationErr turns the records package's *Invalid into a
// *ValidationError; other errors are returned as they are.
func validationErr(err error) error {
	var bad *records.Invalid
	if errors.As(err, &bad) {
		return &ValidationError{Index: bad.Index, Field: bad.Field, Reason: bad.Reason}
	}
	return err
}

// ValidText reports whether s may be an event's ID, key or destination:
// valid UTF-8 without control characters (C0, DEL and C1). Enqueue refuses
// an event whose ID, key or destination is not; callers that map foreign
// data to events (an HTTP decoder, a Kafka source) use it to say which
// field is wrong before they enqueue.
func ValidText(s string) bool {
	return records.ValidText(s)
}

// ValidMethod reports whether m is a method an event may carry: GET, HEAD,
// POST, PUT, PATCH, DELETE or OPTIONS, spelt in capitals (methods are
// case-sensitive). CONNECT and TRACE are refused: neither is a request to a
// webhook receiver, and neither carries a payload there. Enqueue refuses an
// event with another method.
func ValidMethod(m string) bool {
	return records.ValidMethod(m)
}

// ValidHeaderName reports whether name is a valid header field name: an
// RFC 9110 token (letters, digits and !#$%&'*+-.^_`|~).
func ValidHeaderName(name string) bool {
	return records.ValidHeaderName(name)
}

// ValidHeaderValue reports whether v is a valid header field value
// (RFC 9110): no control characters other than tab, so no CR, LF or NUL
// that could end the field or the header block.
func ValidHeaderValue(v string) bool {
	return records.ValidHeaderValue(v)
}

// ReservedHeader reports whether an event may not carry the header name
// (compared case-insensitively) and why: the sink sets it on every attempt
// (Idempotency-Key, webhook-id, webhook-timestamp, webhook-signature), or it
// belongs to the HTTP framing of one connection and would be dropped or
// misread (Host, Content-Length, Transfer-Encoding, Trailer and the
// hop-by-hop Connection, Keep-Alive, Proxy-Connection, TE and Upgrade).
// Enqueue refuses such an event, and httpsink refuses such an endpoint
// header, so that no header is accepted and then silently dropped.
func ReservedHeader(name string) (reason string, reserved bool) {
	return records.ReservedHeader(name)
}

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string { return strconv.Quote(s) }

// Validate checks events as Enqueue would before storing them, and stores
// nothing: an invalid event is a *ValidationError naming its index and field
// (errors.Is(err, ErrInvalid)), and an ID given twice in the call with other
// content (key, destination, method, headers or payload) is an error
// wrapping ErrConflict that ConflictingID reads. What only the store can
// tell (an ID already pending with other content, or deleted by an operator)
// is not checked.
//
// It is for callers that hand events to another outbox than this one, with
// the same configuration and Sink: outboxd in Kafka group mode validates
// what POST /v1/events receives against its local outbox before producing
// it to the topic the partition owners ingest from, so that a bad event is
// refused with the same answer as in single-machine mode instead of
// becoming a dead letter on its owner.
func (o *Outbox) Validate(events ...Event) error {
	fs := make([]records.Fields, len(events))
	for i := range events {
		ev := events[i]
		if _, _, err := o.check(i, &ev, true); err != nil {
			return err
		}
		fs[i] = events[i].fields()
	}
	if id, found := records.FirstConflict(fs); found {
		return mapErr("enqueue", "", &store.ConflictError{ID: id})
	}
	return nil
}
