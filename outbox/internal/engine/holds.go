package engine

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/store"
)

// holds owns the delivery states of the endpoints (disabled, throttled
// until, failure streak, throttle episode): the cache of their durable
// states that every delivery reads, the holds that answers not committed
// yet put on them, and the one lock that orders every write of them.
//
// The lock is held by whatever changes an endpoint, from its change of the
// cache until the store has it: a commit of delivery outcomes, and
// EnableEndpoint. So what the cache shows is never overwritten by an older
// write. Readers do not take it: the cache is a map replaced whole.
//
// With a Shared, the disable, throttle and breaker of every endpoint are
// the shared ones: each read overlays them on the cached state (see
// Shared).
type holds struct {
	e      *Engine // for its log, hooks and live failure streaks
	st     *store.Store
	shared *Shared // nil: the endpoints' states are this store's alone

	mu    sync.Mutex
	cache atomic.Pointer[map[string]store.EndpointState]
	// soon holds the endpoints a throttle or disable answer holds before
	// its commit put the new state in the cache.
	soon sync.Map // endpoint name → struct{}
}

func newHolds(e *Engine) (*holds, error) {
	st := e.st
	eps, err := st.Endpoints()
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	m := make(map[string]store.EndpointState, len(eps))
	for _, ep := range eps {
		m[ep.Name] = ep
	}
	h := &holds{e: e, st: st, shared: e.cfg.Shared}
	h.cache.Store(&m)
	if h.shared != nil {
		h.shared.seed(eps)
	}
	return h, nil
}

// state returns the cached state of an endpoint, overlaid with the shared
// one; ok is false when neither knows the endpoint.
func (h *holds) state(name string) (store.EndpointState, bool) {
	ep, ok := (*h.cache.Load())[name]
	return h.overlay(ep, name, ok)
}

// overlay returns ep (of the endpoint name, known to the store's cache or
// not) with the shared fields, and whether either knows it.
func (h *holds) overlay(ep store.EndpointState, name string, known bool) (store.EndpointState, bool) {
	if h.shared == nil {
		return ep, known
	}
	ep.Name = name
	ep, shared := h.shared.overlay(ep)
	return ep, known || shared
}

// held reports whether the endpoint is disabled, throttled at now, or held
// by an answer not committed yet.
func (h *holds) held(name string, now time.Time) bool {
	if _, soon := h.soon.Load(name); soon {
		return true
	}
	ep, ok := h.state(name)
	return ok && heldAt(ep, now)
}

// breakerClosed reports whether the endpoint's breaker is closed, as far
// as its state shows.
func (h *holds) breakerClosed(name string) bool {
	ep, _ := h.state(name)
	return ep.BreakerUntil.IsZero()
}

func heldAt(ep store.EndpointState, now time.Time) bool {
	return ep.Disabled || ep.NotBefore.After(now) || ep.BreakerUntil.After(now)
}

// heldNow returns the endpoints held at now, for a punctuation: the cached
// state of those disabled, throttled, or whose breaker is open or
// half-open, and a state with only the name for those held by an answer
// not committed yet.
func (h *holds) heldNow(now time.Time) map[string]store.EndpointState {
	out := make(map[string]store.EndpointState)
	for name, ep := range *h.cache.Load() {
		ep, _ = h.overlay(ep, name, true)
		if heldAt(ep, now) || !ep.BreakerUntil.IsZero() {
			out[name] = ep
		}
	}
	if h.shared != nil {
		for _, ep := range h.shared.holds() {
			if _, ok := out[ep.Name]; !ok && (heldAt(ep, now) || !ep.BreakerUntil.IsZero()) {
				out[ep.Name] = ep
			}
		}
	}
	h.soon.Range(func(k, _ any) bool {
		name := k.(string)
		if _, ok := out[name]; !ok {
			out[name] = store.EndpointState{Name: name}
		}
		return true
	})
	return out
}

// count counts the endpoints throttled at now, the disabled ones, and
// those whose breaker is not closed.
func (h *holds) count(now time.Time) (throttled, disabled, broken int) {
	for name, ep := range *h.cache.Load() {
		ep, _ = h.overlay(ep, name, true)
		switch {
		case ep.Disabled:
			disabled++
		case ep.NotBefore.After(now):
			throttled++
		}
		if !ep.BreakerUntil.IsZero() {
			broken++
		}
	}
	return throttled, disabled, broken
}

// holdSoon holds an endpoint at once, before the commit of the answer that
// throttled or disabled it.
func (h *holds) holdSoon(name string) { h.soon.Store(name, struct{}{}) }

// setLocked replaces cached states, and lifts the early holds of those
// endpoints whose answer is now in the cache. h.mu must be held.
func (h *holds) setLocked(eps map[string]store.EndpointState, committed []string) {
	if len(eps) > 0 {
		m := maps.Clone(*h.cache.Load())
		maps.Copy(m, eps)
		h.cache.Store(&m)
	}
	for _, name := range committed {
		h.soon.Delete(name)
	}
}

