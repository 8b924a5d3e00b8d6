package engine

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/outboxd/outbox/store"
)

// Breaker configures every endpoint's circuit breaker: Threshold
// consecutive retry-class failures open it for CoolDown, doubled at each
// consecutive opening up to MaxCoolDown and jittered; then one probe goes
// out, whose failure opens it again and whose answer closes it. A
// Threshold of 0 or less never opens it. The outbox's Config.Breaker,
// with its defaults filled in.
type Breaker struct {
	Threshold             int
	CoolDown, MaxCoolDown time.Duration
}

// breakerJitter is the randomization factor of the breaker's cool-down.
const breakerJitter = 0.2

// BreakerState is the state of an endpoint's circuit breaker.
type BreakerState uint8

// The states of a circuit breaker.
const (
	// BreakerClosed: deliveries go out as usual.
	BreakerClosed BreakerState = iota
	// BreakerOpen: no delivery goes out until the cool-down ends.
	BreakerOpen
	// BreakerHalfOpen: the cool-down ended; one probe goes out, and the
	// other events wait for its answer.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(s)) + ")"
}

// BreakerAt returns the state of ep's breaker at now.
func BreakerAt(ep store.EndpointState, now time.Time) BreakerState {
	switch {
	case ep.BreakerUntil.IsZero():
		return BreakerClosed
	case now.Before(ep.BreakerUntil):
		return BreakerOpen
	default:
		return BreakerHalfOpen
	}
}

// breakerFailure reports whether a result counts against the breaker: no
// answer, or an answer of the retry class, except 429 (the receiver is up
// and asks to slow down, which the throttle does).
func breakerFailure(res Result) bool {
	switch res.Action {
	case actionNone, ActionSuccess, ActionPark, ActionDead, ActionDisable:
		return false
	case ActionThrottle:
		return res.Status != http.StatusTooManyRequests
	}
	return true // ActionRetry, and anything unknown, as the policy retries it
}

// breakerAnswer reports whether a result shows that the receiver is up: it
// answered, and not with a failure. It resets the failure streak and closes
// the breaker.
func breakerAnswer(res Result) bool {
	return res.Status != 0 && !breakerFailure(res)
}

// breaker applies the result of an attempt that began at begun to ep's
// breaker. tripped reports that the endpoint's live failure streak reached
// the threshold with it (see tripLocked).
func (e *Engine) breaker(ep *store.EndpointState, res Result, tripped bool, begun, now time.Time) {
	switch {
	case breakerFailure(res):
		switch BreakerAt(*ep, now) {
		case BreakerClosed:
			if tripped {
				e.openBreaker(ep, now)
			}
		case BreakerHalfOpen:
			// Only an attempt begun once the cool-down ended is the
			// probe; a failure of one sent before it opened is old news.
			if !begun.Before(ep.BreakerUntil) {
				e.openBreaker(ep, now)
			}
		}
	case res.Action == ActionSuccess || breakerAnswer(res):
		closeBreaker(ep)
	}
}

// openBreaker opens ep's breaker at now for the next cool-down.
func (e *Engine) openBreaker(ep *store.EndpointState, now time.Time) {
	ep.BreakerOpens++
	ep.BreakerOpenedAt = now
	ep.BreakerUntil = now.Add(e.coolDown(ep.BreakerOpens))
}

// closeBreaker closes ep's breaker.
func closeBreaker(ep *store.EndpointState) {
	ep.BreakerUntil, ep.BreakerOpenedAt, ep.BreakerOpens = time.Time{}, time.Time{}, 0
}

// coolDown returns the jittered cool-down of the n-th consecutive opening.
func (e *Engine) coolDown(n int) time.Duration {
	b := &e.cfg.Breaker
	return expBackoff(b.CoolDown, 2, b.MaxCoolDown, breakerJitter, n)
}

// logBreaker logs a transition of an endpoint's breaker: one line per
// transition, not per event.
func (e *Engine) logBreaker(ep store.EndpointState, to BreakerState) {
	switch to {
	case BreakerOpen:
		e.log.Warn("outbox: circuit breaker opened", "endpoint", ep.Name, "failures", ep.FailureStreak,
			"opens", ep.BreakerOpens, "until", ep.BreakerUntil, "last_status", ep.LastStatus)
	case BreakerHalfOpen:
		e.log.Info("outbox: circuit breaker half-open, sending a probe", "endpoint", ep.Name)
	case BreakerClosed:
		e.log.Info("outbox: circuit breaker closed", "endpoint", ep.Name)
	}
	e.hookBreaker(BreakerChange{Endpoint: ep.Name, State: to, Until: ep.BreakerUntil})
}

// BreakerChange describes a transition of an endpoint's circuit breaker for
// Hooks.OnBreaker.
type BreakerChange struct {
	// Endpoint is the endpoint's name.
	Endpoint string
	// State is the state the breaker went to.
	State BreakerState
	// Until is when an open breaker half-opens; zero otherwise.
	Until time.Time
}

// rateMeter estimates the rate of deliveries started to one endpoint: an
// exponentially decaying count, over about rateMeterWindow.
type rateMeter struct {
	v    float64 // in events per second, at last
	last time.Time
}

const rateMeterWindow = 5 * time.Second

func (m *rateMeter) decayed(now time.Time) float64 {
	if m.last.IsZero() {
		return 0
	}
	return m.v * math.Exp(-now.Sub(m.last).Seconds()/rateMeterWindow.Seconds())
}

func (m *rateMeter) add(now time.Time) {
	m.v = m.decayed(now) + 1/rateMeterWindow.Seconds()
	m.last = now
}

