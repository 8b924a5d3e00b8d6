package ratelimit

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
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

func TestShareSplitsRateAndBurst(t *testing.T) {
	l := Limit{PerSecond: 100, Burst: 10}
	for _, c := range []struct {
		owned, total int
		want         Limit
	}{
		{0, 0, l}, // no share set: the whole
		{6, 6, l},
		{2, 6, Limit{PerSecond: 100 * 2.0 / 6, Burst: 3}},
		{3, 6, Limit{PerSecond: 50, Burst: 5}},
		{1, 12, Limit{PerSecond: 100.0 / 12, Burst: 1}}, // burst at least 1
		{0, 6, Limit{}},
	} {
		if got := (share{c.owned, c.total}).of(l); got != c.want {
			t.Errorf("share %d/%d of %v = %v, want %v", c.owned, c.total, l, got, c.want)
		}
	}
}

func TestSetShareAppliesToLimitsSetBeforeAndAfter(t *testing.T) {
	s, err := New(map[string]Limit{"a": {PerSecond: 100, Burst: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][2]int{{1, 0}, {-1, 3}, {4, 3}} {
		if err := s.SetShare(bad[0], bad[1]); err == nil {
			t.Errorf("SetShare(%d, %d) accepted", bad[0], bad[1])
		}
	}
	if l, _ := s.Effective("a"); l != (Limit{PerSecond: 100, Burst: 10}) {
		t.Fatalf("a refused share changed the limit enforced: %v", l)
	}
	if err := s.SetShare(1, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Set("b", Limit{PerSecond: 8, Burst: 4}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Limit{"a": {PerSecond: 25, Burst: 2}, "b": {PerSecond: 2, Burst: 1}} {
		got, ok := s.Effective(name)
		if !ok || got != want {
			t.Errorf("Effective(%s) = %v, %v; want %v", name, got, ok, want)
		}
		if lim := s.Limiter(name); float64(lim.Limit()) != want.PerSecond || lim.Burst() != want.Burst {
			t.Errorf("limiter of %s paces %v/s burst %d, want %v", name, lim.Limit(), lim.Burst(), want)
		}
	}
	if l, _ := s.Limit("a"); l != (Limit{PerSecond: 100, Burst: 10}) {
		t.Errorf("Limit(a) = %v under a share; want the limit as set", l)
	}
	if err := s.SetShare(4, 4); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Effective("b"); got != (Limit{PerSecond: 8, Burst: 4}) {
		t.Errorf("Effective(b) under the whole share = %v", got)
	}
	if _, ok := s.Effective("none"); ok {
		t.Error("Effective of an endpoint without a limit reports one")
	}
}

// A re-split keeps the tokens a limiter has, up to the new burst: a larger
// share lets no burst through that the smaller one had spent, a share of
// nothing refuses everything, and a later share starts from the tokens
// kept, refilling at its own rate.
func TestReSplitLetsNoExtraBurstThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := New(map[string]Limit{"e": {PerSecond: 100, Burst: 10}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetShare(1, 2); err != nil {
			t.Fatal(err)
		}
		lim := s.Limiter("e")
		if n := allowed(lim); n != 5 {
			t.Fatalf("a full bucket under half the limit lets %d through, want its burst 5", n)
		}
		if err := s.SetShare(2, 2); err != nil {
			t.Fatal(err)
		}
		if s.Limiter("e") != lim {
			t.Fatal("SetShare replaced the limiter: its tokens are lost")
		}
		if n := allowed(lim); n != 0 {
			t.Fatalf("a grown share let %d through at once; want none (the tokens were spent)", n)
		}
		time.Sleep(50 * time.Millisecond) // fake time: 5 tokens at the whole rate
		if n := allowed(lim); n != 5 {
			t.Fatalf("50ms at 100/s refilled %d tokens, want 5", n)
		}
		time.Sleep(time.Second) // a full bucket of the whole: 10
		if err := s.SetShare(0, 2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if n := allowed(lim); n != 0 {
			t.Fatalf("a share of nothing let %d through", n)
		}
		if err := s.SetShare(1, 3); err != nil {
			t.Fatal(err)
		}
		if n := allowed(lim); n != 0 {
			t.Fatalf("a share given back let %d through at once; want none (nothing refills under a share of nothing)", n)
		}
		time.Sleep(30 * time.Millisecond) // 1 token at 33.3/s
		if n := allowed(lim); n != 1 {
			t.Fatalf("30ms at 100/3 per second refilled %d tokens, want 1", n)
		}
	})
}

// allowed takes every token lim has now and returns how many it took.
func allowed(lim *rate.Limiter) int {
	n := 0
	for lim.Allow() {
		n++
	}
	return n
}
