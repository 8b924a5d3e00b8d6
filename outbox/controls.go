package outbox

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
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

// engineLimiter is what the engine looks an endpoint's limit up with: nil
// when no endpoint can be limited (a nil *RateLimits); an empty set can
// take limits later (Set), so the engine paces for it.
func (rl *RateLimits) engineLimiter() func(endpoint string) *rate.Limiter {
	if rl == nil {
		return nil
	}
	return rl.limiter
}

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

// String renders a rate limit for logs and errors.
func (l RateLimit) String() string {
	return fmt.Sprintf("%g/s burst %d", l.PerSecond, l.Burst)
}
