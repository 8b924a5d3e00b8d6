package outbox

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/outboxd/outbox/store"
)

// RateLimit caps how fast deliveries to one endpoint start: PerSecond on
// average, with bursts of up to Burst at once.
type RateLimit struct {
	// PerSecond is the sustained rate, in deliveries started per second.
	// Must be positive.
	PerSecond float64
	// Burst is how many deliveries may start at once after a quiet spell.
	// Must be at least 1.
	Burst int
}

// RateLimits holds the rate limits of endpoints, by endpoint name (the name
// a destination resolves to; with raw URL destinations, scheme://host:port).
// Outboxes given the same *RateLimits in their Config share each
// endpoint's limit: the partition stores of one process in Kafka group mode
// do, so the limit holds per process, not per store. It is safe for
// concurrent use, and limits can be set and removed while the outboxes
// using it deliver (Set, Remove).
//
// A delivery the limit refuses is not started: its event stays pending,
// spends no attempt, and no worker waits for it; events of a limited
// endpoint with a backlog are rescheduled, in order, to when the limit will
// let them go.
type RateLimits struct {
	mu    sync.Mutex // serializes Set and Remove
	state atomic.Pointer[rateLimitsState]
}

// rateLimitsState is one version of the limits; never changed once
// published, so readers need no lock.
type rateLimitsState struct {
	limits   map[string]RateLimit
	limiters map[string]*rate.Limiter
}

// NewRateLimits validates limits and returns them ready for Config. The
// error is a *ConfigError naming the endpoint and the field it refuses.
// NewRateLimits(nil) gives an empty set to which Set can add limits later.
func NewRateLimits(limits map[string]RateLimit) (*RateLimits, error) {
	st := &rateLimitsState{limits: maps.Clone(limits), limiters: make(map[string]*rate.Limiter, len(limits))}
	if st.limits == nil {
		st.limits = map[string]RateLimit{}
	}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		l := limits[name]
		if err := checkRateLimit(name, l); err != nil {
			return nil, err
		}
		st.limiters[name] = rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)
	}
	rl := &RateLimits{}
	rl.state.Store(st)
	return rl, nil
}

// checkRateLimit validates the limit of an endpoint.
func checkRateLimit(name string, l RateLimit) error {
	field := "RateLimits[" + strconv.Quote(name) + "]"
	if name == "" {
		return &ConfigError{Field: "RateLimits", Reason: "an endpoint name is empty"}
	}
	if !(l.PerSecond > 0) || math.IsInf(l.PerSecond, 0) {
		return &ConfigError{Field: field + ".PerSecond", Reason: "must be a positive number of deliveries per second"}
	}
	if l.Burst < 1 {
		return &ConfigError{Field: field + ".Burst", Reason: "must be at least 1"}
	}
	return nil
}

// Set sets the rate limit of an endpoint, adding it or replacing the one it
// has, while the outboxes using rl deliver: deliveries that start after it
// returns are paced by l. A replaced limit keeps the tokens its endpoint
// had (up to the new burst), so changing it lets no extra burst through.
// The error is a *ConfigError as NewRateLimits returns, and changes
// nothing.
//
// An outbox started with a nil Config.RateLimits cannot take limits later:
// give it NewRateLimits(nil) to set them at run time.
func (rl *RateLimits) Set(endpoint string, l RateLimit) error {
	if err := checkRateLimit(endpoint, l); err != nil {
		return err
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	old := rl.state.Load()
	if cur, ok := old.limits[endpoint]; ok && cur == l {
		return nil
	}
	next := &rateLimitsState{limits: maps.Clone(old.limits), limiters: maps.Clone(old.limiters)}
	next.limits[endpoint] = l
	if lim := old.limiters[endpoint]; lim != nil {
		now := time.Now()
		lim.SetLimitAt(now, rate.Limit(l.PerSecond))
		lim.SetBurstAt(now, l.Burst)
	} else {
		next.limiters[endpoint] = rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)
	}
	rl.state.Store(next)
	return nil
}

// Remove removes the rate limit of an endpoint, if it has one: deliveries
// that start after it returns are not paced. Events already rescheduled to
// the pace of the old limit keep their time.
func (rl *RateLimits) Remove(endpoint string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	old := rl.state.Load()
	if _, ok := old.limits[endpoint]; !ok {
		return
	}
	next := &rateLimitsState{limits: maps.Clone(old.limits), limiters: maps.Clone(old.limiters)}
	delete(next.limits, endpoint)
	delete(next.limiters, endpoint)
	rl.state.Store(next)
}

