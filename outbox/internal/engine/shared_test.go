package engine

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/store"
)

// An instance that does not send an endpoint's probes leaves the probe to
// the group for one more cool-down after its breaker half-opens, then
// probes itself (the group's outcome was lost); one that does probes at
// once. One probe at a time, whichever engine takes it.
func TestSharedProbeOwner(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ours       bool
		now        time.Time
		mayProbe   bool
		whatItSays string
	}{
		{true, at.Add(4 * time.Second), false, "open: no probe"},
		{true, at.Add(5 * time.Second), true, "half-open, the probes are ours"},
		{false, at.Add(5 * time.Second), false, "half-open, the group's owner probes"},
		{false, at.Add(10*time.Second - time.Nanosecond), false, "still within another cool-down"},
		{false, at.Add(10 * time.Second), true, "no outcome from the group within another cool-down"},
	} {
		s := NewShared(SharedConfig{Probes: func(string) bool { return tc.ours }})
		s.Apply(Transition{Endpoint: "a", Kind: TransitionOpened, Until: at.Add(5 * time.Second), At: at})
		e1, e2 := &Engine{}, &Engine{}
		if got := s.mayProbe("a", e1, tc.now, true); got != tc.mayProbe {
			t.Errorf("%s: mayProbe = %v; want %v", tc.whatItSays, got, tc.mayProbe)
		}
		if tc.mayProbe && s.mayProbe("a", e2, tc.now, true) {
			t.Errorf("%s: a second engine took the probe under way", tc.whatItSays)
		}
	}
}

// A transition applied from the group that is older than the last change
// of the other sort is stale: an opening older than a closing does not
// hold the endpoint again, an enable older than a disable does not lift
// it. The same transition applied twice changes nothing the second time.
func TestSharedApplyIgnoresStaleTransitions(t *testing.T) {
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	s := NewShared(SharedConfig{})
	state := func() store.EndpointState {
		ep, _ := s.overlay(store.EndpointState{Name: "a"})
		return ep
	}
	s.Apply(Transition{Endpoint: "a", Kind: TransitionClosed, At: at.Add(2 * time.Second)})
	s.Apply(Transition{Endpoint: "a", Kind: TransitionOpened, Until: at.Add(time.Hour), At: at.Add(time.Second)})
	if ep := state(); !ep.BreakerUntil.IsZero() {
		t.Errorf("an opening older than the closing held the endpoint: %+v", ep)
	}
	s.Apply(Transition{Endpoint: "a", Kind: TransitionDisabled, Reason: "gone", At: at.Add(4 * time.Second)})
	s.Apply(Transition{Endpoint: "a", Kind: TransitionEnabled, At: at.Add(3 * time.Second)})
	if ep := state(); !ep.Disabled || ep.DisabledReason != "gone" {
		t.Errorf("an enable older than the disable lifted it: %+v", ep)
	}
	open := Transition{Endpoint: "a", Kind: TransitionOpened, Until: at.Add(time.Hour), At: at.Add(5 * time.Second)}
	s.Apply(open)
	s.Apply(open)
	if ep := state(); ep.BreakerOpens != 1 || !ep.BreakerUntil.Equal(open.Until) {
		t.Errorf("the same opening applied twice: %+v; want one opening", ep)
	}
}
