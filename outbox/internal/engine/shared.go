package engine

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/outboxd/outbox/store"
)

// The kinds of a Transition.
const (
	// TransitionDisabled: a 410 (or another disable answer) disabled the
	// endpoint; Reason says why.
	TransitionDisabled = "disabled"
	// TransitionThrottled: a throttle answer holds the endpoint until Until.
	TransitionThrottled = "throttled"
	// TransitionOpened: the breaker opened (again) until Until.
	TransitionOpened = "opened"
	// TransitionClosed: the receiver answered (a probe, or any answer that
	// is not a failure): the breaker is closed.
	TransitionClosed = "closed"
	// TransitionEnabled: an operator enabled the endpoint (disable,
	// throttle and breaker lifted).
	TransitionEnabled = "enabled"
	// TransitionRetried: an operator retried the endpoint (throttle and
	// breaker lifted).
	TransitionRetried = "retried"
)

// Transition is a change of an endpoint's state that holds for every
// store sharing a Shared, and that a group of instances shares too.
type Transition struct {
	Endpoint string
	Kind     string
	Until    time.Time // throttled, opened: when the hold ends
	Reason   string    // disabled: why
	At       time.Time // when it happened
}

// throttleSlack is how much a throttle must move an endpoint's hold later
// to be published again while it is held.
const throttleSlack = time.Second

// SharedConfig configures a Shared.
type SharedConfig struct {
	// Publish is given each transition made here (not those applied with
	// Apply), synchronously: it must not block nor call into the outboxes.
	Publish func(Transition)
	// Probes reports whether this instance sends the half-open probes of
	// an endpoint; nil: it does.
	Probes func(endpoint string) bool
	// Logger receives one line per transition applied from elsewhere.
	Logger *slog.Logger
}

// Shared is the endpoint state that the engines of several stores share:
// per endpoint, one disable, one throttle, one breaker, one live failure
// streak, and one probe at a time. It is authoritative for those fields:
// an engine reads its endpoints' states overlaid with it, and writes the
// overlaid state to its own store whenever it commits an outcome of the
// endpoint, so a store's durable state is the shared one as of its last
// commit. When stores open, their durable states seed it, the most
// recently updated one winning.
type Shared struct {
	cfg SharedConfig

	mu      sync.Mutex
	eps     map[string]*sharedEP
	engines []*Engine // started engines, to bring events forward
}

// sharedEP is one endpoint's shared state.
type sharedEP struct {
	hold   store.EndpointState // only the hold fields and UpdatedAt are used
	streak int                 // the live failure streak over every store
	prober *Engine             // whose probe is under way
	// heldAt and liftedAt are the times of the last hold (disable,
	// throttle, opening) and of the last lift: a transition applied from
	// elsewhere that is older than the last of the other sort is stale.
	heldAt, liftedAt time.Time
}

// NewShared returns an empty Shared.
func NewShared(cfg SharedConfig) *Shared {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Shared{cfg: cfg, eps: make(map[string]*sharedEP)}
}

// entryLocked returns the endpoint's entry, made when missing. s.mu must
// be held.
func (s *Shared) entryLocked(name string) *sharedEP {
	en := s.eps[name]
	if en == nil {
		en = &sharedEP{hold: store.EndpointState{Name: name}}
		s.eps[name] = en
	}
	return en
}

// copyHold copies the fields that Shared owns from src to dst.
func copyHold(dst *store.EndpointState, src store.EndpointState) {
	dst.Disabled, dst.DisabledReason, dst.DisabledAt = src.Disabled, src.DisabledReason, src.DisabledAt
	dst.NotBefore = src.NotBefore
	dst.BreakerUntil, dst.BreakerOpenedAt, dst.BreakerOpens = src.BreakerUntil, src.BreakerOpenedAt, src.BreakerOpens
}

// seed merges a store's durable states: an endpoint's state is taken when
// it is newer than what the shared state has.
func (s *Shared) seed(eps []store.EndpointState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ep := range eps {
		en, ok := s.eps[ep.Name]
		if ok && !ep.UpdatedAt.After(en.hold.UpdatedAt) {
			continue
		}
		en = s.entryLocked(ep.Name)
		copyHold(&en.hold, ep)
		en.hold.UpdatedAt = ep.UpdatedAt
	}
}

// overlay returns ep with the shared fields of its endpoint, and whether
// the shared state knows it.
func (s *Shared) overlay(ep store.EndpointState) (store.EndpointState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.eps[ep.Name]
	if ok {
		copyHold(&ep, en.hold)
	}
	return ep, ok
}

// holds returns the shared states of every endpoint it knows.
func (s *Shared) holds() []store.EndpointState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.EndpointState, 0, len(s.eps))
	for _, en := range s.eps {
		out = append(out, en.hold)
	}
	return out
}