// Limit returns the rate limit of an endpoint; ok is false when it has none.
func (rl *RateLimits) Limit(endpoint string) (l RateLimit, ok bool) {
	if rl == nil {
		return RateLimit{}, false
	}
	l, ok = rl.state.Load().limits[endpoint]
	return l, ok
}

// limiter returns the endpoint's limiter, nil when it has no limit.
func (rl *RateLimits) limiter(endpoint string) *rate.Limiter {
	if rl == nil {
		return nil
	}
	return rl.state.Load().limiters[endpoint]
}

// empty reports whether no endpoint can be limited: there are no limits
// and none can be set (a nil *RateLimits). An empty set can take limits
// later (Set), so the engine paces for it.
func (rl *RateLimits) empty() bool { return rl == nil }

// Breaker configures the circuit breaker every endpoint has. After
// Threshold consecutive failures of the retry class (no response, a
// timeout, a 5xx answer, a throttle answer other than 429), the endpoint
// opens: none of its events is attempted, and none spends an attempt, for
// a cool-down of CoolDown, doubled at each consecutive opening up to
// MaxCoolDown, jittered by ±20%. Then it is half-open: one event is sent as
// a probe, and the others wait for its answer. A probe that fails opens it
// again with the next cool-down; any answer that is not a failure (a
// success, but also a 404 or another 4xx: the receiver is up) closes it,
// and the endpoint's waiting events become due at once, paced by its rate
// limit. The state is durable. EnableEndpoint and RetryEndpoint close it by
// hand.
type Breaker struct {
	// Threshold is the number of consecutive retry-class failures that
	// opens the breaker. Default: 5; negative: the breaker never opens.
	Threshold int
	// CoolDown is how long the breaker stays open the first time.
	// Default: 5s.
	CoolDown time.Duration
	// MaxCoolDown caps the cool-down. Default: 5m, or CoolDown when that
	// is longer. Must not be less than CoolDown.
	MaxCoolDown time.Duration
}

// Defaults of Breaker, as documented on its fields.
const (
	DefaultBreakerThreshold   = 5
	DefaultBreakerCoolDown    = 5 * time.Second
	DefaultBreakerMaxCoolDown = 5 * time.Minute
)

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

