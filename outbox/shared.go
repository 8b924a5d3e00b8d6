package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox/internal/engine"
)

// SharedEndpoints is one endpoint state for several outboxes: outboxes
// given the same *SharedEndpoints in their Config (as the partition stores
// of one process in Kafka group mode are) have, per endpoint, one disable,
// one throttle, one circuit breaker and one failure streak, instead of one
// each:
//
//   - the breaker counts the failures of every outbox; it opens once, with
//     one log line and one Hooks.OnBreaker call (by the outbox whose
//     outcome opened it), and holds the endpoint in all of them;
//   - when it half-opens, one probe goes out for all of them (the first
//     outbox to take one of the endpoint's events sends it, the others'
//     events wait for its answer), and only if this process sends the
//     endpoint's probes (SharedEndpointsConfig.Probes);
//   - a disable answer (410) in any outbox disables the endpoint in all,
//     and a throttle answer (429, Retry-After) holds it in all;
//   - EnableEndpoint and RetryEndpoint on any of them lift it for all (the
//     others' waiting events become due at once, as when a breaker closes).
//
// The shared state is authoritative for those fields. Each outbox still
// keeps its durable endpoint states: it reads them overlaid with the shared
// state and writes the overlaid state whenever it commits an outcome for
// the endpoint, so its file holds the shared state as of its last commit.
// When outboxes open, their stored states seed the shared state, the most
// recently updated one winning; a disable or an opened breaker therefore
// survives a restart of the process. Endpoints and EndpointsPage show the
// shared state of the endpoints an outbox has a state for or its Sink
// lists, and Stats counts the held ones among the former.
//
// Transitions that must hold beyond the process (a disable, a throttle, a
// breaker opening, closing or being closed by hand, an enable, a retry) are
// handed to SharedEndpointsConfig.Publish, once each; transitions received
// from elsewhere are applied with Apply. It is safe for concurrent use.
type SharedEndpoints struct {
	s *engine.Shared
}

// SharedEndpointsConfig configures a SharedEndpoints. Every field is
// optional.
type SharedEndpointsConfig struct {
	// Publish is called once for each transition made by the outboxes
	// sharing the state (never for those given to Apply), synchronously
	// from the outbox's delivery machinery: it must be fast, must not
	// block, and must not call into the outboxes. Default: none.
	Publish func(EndpointTransition)
	// Probes reports whether this process sends the probes of an
	// endpoint's half-open breaker. A process that does not waits for the
	// probe's outcome from elsewhere (a TransitionClosed or another
	// TransitionOpened given to Apply); when none arrives within another
	// cool-down, it sends a probe itself, so an endpoint is never held
	// forever by a lost transition. Default: nil, this process probes.
	Probes func(endpoint string) bool
	// Logger receives one line per transition applied with Apply that
	// changed the endpoint. Default: discard.
	Logger *slog.Logger
}

// NewSharedEndpoints returns an empty shared endpoint state, for
// Config.SharedEndpoints.
func NewSharedEndpoints(cfg SharedEndpointsConfig) *SharedEndpoints {
	ecfg := engine.SharedConfig{Probes: cfg.Probes, Logger: cfg.Logger}
	if f := cfg.Publish; f != nil {
		ecfg.Publish = func(t engine.Transition) { f(transitionOf(t)) }
	}
	return &SharedEndpoints{s: engine.NewShared(ecfg)}
}

// Apply applies a transition made elsewhere, by another process of a group:
// a disable, a throttle or an opening holds the endpoint in every outbox
// sharing s (the breaker until t.Until, without a probe from here before
// then), and a closing, an enable or a retry lifts it, making their
// waiting events due at once. It publishes nothing, and logs one line when
// it changed the endpoint. A hold older than the endpoint's last lift, or
// a lift older than its last hold, is stale and changes nothing: applying
// a transition twice, or one this process published, is harmless. The
// error, for a transition that does not pass the checks its decoder makes,
// is a *TransitionError, and nothing is applied.
func (s *SharedEndpoints) Apply(t EndpointTransition) error {
	if err := t.check(); err != nil {
		return err
	}
	s.s.Apply(engine.Transition{Endpoint: t.Endpoint, Kind: string(t.Kind), Until: t.Until, Reason: t.Reason, At: t.At})
	return nil
}

// engineShared returns what the engine shares, nil for a nil s.
func (s *SharedEndpoints) engineShared() *engine.Shared {
	if s == nil {
		return nil
	}
	return s.s
}

// TransitionKind is what an EndpointTransition did to its endpoint.
type TransitionKind string

// The kinds of an EndpointTransition.
const (
	// TransitionDisabled: a disable answer (410) disabled the endpoint;
	// Reason says why. Until is zero.
	TransitionDisabled TransitionKind = engine.TransitionDisabled
	// TransitionThrottled: a throttle answer (429, Retry-After) holds the
	// endpoint until Until.
	TransitionThrottled TransitionKind = engine.TransitionThrottled
	// TransitionOpened: the breaker opened, or opened again after a failed
	// probe, until Until.
	TransitionOpened TransitionKind = engine.TransitionOpened
	// TransitionClosed: the receiver answered (the probe, or any answer
	// that is not a failure) and the breaker closed: deliveries resume.
	TransitionClosed TransitionKind = engine.TransitionClosed
	// TransitionEnabled: an operator enabled the endpoint (EnableEndpoint):
	// disable, throttle and breaker are lifted.
	TransitionEnabled TransitionKind = engine.TransitionEnabled
	// TransitionRetried: an operator retried the endpoint (RetryEndpoint):
	// throttle and breaker are lifted.
	TransitionRetried TransitionKind = engine.TransitionRetried
)

