package ratelimit

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Limit is one endpoint's limit: PerSecond on average, bursts of Burst.
type Limit struct {
	PerSecond float64
	Burst     int
}

// Invalid is a refused limit: Field names the endpoint and the field.
type Invalid struct{ Field, Reason string }

func (e *Invalid) Error() string { return e.Field + ": " + e.Reason }

// Set holds the limits of endpoints. Its zero value holds none.
type Set struct {
	mu    sync.Mutex // serializes Set and Remove
	state atomic.Pointer[state]
}

// state is one version of the limits; never changed once published, so
// readers need no lock.
type state struct {
	limits   map[string]Limit
	limiters map[string]*rate.Limiter
}

// New checks limits (in the order of their names) and returns a set of
// them.
func New(limits map[string]Limit) (*Set, error) {
	st := &state{limits: maps.Clone(limits), limiters: make(map[string]*rate.Limiter, len(limits))}
	if st.limits == nil {
		st.limits = map[string]Limit{}
	}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		l := limits[name]
		if err := check(name, l); err != nil {
			return nil, err
		}
		st.limiters[name] = rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)
	}
	s := &Set{}
	s.state.Store(st)
	return s, nil
}

// check validates the limit of an endpoint.
func check(name string, l Limit) error {
	field := "RateLimits[" + strconv.Quote(name) + "]"
	if name == "" {
		return &Invalid{Field: "RateLimits", Reason: "an endpoint name is empty"}
	}
	if !(l.PerSecond > 0) || math.IsInf(l.PerSecond, 0) {
		return &Invalid{Field: field + ".PerSecond", Reason: "must be a positive number of deliveries per second"}
	}
	if l.Burst < 1 {
		return &Invalid{Field: field + ".Burst", Reason: "must be at least 1"}
	}
	return nil
}

func (s *Set) load() *state {
	if st := s.state.Load(); st != nil {
		return st
	}
	return &state{}
}

// Set sets the limit of an endpoint; a replaced limit keeps its limiter's
// tokens (up to the new burst).
func (s *Set) Set(endpoint string, l Limit) error {
	if err := check(endpoint, l); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.load()
	if cur, ok := old.limits[endpoint]; ok && cur == l {
		return nil
	}
	next := &state{limits: maps.Clone(old.limits), limiters: maps.Clone(old.limiters)}
	if next.limits == nil {
		next.limits, next.limiters = map[string]Limit{}, map[string]*rate.Limiter{}
	}
	next.limits[endpoint] = l
	if lim := old.limiters[endpoint]; lim != nil {
		now := time.Now()
		lim.SetLimitAt(now, rate.Limit(l.PerSecond))
		lim.SetBurstAt(now, l.Burst)
	} else {
		next.limiters[endpoint] = rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)
	}
	s.state.Store(next)
	return nil
}

// Remove removes the limit of an endpoint, if it has one.
func (s *Set) Remove(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.load()
	if _, ok := old.limits[endpoint]; !ok {
		return
	}
	next := &state{limits: maps.Clone(old.limits), limiters: maps.Clone(old.limiters)}
	delete(next.limits, endpoint)
	delete(next.limiters, endpoint)
	s.state.Store(next)
}

// Limit returns the limit of an endpoint; ok is false when it has none.
func (s *Set) Limit(endpoint string) (l Limit, ok bool) {
	l, ok = s.load().limits[endpoint]
	return l, ok
}

// Limiter returns the endpoint's limiter, nil when it has no limit.
func (s *Set) Limiter(endpoint string) *rate.Limiter {
	return s.load().limiters[endpoint]
}