// statesLocked returns the cached states of the named endpoints, to be
// written to the store. h.mu must be held.
func (h *holds) statesLocked(names []string) []store.EndpointState {
	m := *h.cache.Load()
	eps := make([]store.EndpointState, 0, len(names))
	for _, name := range names {
		eps = append(eps, m[name])
	}
	return eps
}

// list returns the stored states of every endpoint that has one: what the
// cache (and Stats) shows, with no change of one half-written.
func (h *holds) list() ([]store.EndpointState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.overlaid(h.st.Endpoints())
}

// overlaid overlays the shared fields on stored states.
func (h *holds) overlaid(eps []store.EndpointState, err error) ([]store.EndpointState, error) {
	for i := range eps {
		eps[i], _ = h.overlay(eps[i], eps[i].Name, true)
	}
	return eps, err
}

// listAfter returns up to limit stored states of the endpoints whose
// names sort after after, by name, as list does.
func (h *holds) listAfter(after string, limit int) ([]store.EndpointState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.overlaid(h.st.EndpointsAfter(after, limit))
}

// enable clears the endpoint's disable, throttle and streak in the store
// and the cache, then runs after (bringing its events forward) under the
// same lock. An endpoint with no state (here nor in the shared state) is
// fine when listed (it has nothing to lift); otherwise store.ErrNotFound.
func (h *holds) enable(ctx context.Context, name string, now time.Time, listed bool, after func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, ok, err := h.stored(name)
	if err != nil {
		return err
	}
	switch {
	case !ok && listed:
		return after() // no state: nothing disabled, throttled or open
	case !ok:
		return fmt.Errorf("endpoint %q: %w", name, store.ErrNotFound)
	}
	ep.Disabled = false
	ep.DisabledReason = ""
	ep.DisabledAt = time.Time{}
	if err := h.liftLocked(ctx, ep, now, TransitionEnabled); err != nil {
		return err
	}
	return after()
}

// retry runs after (making the endpoint's events due, paced), then closes
// its breaker and lifts its throttle, in the store and the cache, under the
// same lock. In that order: while the endpoint is held no delivery takes
// its events, so every event not in flight gets its slot; lifted first, a
// punctuation could take a burst of them, unpaced, before after came to
// them. An endpoint with no state is fine when listed (it has nothing to
// lift); otherwise store.ErrNotFound. A *DisabledError when it is disabled.
func (h *holds) retry(ctx context.Context, name string, now time.Time, listed bool, after func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep, ok, err := h.stored(name)
	if err != nil {
		return err
	}
	switch {
	case !ok && !listed:
		return fmt.Errorf("endpoint %q: %w", name, store.ErrNotFound)
	case ep.Disabled:
		return &DisabledError{Since: ep.DisabledAt, Reason: ep.DisabledReason}
	}
	if err := after(); err != nil {
		return err
	}
	if ok && (!ep.BreakerUntil.IsZero() || !ep.NotBefore.IsZero() || ep.FailureStreak != 0) {
		return h.liftLocked(ctx, ep, now, TransitionRetried)
	}
	return nil
}

// stored returns the stored state of an endpoint overlaid with the shared
// one, and whether either knows it.
func (h *holds) stored(name string) (store.EndpointState, bool, error) {
	ep, ok, err := h.st.Endpoint(name)
	if err != nil {
		return ep, false, err
	}
	ep, ok = h.overlay(ep, name, ok)
	return ep, ok, nil
}

// liftLocked lifts ep's throttle, clears its failure streak and closes its
// breaker, and writes it to the store and the cache: an operator's call
// (EnableEndpoint, RetryEndpoint: kind is TransitionEnabled or
// TransitionRetried), which lifts the shared state too. h.mu must be held.
func (h *holds) liftLocked(ctx context.Context, ep store.EndpointState, now time.Time, kind string) error {
	wasOpen := !ep.BreakerUntil.IsZero()
	ep.NotBefore = time.Time{}
	ep.Throttles, ep.ThrottledAt = 0, time.Time{}
	ep.FailureStreak = 0
	closeBreaker(&ep)
	ep.UpdatedAt = now
	if err := h.st.PutEndpoint(ctx, ep); err != nil {
		return err
	}
	if h.shared != nil {
		h.shared.lift(ep.Name, kind, now, h.e)
	}
	h.setLocked(map[string]store.EndpointState{ep.Name: ep}, nil)
	h.e.resetStreak(ep.Name)
	if wasOpen {
		h.e.log.Info("outbox: circuit breaker closed by hand", "endpoint", ep.Name)
		h.e.hookBreaker(BreakerChange{Endpoint: ep.Name, State: BreakerClosed})
	}
	return nil
}