// EndpointTransition is a change of an endpoint's state that a group of
// processes shares (see SharedEndpoints). Its JSON encoding is stable:
//
//	{"v":1,"endpoint":"orders","kind":"opened","until":"2026-12-06T07:00:05Z","at":"2026-12-06T07:00:00Z"}
//
// with "until" for throttled and opened only, "reason" for disabled only
// (each left out when empty), and times in RFC 3339 with nanoseconds, UTC.
// "v" is the version of the encoding; a decoder refuses other versions.
type EndpointTransition struct {
	// Endpoint is the endpoint's name: required, valid UTF-8, at most
	// MaxEndpointNameBytes.
	Endpoint string
	// Kind is what happened.
	Kind TransitionKind
	// Until is when the hold ends: required for TransitionThrottled and
	// TransitionOpened, zero otherwise.
	Until time.Time
	// Reason says why the endpoint was disabled (TransitionDisabled), at
	// most MaxTransitionReasonBytes; empty otherwise.
	Reason string
	// At is when it happened. Required.
	At time.Time
}

// Limits of an EndpointTransition.
const (
	MaxEndpointNameBytes     = 1024
	MaxTransitionReasonBytes = 1024
)

// transitionVersion is the version of the JSON encoding.
const transitionVersion = 1

// transitionJSON is the JSON encoding of an EndpointTransition.
type transitionJSON struct {
	V        int            `json:"v"`
	Endpoint string         `json:"endpoint"`
	Kind     TransitionKind `json:"kind"`
	Until    *time.Time     `json:"until,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	At       time.Time      `json:"at"`
}

// MarshalJSON encodes t as its type's doc shows. It fails with a
// *TransitionError for a transition that Apply would refuse.
func (t EndpointTransition) MarshalJSON() ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	j := transitionJSON{V: transitionVersion, Endpoint: t.Endpoint, Kind: t.Kind, Reason: t.Reason, At: t.At.UTC()}
	if !t.Until.IsZero() {
		u := t.Until.UTC()
		j.Until = &u
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the encoding MarshalJSON makes. Anything else (not
// a JSON object, another version, an unknown kind, a field missing, too
// long or not allowed for the kind) fails with an error, a
// *TransitionError for the checks, and leaves t unchanged.
func (t *EndpointTransition) UnmarshalJSON(b []byte) error {
	var j transitionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return &TransitionError{Reason: "not a transition object: " + err.Error()}
	}
	if j.V != transitionVersion {
		return &TransitionError{Field: "v", Reason: fmt.Sprintf("version %d; this process reads version %d", j.V, transitionVersion)}
	}
	d := EndpointTransition{Endpoint: j.Endpoint, Kind: j.Kind, Reason: j.Reason, At: j.At.UTC()}
	if j.Until != nil {
		d.Until = j.Until.UTC()
	}
	if err := d.check(); err != nil {
		return err
	}
	*t = d
	return nil
}

// check reports what makes t invalid.
func (t EndpointTransition) check() error {
	switch {
	case t.Endpoint == "" || len(t.Endpoint) > MaxEndpointNameBytes || !utf8.ValidString(t.Endpoint):
		return &TransitionError{Field: "endpoint", Reason: fmt.Sprintf("must be 1 to %d bytes of UTF-8", MaxEndpointNameBytes)}
	case t.At.IsZero():
		return &TransitionError{Field: "at", Reason: "required"}
	case !encodable(t.At):
		return &TransitionError{Field: "at", Reason: "must be within the years 1 to 9999, UTC"}
	case !t.Until.IsZero() && !encodable(t.Until):
		return &TransitionError{Field: "until", Reason: "must be within the years 1 to 9999, UTC"}
	case len(t.Reason) > MaxTransitionReasonBytes || !utf8.ValidString(t.Reason):
		return &TransitionError{Field: "reason", Reason: fmt.Sprintf("must be at most %d bytes of UTF-8", MaxTransitionReasonBytes)}
	}
	hold := false
	switch t.Kind {
	case TransitionThrottled, TransitionOpened:
		hold = true
	case TransitionDisabled, TransitionClosed, TransitionEnabled, TransitionRetried:
	default:
		return &TransitionError{Field: "kind", Reason: fmt.Sprintf("unknown kind %q", t.Kind)}
	}
	switch {
	case hold && t.Until.IsZero():
		return &TransitionError{Field: "until", Reason: "required for " + string(t.Kind)}
	case !hold && !t.Until.IsZero():
		return &TransitionError{Field: "until", Reason: "not allowed for " + string(t.Kind)}
	case t.Reason != "" && t.Kind != TransitionDisabled:
		return &TransitionError{Field: "reason", Reason: "only for disabled"}
	}
	return nil
}

// encodable reports whether t is within the years that its encoding, in
// UTC, can hold.
func encodable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// TransitionError is why an EndpointTransition is refused.
type TransitionError struct {
	// Field is the JSON field at fault ("" for the whole record).
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error names the field and the reason.
func (e *TransitionError) Error() string {
	if e.Field == "" {
		return "outbox: endpoint transition: " + e.Reason
	}
	return "outbox: endpoint transition: " + e.Field + ": " + e.Reason
}

// Is makes a *TransitionError match ErrInvalid.
func (e *TransitionError) Is(target error) bool { return errors.Is(ErrInvalid, target) }

// transitionOf is the EndpointTransition of an engine's.
func transitionOf(t engine.Transition) EndpointTransition {
	return EndpointTransition{Endpoint: t.Endpoint, Kind: TransitionKind(t.Kind), Until: t.Until.UTC(),
		Reason: t.Reason, At: t.At.UTC()}
}
