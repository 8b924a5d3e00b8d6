package ratelimit

import (
	"errors"
	"testing"
)

func TestNewRefusesTheFirstBadLimitByName(t *testing.T) {
	_, err := New(map[string]Limit{"b": {PerSecond: 0, Burst: 1}, "a": {PerSecond: 1, Burst: 0}})
	var bad *Invalid
	if !errors.As(err, &bad) || bad.Field != `RateLimits["a"].Burst` {
		t.Fatalf("New = %v, want the Burst of a refused", err)
	}
}

func TestSetKeepsTheLimiterAndRemoveDropsIt(t *testing.T) {
	s, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("e", Limit{PerSecond: 1, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	lim := s.Limiter("e")
	if lim == nil || !lim.Allow() {
		t.Fatal("no limiter after Set, or it refuses its first token")
	}
	if err := s.Set("e", Limit{PerSecond: 5, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	if s.Limiter("e") != lim {
		t.Fatal("Set replaced the limiter: its tokens are lost")
	}
	if l, ok := s.Limit("e"); !ok || l != (Limit{PerSecond: 5, Burst: 3}) {
		t.Fatalf("Limit = %v, %v", l, ok)
	}
	if err := s.Set("", Limit{PerSecond: 1, Burst: 1}); err == nil {
		t.Fatal("Set accepted an empty endpoint name")
	}
	s.Remove("e")
	if _, ok := s.Limit("e"); ok || s.Limiter("e") != nil {
		t.Fatal("limit kept after Remove")
	}
}

func TestZeroSetHoldsNone(t *testing.T) {
	var s Set
	if _, ok := s.Limit("e"); ok || s.Limiter("e") != nil {
		t.Fatal("zero Set has a limit")
	}
	if err := s.Set("e", Limit{PerSecond: 1, Burst: 1}); err != nil || s.Limiter("e") == nil {
		t.Fatalf("Set on a zero Set: %v", err)
	}
}
