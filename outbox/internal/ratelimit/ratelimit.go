package ratelimit

import (
	"fmt"
	"maps"
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
//
// A set may enforce only a share of each limit (SetShare): its limiters
// then pace at that share, while Limit still reports the limit as set.
type Set struct {
	mu    sync.Mutex // serializes Set, Remove and SetShare
	m     sync.Map   // endpoint name → *entry, never changed once stored
	share share      // guarded by mu; the zero share is the whole
}

// entry is one endpoint's limit, the share of it its limiter enforces, and
// the limiter.
type entry struct {
	limit     Limit
	effective Limit
	limiter   *rate.Limiter
}

// share is the part owned/total of every limit that a set enforces; total
// 0 (the zero share) stands for the whole.
type share struct{ owned, total int }

// of returns the share of l: PerSecond × owned / total, and Burst likewise,
// rounded down but at least 1, so that the shares of a split add up to no
// more than l (but for that least burst). A share of nothing (owned 0) is
// the zero Limit: its limiter refuses every delivery.
func (sh share) of(l Limit) Limit {
	switch {
	case sh.total == 0 || sh.owned == sh.total:
		return l
	case sh.owned == 0:
		return Limit{}
	}
	return Limit{
		PerSecond: l.PerSecond * float64(sh.owned) / float64(sh.total),
		Burst:     max(1, l.Burst*sh.owned/sh.total),
	}
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
		s.m.Store(name, newEntry(l, l))
	}
	return s, nil
}

// check validates the limit of an endpoint.
func check(name string, l Limit) error {
	field := "RateLimits[" + strconv.Quote(name) + "]"
	if name == "" {
		return &Invalid{Field: "RateLimits", Reason: "an endpoint name is empty"}
	}
	if reason := CheckRate(l.PerSecond); reason != "" {
		return &Invalid{Field: field + ".PerSecond", Reason: reason}
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

// newEntry returns the entry of limit l enforcing effective, with a
// limiter whose bucket is full.
func newEntry(l, effective Limit) *entry {
	return &entry{limit: l, effective: effective,
		limiter: rate.NewLimiter(rate.Limit(effective.PerSecond), effective.Burst)}
}

// retuned returns the entry of limit l enforcing effective with e's
// limiter, retuned to it at now: the limiter keeps its tokens (up to the
// new burst), so that a change lets no extra burst through.
func (e *entry) retuned(l, effective Limit, now time.Time) *entry {
	if effective != e.effective {
		e.limiter.SetLimitAt(now, rate.Limit(effective.PerSecond))
		e.limiter.SetBurstAt(now, effective.Burst)
	}
	return &entry{limit: l, effective: effective, limiter: e.limiter}
}

// Set sets the limit of an endpoint, of which the set's share is enforced;
// a replaced limit keeps its limiter's tokens (up to the new burst).
func (s *Set) Set(endpoint string, l Limit) error {
	if err := check(endpoint, l); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.load(endpoint)
	switch {
	case old != nil && old.limit == l:
	case old != nil:
		s.m.Store(endpoint, old.retuned(l, s.share.of(l), time.Now()))
	default:
		s.m.Store(endpoint, newEntry(l, s.share.of(l)))
	}
	return nil
}

// SetShare makes the set enforce the part owned/total of every limit, set
// before or after (see Effective), until the next SetShare; SetShare(n, n)
// enforces the whole. Each limiter keeps its tokens (up to the new burst),
// so that a new share lets no extra burst through. With owned 0 every
// limiter refuses every delivery. total must be positive and owned between
// 0 and total.
func (s *Set) SetShare(owned, total int) error {
	if total < 1 || owned < 0 || owned > total {
		return &Invalid{Field: "RateLimits share", Reason: fmt.Sprintf(
			"%d of %d: want a positive total and a part between 0 and the total", owned, total)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.share = share{owned: owned, total: total}
	now := time.Now()
	s.m.Range(func(name, v any) bool {
		e := v.(*entry)
		s.m.Store(name, e.retuned(e.limit, s.share.of(e.limit), now))
		return true
	})
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

// Effective returns the share of an endpoint's limit that the set
// enforces (see SetShare); ok is false when it has no limit.
func (s *Set) Effective(endpoint string) (l Limit, ok bool) {
	if e := s.load(endpoint); e != nil {
		return e.effective, true
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
