package outbox

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/outboxd/outbox/outbox/internal/engine"
	"github.com/outboxd/outbox/outbox/internal/ratelimit"
)

// RateLimit caps how fast deliveries to one endpoint start: PerSecond on
// average, with bursts of up to Burst at once.
type RateLimit struct {
	// PerSecond is the sustained rate, in deliveries started per second,
	// from MinRate to MaxRate.
	PerSecond float64
	// Burst is how many deliveries may start at once after a quiet spell.
	// Must be at least 1.
	Burst int
}

// Bounds of every rate, in events per second: RateLimit.PerSecond, the
// rate of RetryEndpoint and ReplayFilter.Rate. A rate below one a day is a
// mistake rather than a pace, and none above a million a second is one an
// endpoint can take.
const (
	MinRate = ratelimit.MinPerSecond
	MaxRate = ratelimit.MaxPerSecond
)

// ValidateRate returns a *ValidationError with Field "rate" when perSecond
// is not within MinRate and MaxRate (NaN and infinities included); its
// reason names the bounds.
func ValidateRate(perSecond float64) error {
	if reason := ratelimit.CheckRate(perSecond); reason != "" {
		return &ValidationError{Field: "rate", Reason: reason, argument: true}
	}
	return nil
}

// paceRate returns the pace of an operator's call: DefaultReplayRate for
// 0, perSecond when it is within the bounds, a *ValidationError otherwise.
func paceRate(perSecond float64) (float64, error) {
	if perSecond == 0 {
		return DefaultReplayRate, nil
	}
	return perSecond, ValidateRate(perSecond)
}

// RateLimits holds the rate limits of endpoints, by endpoint name (the name
// a destination resolves to; with raw URL destinations, scheme://host:port).
// Outboxes given the same *RateLimits in their Config share each
// endpoint's limit: the partition stores of one process in Kafka group mode
// do, so the limit holds per process, not per store. It is safe for
// concurrent use, and limits can be set and removed while the outboxes
// using it deliver (Set, Remove).
//
// Several processes can hold one limit between them: each enforces a share
// of it (SetShare), as the members of a Kafka group do, each the share of
// the partitions it owns, so that the limit holds for the group.
//
// A delivery the limit refuses is not started: its event stays pending,
// spends no attempt, and no worker waits for it; events of a limited
// endpoint with a backlog are rescheduled, in order, to when the limit will
// let them go.
type RateLimits struct {
	set *ratelimit.Set
}

// NewRateLimits validates limits and returns them ready for Config. The
// error is a *ConfigError naming the endpoint and the field it refuses.
// NewRateLimits(nil) gives an empty set to which Set can add limits later.
func NewRateLimits(limits map[string]RateLimit) (*RateLimits, error) {
	var ls map[string]ratelimit.Limit
	if limits != nil {
		ls = make(map[string]ratelimit.Limit, len(limits))
	}
	for name, l := range limits {
		ls[name] = ratelimit.Limit(l)
	}
	set, err := ratelimit.New(ls)
	if err != nil {
		return nil, rateLimitErr(err)
	}
	return &RateLimits{set: set}, nil
}

// rateLimitErr turns a limit the ratelimit package refuses into a
// *ConfigError.
func rateLimitErr(err error) error {
	var bad *ratelimit.Invalid
	if errors.As(err, &bad) {
		return &ConfigError{Field: bad.Field, Reason: bad.Reason}
	}
	return err
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
	return rateLimitErr(rl.set.Set(endpoint, ratelimit.Limit(l)))
}

// Remove removes the rate limit of an endpoint, if it has one: deliveries
// that start after it returns are not paced. Events already rescheduled to
// the pace of the old limit keep their time.
func (rl *RateLimits) Remove(endpoint string) { rl.set.Remove(endpoint) }

// Limit returns the rate limit of an endpoint; ok is false when it has none.
func (rl *RateLimits) Limit(endpoint string) (l RateLimit, ok bool) {
	if rl == nil {
		return RateLimit{}, false
	}
	sl, ok := rl.set.Limit(endpoint)
	return RateLimit(sl), ok
}

// SetShare makes rl enforce the part owned/total of every limit, those set
// before and those set after, until the next SetShare: an endpoint limited
// to PerSecond with Burst is paced at PerSecond × owned / total, with
// bursts of Burst × owned / total rounded down but at least 1. Set keeps
// the limit as given (Limit reports it); Effective reports the share
// enforced. SetShare(n, n) enforces the whole limits again.
//
// Each endpoint's limiter keeps its tokens (up to the new burst) across a
// new share, so a re-split lets no extra burst through. With owned 0 no
// delivery to a limited endpoint starts until a later SetShare gives a
// part back: such an endpoint's events stay pending and spend nothing.
//
// total must be positive and owned between 0 and total, else the error is
// a *ConfigError and nothing changes.
func (rl *RateLimits) SetShare(owned, total int) error {
	return rateLimitErr(rl.set.SetShare(owned, total))
}

// Effective returns the share of an endpoint's rate limit that rl enforces
// (see SetShare): the limit itself when no share was set, the zero
// RateLimit under a share of nothing. ok is false when it has no limit.
func (rl *RateLimits) Effective(endpoint string) (l RateLimit, ok bool) {
	if rl == nil {
		return RateLimit{}, false
	}
	sl, ok := rl.set.Effective(endpoint)
	return RateLimit(sl), ok
}

// engineLimiter is what the engine looks an endpoint's limit up with: nil
// when no endpoint can be limited (a nil *RateLimits); an empty set can
// take limits later (Set), so the engine paces for it.
func (rl *RateLimits) engineLimiter() func(endpoint string) *rate.Limiter {
	if rl == nil {
		return nil
	}
	return rl.set.Limiter
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
func (s BreakerState) String() string { return engine.BreakerState(s).String() }

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
