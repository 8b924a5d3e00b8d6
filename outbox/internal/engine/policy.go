package engine

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"

	"github.com/outboxd/outbox/store"
)

// maxErrorBytes caps LastError and dead reasons.
const maxErrorBytes = 1024

// maxThrottleBackoff caps the endpoint-wide wait after a throttle answer
// without Retry-After: a receiver that sheds load is probed again soon.
const maxThrottleBackoff = 5 * time.Minute

// Action is what the engine does with an event after an attempt; its
// values are those of the outbox's Action.
type Action uint8

// The actions of the status policy table.
const (
	// actionNone marks a job that was not attempted (its endpoint became
	// held while it waited for a worker): no outcome, the event stays as
	// it was.
	actionNone Action = iota
	// ActionSuccess deletes the event (compare-and-delete on its version).
	ActionSuccess
	// ActionRetry spends an attempt and reschedules after the backoff or
	// the Retry-After.
	ActionRetry
	// ActionPark reschedules after the park interval, spending nothing.
	ActionPark
	// ActionThrottle retries and holds the whole endpoint.
	ActionThrottle
	// ActionDisable disables the endpoint; the event waits for it.
	ActionDisable
	// ActionDead makes the event a dead letter.
	ActionDead
)

// String returns the action's name: success, retry, park, throttle,
// disable or dead ("unknown" otherwise).
func (a Action) String() string {
	switch a {
	case ActionSuccess:
		return "success"
	case ActionRetry:
		return "retry"
	case ActionPark:
		return "park"
	case ActionThrottle:
		return "throttle"
	case ActionDisable:
		return "disable"
	case ActionDead:
		return "dead"
	}
	return "unknown"
}

// Result is the outcome of one attempt, as the outbox's Result gives it.
type Result struct {
	// Action is what the Sink asked for.
	Action Action
	// Status is the response status, 0 when there was none.
	Status int
	// RetryAfter, when positive, is the wait the receiver asked for.
	RetryAfter time.Duration
	// Body is a bounded excerpt of the response body.
	Body string
	// Header holds response headers for the attempt log.
	Header map[string]string
	// Err is the transport or protocol error, if any.
	Err error
}

// verdict builds the outcome of one attempt at one event, for outcome.
type verdict struct {
	c       *Config
	base    store.Outcome
	newEP   store.EndpointState
	age     time.Duration
	lastErr string
}

// dead makes the event a dead letter for reason.
func (v *verdict) dead(reason string) (*store.Outcome, store.EndpointState, bool) {
	out := v.base
	out.Kind = store.OutcomeDead
	out.Reason = truncate(reason, maxErrorBytes)
	return &out, v.newEP, true
}

// reschedule moves the event's next attempt to at.
func (v *verdict) reschedule(at time.Time) (*store.Outcome, store.EndpointState, bool) {
	out := v.base
	out.Kind = store.OutcomeReschedule
	out.NextAttemptAt = at
	return &out, v.newEP, false
}

// retry spends an attempt, and reschedules the event at at unless that
// was its last attempt or it is too old.
func (v *verdict) retry(at time.Time) (*store.Outcome, store.EndpointState, bool) {
	v.base.Attempts++
	if v.base.Attempts >= v.c.MaxAttempts {
		return v.dead(fmt.Sprintf("max attempts (%d) reached: %s", v.c.MaxAttempts, v.lastErr))
	}
	if v.age >= v.c.MaxAge {
		return v.dead(fmt.Sprintf("max age %s reached: %s", v.c.MaxAge, v.lastErr))
	}
	return v.reschedule(at)
}

// outcome turns a delivery result into the store outcome to commit (nil
// when the event stays untouched) and the endpoint's new state. begun is
// when the attempt started. dead reports that the event becomes a dead
// letter.
func (e *Engine) outcome(r *store.Record, res Result, ep store.EndpointState, begun, now time.Time) (out *store.Outcome, newEP store.EndpointState, dead bool) {
	if res.Action == actionNone {
		return nil, ep, false
	}
	if res.Status != 0 {
		ep.LastStatus = res.Status
	}
	lastErr := describe(res)
	v := &verdict{
		c: &e.cfg,
		base: store.Outcome{
			ID:         r.ID,
			Version:    r.Version,
			Attempts:   r.Attempts,
			Deliveries: r.Deliveries + 1,
			LastStatus: res.Status,
			LastError:  lastErr,
		},
		newEP:   ep,
		age:     now.Sub(AgeStart(r)),
		lastErr: lastErr,
	}
	return e.decide(v, res, begun, now)
}

