package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outboxd/outbox/store"
)

// RetryEndpoint is what an operator calls once an endpoint's receiver is
// fixed: it closes the endpoint's circuit breaker, lifts its throttle, and
// makes its pending events due now, paced at rate events per second (0:
// DefaultReplayRate) so that the receiver is not flooded: the n-th event
// (from 0) becomes due n/rate seconds from now, or stays due earlier when it
// was; an event scheduled later (Event.DeliverAt) keeps its time. The
// endpoint's rate limit, if it has one, applies on top. It returns how many
// pending events it made due (those due already included); events in
// flight are left alone.
// ErrNotFound when the endpoint has no state and the Sink does not list it;
// ErrEndpointDisabled when it is disabled (EnableEndpoint is the call then).
func (o *Outbox) RetryEndpoint(ctx context.Context, name string, rate float64) (int, error) {
	if err := o.enter(); err != nil {
		return 0, err
	}
	defer o.ops.Done()
	if rate < 0 {
		return 0, fmt.Errorf("outbox: retry endpoint: %w: rate must not be negative", ErrInvalid)
	}
	if rate == 0 {
		rate = DefaultReplayRate
	}
	now := o.clock.Now().UTC()
	n := 0
	err := o.eng.holds.retry(ctx, name, now, o.listsEndpoint(name), func() error {
		var err error
		n, err = o.pull(ctx, "retry endpoint", name, now, time.Duration(float64(time.Second)/rate))
		return err
	})
	if err != nil {
		return 0, err
	}
	o.wake()
	return n, nil
}

// listsEndpoint reports whether the Sink lists a configured endpoint of
// that name (see EndpointLister).
func (o *Outbox) listsEndpoint(name string) bool {
	l, ok := o.sink.(EndpointLister)
	return ok && slices.Contains(l.EndpointNames(), name)
}

// pull makes the pending events of an endpoint due from now on, one every
// step (all at now with a step of 0), skipping events in flight and never
// making an event due later than it was, nor before its DeliverAt. op names
// the call in errors. It returns how many events it
// made due (those due already included; those scheduled later are not).
func (o *Outbox) pull(ctx context.Context, op, endpoint string, now time.Time, step time.Duration) (int, error) {
	n := 0
	after := ""
	for {
		recs, next, err := o.st.List(store.ListQuery{
			State: store.StatePending,
			After: after,
			Limit: MaxListLimit,
			Filter: func(r *store.Record) bool {
				return r.Endpoint == endpoint
			},
		})
		if err != nil {
			return n, mapErr(op, endpoint, err)
		}
		outs := make([]store.Outcome, 0, len(recs))
		for _, r := range recs {
			if o.eng.isInFlight(r.ID) {
				continue
			}
			at := now.Add(time.Duration(n) * step)
			if r.DeliverAt.After(at) {
				at = r.DeliverAt // scheduled: never before its time
			} else {
				n++
			}
			if !at.Before(r.NextAttemptAt) {
				continue // due already, or sooner than its turn
			}
			outs = append(outs, rescheduleAt(r, at))
		}
		if len(outs) > 0 {
			if _, err := o.st.Apply(ctx, outs, nil); err != nil {
				return n, mapErr(op, endpoint, err)
			}
		}
		if next == "" {
			return n, nil
		}
		after = next
	}
}
