package outbox

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

// actionNone marks a job that was not attempted (its endpoint became held
// while it waited for a worker): no outcome, the event stays as it was.
const actionNone Action = 0

// maxThrottleBackoff caps the endpoint-wide wait after a throttle answer
// without Retry-After: a receiver that sheds load is probed again soon.
const maxThrottleBackoff = 5 * time.Minute

// outcome turns a delivery result into the store outcome to commit (nil
// when the event stays untouched) and the endpoint's new state. begun is
// when the attempt started. dead reports that the event becomes a dead
// letter.
func (o *Outbox) outcome(r *store.Record, res Result, ep store.EndpointState, begun, now time.Time) (out *store.Outcome, newEP store.EndpointState, dead bool) {
	c := &o.cfg
	newEP = ep
	if res.Action == actionNone {
		return nil, newEP, false
	}
	if res.Status != 0 {
		newEP.LastStatus = res.Status
	}
	lastErr := describe(res)
	base := store.Outcome{
		ID:         r.ID,
		Version:    r.Version,
		Attempts:   r.Attempts,
		Deliveries: r.Deliveries + 1,
		LastStatus: res.Status,
		LastError:  lastErr,
	}
	age := now.Sub(ageStart(r))
	deadOut := func(reason string) (*store.Outcome, store.EndpointState, bool) {
		out := base
		out.Kind = store.OutcomeDead
		out.Reason = truncate(reason, maxErrorBytes)
		return &out, newEP, true
	}
	reschedule := func(at time.Time) (*store.Outcome, store.EndpointState, bool) {
		out := base
		out.Kind = store.OutcomeReschedule
		out.NextAttemptAt = at
		return &out, newEP, false
	}
	// retry spends an attempt, and reschedules the event at at unless that
	// was its last attempt or it is too old.
	retry := func(at time.Time) (*store.Outcome, store.EndpointState, bool) {
		base.Attempts++
		if base.Attempts >= c.MaxAttempts {
			return deadOut(fmt.Sprintf("max attempts (%d) reached: %s", c.MaxAttempts, lastErr))
		}
		if age >= c.MaxAge {
			return deadOut(fmt.Sprintf("max age %s reached: %s", c.MaxAge, lastErr))
		}
		return reschedule(at)
	}

	switch res.Action {
	case ActionSuccess:
		newEP.FailureStreak = 0
		newEP.Throttles, newEP.ThrottledAt = 0, time.Time{} // the episode ends
		out := base
		out.Kind = store.OutcomeDelete
		out.Reason = "delivered"
		return &out, newEP, false

	case ActionPark:
		if age >= c.MaxAge {
			return deadOut(fmt.Sprintf("max age %s reached while parked: %s", c.MaxAge, lastErr))
		}
		return reschedule(now.Add(c.ParkInterval))

	case ActionDisable:
		if !newEP.Disabled {
			newEP.Disabled = true
			newEP.DisabledAt = now
			// Only a response is the receiver's word; without one (the
			// sink's address guard) the sink disabled it.
			by := "disabled by the receiver: "
			if res.Status == 0 {
				by = "disabled: "
			}
			newEP.DisabledReason = truncate(by+lastErr, maxErrorBytes)
		}
		// The event itself is untouched: it waits for the endpoint.
		return nil, newEP, false

	case ActionDead:
		base.Attempts++ // the attempt that found the event undeliverable
		return deadOut(lastErr)

	case ActionThrottle:
		newEP.FailureStreak++
		o.throttle(&newEP, res.RetryAfter, begun, now)
		return retry(newEP.NotBefore)

	default: // ActionRetry, and anything unknown
		newEP.FailureStreak++
		wait := res.RetryAfter
		if wait > 0 {
			wait = min(wait, c.MaxThrottle)
		} else {
			wait = o.backoff(base.Attempts + 1)
		}
		return retry(now.Add(wait))
	}
}

// throttle holds the endpoint after a throttle answer to an attempt that
// began at begun. A Retry-After is honoured (capped by MaxThrottle). Without
// one, the wait grows with the episode: the first throttle answer starts it,
// and only an answer to an attempt that began after the last growth (so was
// sent after the hold, not already in flight when it began) grows it again,
// up to maxThrottleBackoff. The first success ends the episode.
func (o *Outbox) throttle(ep *store.EndpointState, retryAfter time.Duration, begun, now time.Time) {
	wait := retryAfter
	if wait <= 0 {
		if ep.Throttles > 0 && !begun.After(ep.ThrottledAt) {
			return // in flight when the episode last grew: already accounted for
		}
		ep.Throttles++
		ep.ThrottledAt = now
		wait = min(o.backoff(ep.Throttles), maxThrottleBackoff)
	}
	wait = min(wait, o.cfg.MaxThrottle)
	if until := now.Add(wait); until.After(ep.NotBefore) {
		ep.NotBefore = until
	}
}

// backoff returns the jittered wait after n failures (n >= 1): about
// BackoffInitial·BackoffMultiplier^(n-1), ±50%, at most BackoffMax.
func (o *Outbox) backoff(n int) time.Duration {
	return expBackoff(o.cfg.BackoffInitial, o.cfg.BackoffMultiplier, o.cfg.BackoffMax, backoffJitter, n)
}

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