// allowLocked reports whether a delivery to the endpoint may start now, as
// far as its rate limit and breaker go, and takes the limit's token or the
// probe's slot when it may (probe reports the latter). When the limit
// refuses, the pacer is armed to look again once a token is there. e.mu
// must be held.
func (e *Engine) allowLocked(r *store.Record, now time.Time) (ok, probe bool) {
	if e.probing[r.Endpoint] {
		return false, false // its probe is under way
	}
	ep, known := e.holds.state(r.Endpoint)
	clock := e.clock.Now()
	halfOpen := known && BreakerAt(ep, clock) == BreakerHalfOpen
	if halfOpen && e.cfg.Shared != nil && !e.cfg.Shared.mayProbe(r.Endpoint, e, clock, false) {
		return false, false // the probe is another store's, or another instance's
	}
	if lim := e.limiter(r.Endpoint); lim != nil {
		res := lim.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			e.armPacerLocked(now.Add(d))
			return false, false
		}
	}
	if halfOpen {
		if e.cfg.Shared != nil && !e.cfg.Shared.mayProbe(r.Endpoint, e, clock, true) {
			return false, false // taken meanwhile
		}
		e.probing[r.Endpoint] = true
		e.logBreaker(ep, BreakerHalfOpen)
	}
	m := e.meters[r.Endpoint]
	if m == nil {
		m = &rateMeter{}
		e.meters[r.Endpoint] = m
	}
	m.add(now)
	return true, halfOpen
}

// Rate returns the recent rate of deliveries started to an endpoint.
func (e *Engine) Rate(endpoint string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.meters[endpoint]; m != nil {
		return m.decayed(time.Now())
	}
	return 0
}

// armPacerLocked asks the pacer to dispatch again at t (or earlier, when it
// is armed for earlier already). e.mu must be held.
func (e *Engine) armPacerLocked(t time.Time) {
	if !e.pacerAt.IsZero() && !t.Before(e.pacerAt) {
		return
	}
	e.pacerAt = t
	select {
	case e.pacerPoke <- struct{}{}:
	default: // it will read pacerAt anyway
	}
}

// pace is the pacer's goroutine: it dispatches ready events when a rate
// limit that refused them has a token again, so that no worker waits for
// one. Started only when some endpoint is rate-limited; it returns when
// the engine stops.
func (e *Engine) pace() {
	defer e.workers.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-e.pacerStop:
			timer.Stop()
			return
		case <-e.pacerPoke:
			e.mu.Lock()
			at := e.pacerAt
			e.mu.Unlock()
			if !at.IsZero() {
				timer.Reset(time.Until(at))
			}
		case <-timer.C:
			e.mu.Lock()
			if !e.pacerAt.IsZero() && !time.Now().Before(e.pacerAt) {
				e.pacerAt = time.Time{}
				e.dispatchLocked()
			}
			e.mu.Unlock()
		}
	}
}

// forwardLater asks the next punctuation to bring the endpoint's events
// forward (its breaker closed: those waiting out a backoff are due now),
// and wakes it.
func (e *Engine) forwardLater(endpoint string) {
	e.mu.Lock()
	e.forward[endpoint] = true
	e.mu.Unlock()
	e.wake()
}

// bringForwardClosed brings forward the events of the endpoints whose
// breaker closed since the last punctuation.
func (e *Engine) bringForwardClosed(ctx context.Context, now time.Time) {
	e.mu.Lock()
	if len(e.forward) == 0 {
		e.mu.Unlock()
		return
	}
	names := slices.Sorted(maps.Keys(e.forward))
	clear(e.forward)
	e.mu.Unlock()
	for _, name := range names {
		if err := e.bringForward(ctx, name, now); err != nil {
			e.LogStoreErr("bring events forward after the breaker closed", err)
		}
	}
}

// tripLocked keeps the live failure streak of j's endpoint: its
// consecutive retry-class failures, in the order attempts end, since the
// receiver last answered otherwise (or the outbox started). When it reaches
// the breaker's threshold while the breaker is closed, j.tripped asks the
// commit of j's outcome to open the breaker, and the endpoint is held at
// once, so that no more deliveries start before that commit (which lifts
// this early hold). A breaker open or half-open already is not held again:
// only its probe's failure reopens it, and an early hold taken for the
// failure of an attempt sent before it opened would make the worker drop
// the probe it was just handed, a probe logged but never sent. e.mu must
// be held.
func (e *Engine) tripLocked(j *job) {
	name := j.rec.Endpoint
	switch {
	case breakerFailure(j.res):
		e.streaks[name]++
		streak := e.streaks[name]
		if e.cfg.Shared != nil {
			streak = e.cfg.Shared.fail(name)
		}
		if th := e.cfg.Breaker.Threshold; th > 0 && streak >= th && e.holds.breakerClosed(name) {
			e.holds.holdSoon(name)
			j.tripped = true
		}
	case j.res.Action == ActionSuccess || breakerAnswer(j.res):
		delete(e.streaks, name)
		if e.cfg.Shared != nil {
			e.cfg.Shared.answered(name)
		}
	}
}

// resetStreak forgets the live failure streak of an endpoint that an
// operator closed the breaker of.
func (e *Engine) resetStreak(endpoint string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.streaks, endpoint)
}

// hookBreaker reports a transition of an endpoint's breaker.
func (e *Engine) hookBreaker(c BreakerChange) {
	if f := e.cfg.Hooks.OnBreaker; f != nil {
		f(c)
	}
}

// mayProbe reports whether this engine may send the probe of the
// endpoint's half-open breaker at now, as far as the stores it shares the
// endpoint with go (see Shared.mayProbe).
func (e *Engine) mayProbe(endpoint string, now time.Time) bool {
	return e.cfg.Shared == nil || e.cfg.Shared.mayProbe(endpoint, e, now, false)
}
