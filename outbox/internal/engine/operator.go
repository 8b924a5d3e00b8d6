package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outbox/outbox/internal/ratelimit"
	"github.com/outboxd/outbox/store"
)

// DisabledError is Retry's answer for a disabled endpoint: enabling it is
// the call then.
type DisabledError struct {
	// Since is when the endpoint was disabled, Reason why.
	Since  time.Time
	Reason string
}

// Error says since when and why the endpoint is disabled.
func (e *DisabledError) Error() string {
	return fmt.Sprintf("disabled since %s (%s)", e.Since.Format(time.RFC3339), e.Reason)
}

// Endpoints returns the stored states of every endpoint that has one: what
// the engine's cache shows, with no change of one half-written.
func (e *Engine) Endpoints() ([]store.EndpointState, error) { return e.holds.list() }

// EndpointsAfter returns up to limit stored states of the endpoints whose
// names sort after after, by name, as Endpoints does.
func (e *Engine) EndpointsAfter(after string, limit int) ([]store.EndpointState, error) {
	return e.holds.listAfter(after, limit)
}

// SharedState returns the state of an endpoint that the engine shares
// with other stores (see Shared); ok is false without a Shared or when it
// does not know the endpoint.
func (e *Engine) SharedState(name string) (store.EndpointState, bool) {
	if e.cfg.Shared == nil {
		return store.EndpointState{}, false
	}
	return e.cfg.Shared.overlay(store.EndpointState{Name: name})
}

// HoldCounts counts the endpoints throttled at now, the disabled ones, and
// those whose breaker is not closed.
func (e *Engine) HoldCounts(now time.Time) (throttled, disabled, broken int) {
	return e.holds.count(now)
}

// Enable re-enables an endpoint, lifts its throttle, closes its breaker and
// makes its pending events due now (those waiting out a backoff, not
// before their DeliverAt), skipping events in flight. The error is
// the store's; store.ErrNotFound when the endpoint has no state and is not
// listed (a listed endpoint without state has nothing to lift).
func (e *Engine) Enable(ctx context.Context, name string, now time.Time, listed bool) error {
	return e.holds.enable(ctx, name, now, listed, func() error { return e.bringForward(ctx, name, now) })
}

// Retry closes an endpoint's breaker, lifts its throttle, and makes its
// pending events due from now on, perSecond of them a second, never later than they
// were nor before their DeliverAt, skipping events in flight. It returns
// how many it made due (those due already included). An endpoint with no
// state is fine when listed; otherwise store.ErrNotFound. A *DisabledError
// when it is disabled.
func (e *Engine) Retry(ctx context.Context, name string, now time.Time, listed bool, perSecond float64) (int, error) {
	n := 0
	err := e.holds.retry(ctx, name, now, listed, func() error {
		var err error
		n, err = e.pull(ctx, name, now, perSecond)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// bringForward makes the pending events of an endpoint due now (those
// waiting out a backoff), skipping events in flight; a scheduled event is
// not brought before its DeliverAt.
func (e *Engine) bringForward(ctx context.Context, endpoint string, now time.Time) error {
	_, err := e.pull(ctx, endpoint, now, 0)
	return err
}

// pageSize is how many pending events pull reads at a time.
const pageSize = 1000

// pull makes the pending events of an endpoint due from now on, perSecond
// of them a second (all at now with perSecond 0), skipping events in flight
// and never making an event due before its DeliverAt. With perSecond 0 it
// only brings events forward; with a rate, every event takes its slot,
// those due already included, so that the backlog is paced. It returns how many
// events it made due (those due already included; those scheduled later
// are not).
func (e *Engine) pull(ctx context.Context, endpoint string, now time.Time, perSecond float64) (int, error) {
	n := 0
	after := ""
	for {
		recs, next, err := e.st.List(store.ListQuery{
			State: store.StatePending,
			After: after,
			Limit: pageSize,
			Filter: func(r *store.Record) bool {
				return r.Endpoint == endpoint
			},
		})
		if err != nil {
			return n, err
		}
		outs := make([]store.Outcome, 0, len(recs))
		for _, r := range recs {
			if e.isInFlight(r.ID) {
				continue
			}
			at := now
			if perSecond > 0 {
				at = now.Add(ratelimit.Span(n, perSecond))
			}
			if r.DeliverAt.After(at) {
				at = r.DeliverAt // scheduled: never before its time
			} else {
				n++
			}
			if at.Equal(r.NextAttemptAt) || perSecond == 0 && at.After(r.NextAttemptAt) {
				continue // in its slot, or due already and nothing to pace
			}
			outs = append(outs, rescheduleAt(r, at))
		}
		if len(outs) > 0 {
			if _, err := e.st.Apply(ctx, outs, nil); err != nil {
				return n, err
			}
		}
		if next == "" {
			return n, nil
		}
		after = next
	}
}