// breakerAt returns the state of ep's breaker at now.
func breakerAt(ep store.EndpointState, now time.Time) BreakerState {
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
func (o *Outbox) breaker(ep *store.EndpointState, res Result, tripped bool, begun, now time.Time) {
	switch {
	case breakerFailure(res):
		switch breakerAt(*ep, now) {
		case BreakerClosed:
			if tripped {
				o.openBreaker(ep, now)
			}
		case BreakerHalfOpen:
			// Only an attempt begun once the cool-down ended is the
			// probe; a failure of one sent before it opened is old news.
			if !begun.Before(ep.BreakerUntil) {
				o.openBreaker(ep, now)
			}
		}
	case res.Action == ActionSuccess || breakerAnswer(res):
		closeBreaker(ep)
	}
}

// openBreaker opens ep's breaker at now for the next cool-down.
func (o *Outbox) openBreaker(ep *store.EndpointState, now time.Time) {
	ep.BreakerOpens++
	ep.BreakerOpenedAt = now
	ep.BreakerUntil = now.Add(o.coolDown(ep.BreakerOpens))
}

// closeBreaker closes ep's breaker.
func closeBreaker(ep *store.EndpointState) {
	ep.BreakerUntil, ep.BreakerOpenedAt, ep.BreakerOpens = time.Time{}, time.Time{}, 0
}

// coolDown returns the jittered cool-down of the n-th consecutive opening.
func (o *Outbox) coolDown(n int) time.Duration {
	b := &o.cfg.Breaker
	return expBackoff(b.CoolDown, 2, b.MaxCoolDown, breakerJitter, n)
}

// logBreaker logs a transition of an endpoint's breaker: one line per
// transition, not per event.
func (o *Outbox) logBreaker(ep store.EndpointState, to BreakerState) {
	switch to {
	case BreakerOpen:
		o.log.Warn("outbox: circuit breaker opened", "endpoint", ep.Name, "failures", ep.FailureStreak,
			"opens", ep.BreakerOpens, "until", ep.BreakerUntil, "last_status", ep.LastStatus)
	case BreakerHalfOpen:
		o.log.Info("outbox: circuit breaker half-open, sending a probe", "endpoint", ep.Name)
	case BreakerClosed:
		o.log.Info("outbox: circuit breaker closed", "endpoint", ep.Name)
	}
	o.hookBreaker(BreakerChange{Endpoint: ep.Name, State: to, Until: ep.BreakerUntil})
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
func (e *engine) allowLocked(r *store.Record, now time.Time) (ok, probe bool) {
	if e.probing[r.Endpoint] {
		return false, false // its probe is under way
	}
	ep, known := e.holds.state(r.Endpoint)
	halfOpen := known && breakerAt(ep, e.o.clock.Now()) == BreakerHalfOpen
	if lim := e.o.cfg.RateLimits.limiter(r.Endpoint); lim != nil {
		res := lim.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			e.armPacerLocked(now.Add(d))
			return false, false
		}
	}
	if halfOpen {
		e.probing[r.Endpoint] = true
		e.o.logBreaker(ep, BreakerHalfOpen)
	}
	m := e.meters[r.Endpoint]
	if m == nil {
		m = &rateMeter{}
		e.meters[r.Endpoint] = m
	}
	m.add(now)
	return true, halfOpen
}

// rate returns the recent rate of deliveries started to an endpoint.
func (e *engine) rate(endpoint string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m := e.meters[endpoint]; m != nil {
		return m.decayed(time.Now())
	}
	return 0
}

// armPacerLocked asks the pacer to dispatch again at t (or earlier, when it
// is armed for earlier already). e.mu must be held.
func (e *engine) armPacerLocked(t time.Time) {
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
func (e *engine) pace() {
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

// paceBacklog returns when the k-th event (from 0) of an endpoint's
// backlog beyond what its rate limit lets go now may go, for a punctuation
// at now; ok is false when the endpoint has no limit.
func (rl *RateLimits) paceBacklog(endpoint string, k int, now time.Time) (time.Time, bool) {
	l, ok := rl.Limit(endpoint)
	if !ok {
		return time.Time{}, false
	}
	return now.Add(time.Duration(float64(k+1) / l.PerSecond * float64(time.Second))), true
}

// String renders a rate limit for logs and errors.
func (l RateLimit) String() string {
	return fmt.Sprintf("%g/s burst %d", l.PerSecond, l.Burst)
}

// forwardLater asks the next punctuation to bring the endpoint's events
// forward (its breaker closed: those pushed back while it was half-open
// are due now), and wakes it.
func (e *engine) forwardLater(endpoint string) {
	e.mu.Lock()
	e.forward[endpoint] = true
	e.mu.Unlock()
	e.o.wake()
}

// bringForwardClosed brings forward the events of the endpoints whose
// breaker closed since the last punctuation.
func (e *engine) bringForwardClosed(ctx context.Context, now time.Time) {
	e.mu.Lock()
	if len(e.forward) == 0 {
		e.mu.Unlock()
		return
	}
	names := slices.Sorted(maps.Keys(e.forward))
	clear(e.forward)
	e.mu.Unlock()
	for _, name := range names {
		if err := e.o.bringForward(ctx, name, now); err != nil {
			e.o.logStoreErr("bring events forward after the breaker closed", err)
		}
	}
}

// tripLocked keeps the live failure streak of j's endpoint: its
// consecutive retry-class failures, in the order attempts end, since the
// receiver last answered otherwise (or the outbox started). When it reaches
// the breaker's threshold, j.tripped asks the commit of j's outcome to open
// the breaker, and the endpoint is held at once, so that no more
// deliveries start before that commit (which lifts this early hold). e.mu
// must be held.
func (e *engine) tripLocked(j *job) {
	name := j.rec.Endpoint
	switch {
	case breakerFailure(j.res):
		e.streaks[name]++
		if th := e.o.cfg.Breaker.Threshold; th > 0 && e.streaks[name] >= th {
			e.holds.holdSoon(name)
			j.tripped = true
		}
	case j.res.Action == ActionSuccess || breakerAnswer(j.res):
		delete(e.streaks, name)
	}
}

// resetStreak forgets the live failure streak of an endpoint that an
// operator closed the breaker of.
func (e *engine) resetStreak(endpoint string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.streaks, endpoint)
}