// attach and detach add and remove a started engine.
func (s *Shared) attach(e *Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engines = append(s.engines, e)
}

func (s *Shared) detach(e *Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engines = slices.DeleteFunc(s.engines, func(x *Engine) bool { return x == e })
	for _, en := range s.eps {
		if en.prober == e {
			en.prober = nil
		}
	}
}

// fail counts a retry-class failure in the endpoint's streak and returns
// it; answered ends the streak.
func (s *Shared) fail(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entryLocked(name)
	en.streak++
	return en.streak
}

func (s *Shared) answered(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if en, ok := s.eps[name]; ok {
		en.streak = 0
	}
}

// mayProbe reports whether e may send the probe of the endpoint's
// half-open breaker at now, and takes the probe's slot for e when take is
// set. No other probe may be under way, and this instance must send the
// endpoint's probes (SharedConfig.Probes), unless the breaker has been
// half-open for another cool-down already: then the outcome of the probe
// elsewhere did not arrive, and this instance probes itself.
func (s *Shared) mayProbe(name string, e *Engine, now time.Time, take bool) bool {
	ours := s.cfg.Probes == nil || s.cfg.Probes(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	en, ok := s.eps[name]
	if !ok || en.prober != nil || BreakerAt(en.hold, now) != BreakerHalfOpen {
		return false
	}
	if !ours {
		coolDown := en.hold.BreakerUntil.Sub(en.hold.BreakerOpenedAt)
		if now.Before(en.hold.BreakerUntil.Add(coolDown)) {
			return false
		}
	}
	if take {
		en.prober = e
	}
	return true
}

// endProbe frees the endpoint's probe slot held by e.
func (s *Shared) endProbe(name string, e *Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if en, ok := s.eps[name]; ok && en.prober == e {
		en.prober = nil
	}
}

// record takes the endpoint state that an engine's commit made of prev
// into the shared state: a disable, a throttle that holds it longer, an
// opening of a breaker that is not open, a closing of one that is not
// closed. It returns next with the shared fields as they are now (what the
// engine writes to its store), and the transitions it made, which it
// publishes; the caller logs them.
func (s *Shared) record(prev, next store.EndpointState, now time.Time) (store.EndpointState, []Transition) {
	s.mu.Lock()
	en := s.entryLocked(next.Name)
	cur := &en.hold
	var ts []Transition
	if next.Disabled && !cur.Disabled {
		cur.Disabled, cur.DisabledReason, cur.DisabledAt = true, next.DisabledReason, next.DisabledAt
		ts = append(ts, Transition{Kind: TransitionDisabled, Reason: next.DisabledReason})
	}
	if next.NotBefore.After(prev.NotBefore) && next.NotBefore.After(cur.NotBefore) {
		if !cur.NotBefore.After(now) || next.NotBefore.Sub(cur.NotBefore) >= throttleSlack {
			ts = append(ts, Transition{Kind: TransitionThrottled, Until: next.NotBefore})
		}
		cur.NotBefore = next.NotBefore
	}
	switch {
	case !next.BreakerUntil.IsZero() && !next.BreakerUntil.Equal(prev.BreakerUntil):
		if BreakerAt(*cur, now) != BreakerOpen {
			cur.BreakerUntil, cur.BreakerOpenedAt, cur.BreakerOpens = next.BreakerUntil, next.BreakerOpenedAt, next.BreakerOpens
			ts = append(ts, Transition{Kind: TransitionOpened, Until: next.BreakerUntil})
		}
	case next.BreakerUntil.IsZero() && !prev.BreakerUntil.IsZero() && !cur.BreakerUntil.IsZero():
		closeBreaker(cur)
		en.streak = 0
		en.liftedAt = now
		ts = append(ts, Transition{Kind: TransitionClosed})
	}
	for i := range ts {
		ts[i].Endpoint, ts[i].At = next.Name, now
		if ts[i].Kind != TransitionClosed {
			en.heldAt = now
		}
	}
	if len(ts) > 0 {
		cur.UpdatedAt = now
	}
	copyHold(&next, *cur)
	engines := s.forwardingLocked(ts)
	s.mu.Unlock()
	s.publish(ts)
	forward(engines, next.Name)
	return next, ts
}

// forwardingLocked returns the engines whose events of the endpoint must be
// brought forward after ts: all of them when one lifts it. s.mu must be
// held.
func (s *Shared) forwardingLocked(ts []Transition) []*Engine {
	for _, t := range ts {
		if t.Kind == TransitionClosed || t.Kind == TransitionEnabled || t.Kind == TransitionRetried {
			return slices.Clone(s.engines)
		}
	}
	return nil
}

func forward(engines []*Engine, endpoint string) {
	for _, e := range engines {
		e.forwardLater(endpoint)
	}
}

func (s *Shared) publish(ts []Transition) {
	if s.cfg.Publish == nil {
		return
	}
	for _, t := range ts {
		s.cfg.Publish(t)
	}
}

// lift is an operator's enable (kind TransitionEnabled) or retry
// (TransitionRetried) through one engine, by: the shared state is lifted
// and the transition published, and the other engines bring the
// endpoint's events forward.
func (s *Shared) lift(name, kind string, now time.Time, by *Engine) {
	s.mu.Lock()
	en := s.entryLocked(name)
	liftLocked(en, kind, now)
	engines := slices.DeleteFunc(slices.Clone(s.engines), func(e *Engine) bool { return e == by })
	s.mu.Unlock()
	s.publish([]Transition{{Endpoint: name, Kind: kind, At: now}})
	forward(engines, name)
}

// liftLocked lifts en's breaker and throttle, and its disable too for an
// enable, and reports whether anything was held. s.mu must be held.
func liftLocked(en *sharedEP, kind string, at time.Time) bool {
	cur := &en.hold
	was := !cur.BreakerUntil.IsZero() || !cur.NotBefore.IsZero() || kind == TransitionEnabled && cur.Disabled
	if kind == TransitionEnabled {
		cur.Disabled, cur.DisabledReason, cur.DisabledAt = false, "", time.Time{}
	}
	cur.NotBefore = time.Time{}
	closeBreaker(cur)
	en.streak = 0
	en.liftedAt = at
	cur.UpdatedAt = at
	return was
}

// Apply applies a transition made elsewhere (another instance of the
// group): it holds or lifts the endpoint here as the transition says, with
// one log line when that changes anything, and publishes nothing. A hold
// older than the endpoint's last lift, or a lift older than its last hold,
// is stale and changes nothing.
func (s *Shared) Apply(t Transition) {
	s.mu.Lock()
	en := s.entryLocked(t.Endpoint)
	changed, lifted := s.applyLocked(en, t)
	var engines []*Engine
	if lifted {
		engines = slices.Clone(s.engines)
	}
	s.mu.Unlock()
	if changed {
		s.cfg.Logger.Info(appliedMsg(t.Kind), "endpoint", t.Endpoint, "until", t.Until, "reason", t.Reason, "at", t.At)
	}
	forward(engines, t.Endpoint)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// appliedMsg is the log line of a transition of kind applied from the
// group.
func appliedMsg(kind string) string {
	switch kind {
	case TransitionOpened, TransitionClosed:
		return "outbox: circuit breaker " + kind + " by the group"
	}
	return "outbox: endpoint " + kind + " by the group"
}

// applyLocked applies t to en and reports whether it changed it, and
// whether it lifted it. s.mu must be held.
func (s *Shared) applyLocked(en *sharedEP, t Transition) (changed, lifted bool) {
	cur := &en.hold
	switch t.Kind {
	case TransitionDisabled, TransitionThrottled, TransitionOpened:
		if t.At.Before(en.liftedAt) {
			return false, false
		}
		switch t.Kind {
		case TransitionDisabled:
			changed = !cur.Disabled
			if changed {
				cur.Disabled, cur.DisabledReason, cur.DisabledAt = true, t.Reason, t.At
			}
		case TransitionThrottled:
			if changed = t.Until.After(cur.NotBefore); changed {
				cur.NotBefore = t.Until
			}
		case TransitionOpened:
			if changed = t.Until.After(cur.BreakerUntil); changed {
				if cur.BreakerUntil.IsZero() {
					cur.BreakerOpens = 0
				}
				cur.BreakerUntil, cur.BreakerOpenedAt = t.Until, t.At
				cur.BreakerOpens++
			}
		}
		en.heldAt = later(en.heldAt, t.At)
	case TransitionClosed:
		if t.At.Before(en.heldAt) {
			return false, false
		}
		en.liftedAt = later(en.liftedAt, t.At)
		if changed = !cur.BreakerUntil.IsZero(); changed {
			closeBreaker(cur)
			en.streak = 0
		}
	case TransitionEnabled, TransitionRetried:
		if t.At.Before(en.heldAt) {
			return false, false
		}
		liftedAt := later(en.liftedAt, t.At)
		changed = liftLocked(en, t.Kind, t.At)
		en.liftedAt = liftedAt
	}
	if changed {
		cur.UpdatedAt = t.At
	}
	return changed, changed && (t.Kind == TransitionClosed || t.Kind == TransitionEnabled || t.Kind == TransitionRetried)
}
