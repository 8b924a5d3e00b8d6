package ratelimit

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
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

// Set holds the limits of endpoints. Its zero value holds none. Readers
// take no lock, and a change costs the same whatever the number of limits.
type Set struct {
	mu sync.Mutex // serializes Set and Remove
	m  sync.Map   // endpoint name → *entry, never changed once stored
}

// entry is one endpoint's limit and its limiter.
type entry struct {
	limit   Limit
	limiter *rate.Limiter
}

// New checks limits (in the order of their names) and returns a set of
// them.
func New(limits map[string]Limit) (*Set, error) {
	s := &Set{}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		l := limits[name]
		if err := check(name, l); err != nil {
			return nil, err
		}
		s.m.Store(name, &entry{limit: l, limiter: rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)})
	}
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

// load returns the entry of an endpoint, nil when it has no limit.
func (s *Set) load(endpoint string) *entry {
	e, _ := s.m.Load(endpoint)
	en, _ := e.(*entry)
	return en
}

// Set sets the limit of an endpoint; a replaced limit keeps its limiter's
// tokens (up to the new burst).
func (s *Set) Set(endpoint string, l Limit) error {
	if err := check(endpoint, l); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.load(endpoint)
	if old != nil && old.limit == l {
		return nil
	}
	if old != nil {
		now := time.Now()
		old.limiter.SetLimitAt(now, rate.Limit(l.PerSecond))
		old.limiter.SetBurstAt(now, l.Burst)
		s.m.Store(endpoint, &entry{limit: l, limiter: old.limiter})
		return nil
	}
	s.m.Store(endpoint, &entry{limit: l, limiter: rate.NewLimiter(rate.Limit(l.PerSecond), l.Burst)})
	return nil
}

// Remove removes the limit of an endpoint, if it has one.
func (s *Set) Remove(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m.Delete(endpoint)
}

// Limit returns the limit of an endpoint; ok is false when it has none.
func (s *Set) Limit(endpoint string) (l Limit, ok bool) {
	if e := s.load(endpoint); e != nil {
		return e.limit, true
	}
	return Limit{}, false
}

// Limiter returns the endpoint's limiter, nil when it has no limit.
func (s *Set) Limiter(endpoint string) *rate.Limiter {
	if e := s.load(endpoint); e != nil {
		return e.limiter
	}
	return nil
}