// decide applies the policy table's action to v.
func (e *Engine) decide(v *verdict, res Result, begun, now time.Time) (*store.Outcome, store.EndpointState, bool) {
	c := v.c
	switch res.Action {
	case ActionSuccess:
		v.newEP.FailureStreak = 0
		v.newEP.Throttles, v.newEP.ThrottledAt = 0, time.Time{} // the episode ends
		out := v.base
		out.Kind = store.OutcomeDelete
		out.Reason = "delivered"
		return &out, v.newEP, false

	case ActionPark:
		if v.age >= c.MaxAge {
			return v.dead(fmt.Sprintf("max age %s reached while parked: %s", c.MaxAge, v.lastErr))
		}
		return v.reschedule(now.Add(c.ParkInterval))

	case ActionDisable:
		disable(&v.newEP, res.Status, v.lastErr, now)
		// The event itself is untouched: it waits for the endpoint.
		return nil, v.newEP, false

	case ActionDead:
		v.base.Attempts++ // the attempt that found the event undeliverable
		return v.dead(v.lastErr)

	case ActionThrottle:
		v.newEP.FailureStreak++
		e.throttle(&v.newEP, res.RetryAfter, begun, now)
		return v.retry(v.newEP.NotBefore)

	default: // ActionRetry, and anything unknown
		v.newEP.FailureStreak++
		wait := res.RetryAfter
		if wait > 0 {
			wait = min(wait, c.MaxThrottle)
		} else {
			wait = e.backoff(v.base.Attempts + 1)
		}
		return v.retry(now.Add(wait))
	}
}

// disable disables ep after a disable answer (status 0: no response), unless
// it is disabled already.
func disable(ep *store.EndpointState, status int, lastErr string, now time.Time) {
	if ep.Disabled {
		return
	}
	ep.Disabled = true
	ep.DisabledAt = now
	// Only a response is the receiver's word; without one (the sink's
	// address guard) the sink disabled it.
	by := "disabled by the receiver: "
	if status == 0 {
		by = "disabled: "
	}
	ep.DisabledReason = truncate(by+lastErr, maxErrorBytes)
}

// throttle holds the endpoint after a throttle answer to an attempt that
// began at begun. A Retry-After is honoured (capped by MaxThrottle). Without
// one, the wait grows with the episode: the first throttle answer starts it,
// and only an answer to an attempt that began after the last growth (so was
// sent after the hold, not already in flight when it began) grows it again,
// up to maxThrottleBackoff. The first success ends the episode.
func (e *Engine) throttle(ep *store.EndpointState, retryAfter time.Duration, begun, now time.Time) {
	wait := retryAfter
	if wait <= 0 {
		if ep.Throttles > 0 && !begun.After(ep.ThrottledAt) {
			return // in flight when the episode last grew: already accounted for
		}
		ep.Throttles++
		ep.ThrottledAt = now
		wait = min(e.backoff(ep.Throttles), maxThrottleBackoff)
	}
	wait = min(wait, e.cfg.MaxThrottle)
	if until := now.Add(wait); until.After(ep.NotBefore) {
		ep.NotBefore = until
	}
}

// backoff returns the jittered wait after n failures (n >= 1): about
// BackoffInitial·BackoffMultiplier^(n-1), ±50%, at most BackoffMax.
func (e *Engine) backoff(n int) time.Duration {
	return expBackoff(e.cfg.BackoffInitial, e.cfg.BackoffMultiplier, e.cfg.BackoffMax, backoffJitter, n)
}

// backoffJitter is the randomization factor of the retry backoff (±50%).
const backoffJitter = 0.5

// expBackoff returns the n-th wait (n >= 1) of an exponential backoff:
// about initial·multiplier^(n-1), jittered by ±jitter, at most maxWait.
func expBackoff(initial time.Duration, multiplier float64, maxWait time.Duration, jitter float64, n int) time.Duration {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     initial,
		RandomizationFactor: jitter,
		Multiplier:          multiplier,
		MaxInterval:         maxWait,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	var d time.Duration
	for range max(n, 1) {
		d = b.NextBackOff()
	}
	return min(d, maxWait)
}

// describe renders a result for LastError and dead reasons.
func describe(res Result) string {
	var s string
	switch {
	case res.Err != nil && res.Status != 0:
		s = fmt.Sprintf("status %d: %v", res.Status, res.Err)
	case res.Err != nil:
		s = res.Err.Error()
	case res.Status != 0 && res.Body != "":
		s = fmt.Sprintf("status %d: %s", res.Status, strings.ToValidUTF8(res.Body, "\uFFFD"))
	case res.Status != 0:
		s = fmt.Sprintf("status %d", res.Status)
	default:
		s = res.Action.String()
	}
	return truncate(s, maxErrorBytes)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// AgeStart is when an event's age (the max age) starts: its creation, or
// its not-before time when that is later, so that a scheduled event has its
// whole max age after it first becomes due.
func AgeStart(r *store.Record) time.Time {
	if r.DeliverAt.After(r.CreatedAt) {
		return r.DeliverAt
	}
	return r.CreatedAt
}
