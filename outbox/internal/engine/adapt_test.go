package engine

import (
	"testing"
	"time"
)

// deliveries feeds n results to l, one after another, each begun when the
// one before ended, and returns when the last ended.
func deliveries(l *limit, n int, at time.Time, lat time.Duration, failed, ok bool, ceiling int) time.Time {
	for range n {
		l.observe(failed, ok, at, lat, ceiling)
		at = at.Add(lat)
	}
	return at
}

func TestLimitGrowsWhileDeliveriesSucceed(t *testing.T) {
	l := newLimit(4)
	if got := l.get(64); got != 4 {
		t.Fatalf("a new endpoint's limit = %d, want the initial 4", got)
	}
	deliveries(l, 100, time.Unix(0, 0), time.Millisecond, false, true, 64)
	if got := l.get(64); got != 64 {
		t.Fatalf("after 100 quick successes the limit = %d, want the ceiling 64", got)
	}
	if got := l.get(16); got != 16 {
		t.Fatalf("with a ceiling of 16 the limit = %d, want 16", got)
	}
}

func TestLimitHalvesOncePerRoundOfFailures(t *testing.T) {
	l := newLimit(32)
	begun := time.Unix(100, 0)
	// 32 deliveries in flight at once all fail: the limit halves once,
	// not 32 times, as their failures are news of one moment.
	for range 32 {
		l.observe(true, false, begun, time.Second, 64)
	}
	if got := l.get(64); got != 16 {
		t.Fatalf("after one round of failures the limit = %d, want 16", got)
	}
	// Failures of deliveries begun after that halve it again, round after
	// round, down to 1.
	at := begun.Add(2 * time.Second)
	for range 40 {
		l.observe(true, false, at, time.Second, 64)
		at = at.Add(2 * time.Second)
	}
	if got := l.get(64); got != 1 {
		t.Fatalf("a dead receiver's limit = %d, want 1", got)
	}
}

func TestLimitIgnoresScatteredFailures(t *testing.T) {
	l := newLimit(4)
	at := time.Unix(0, 0)
	// A receiver that fails three requests in ten, at random, is up: its
	// limit still grows to the ceiling.
	for i := range 400 {
		l.observe(i%10 < 3, i%10 >= 3, at, time.Millisecond, 64)
		at = at.Add(time.Millisecond)
	}
	if got := l.get(64); got != 64 {
		t.Fatalf("limit = %d with 30%% of failures, want the ceiling 64", got)
	}
}

func TestLimitRecoversQuicklyBelowItsStart(t *testing.T) {
	l := newLimit(4)
	at := deliveries(l, 12, time.Unix(0, 0), time.Second, true, false, 64)
	if got := l.get(64); got != 1 {
		t.Fatalf("limit = %d after failures, want 1", got)
	}
	// Back to its initial limit within a handful of successes, then on
	// towards the ceiling one per round.
	deliveries(l, 3, at, time.Millisecond, false, true, 64)
	if got := l.get(64); got != 4 {
		t.Fatalf("limit = %d after 3 successes, want its start, 4", got)
	}
}

func TestLimitShrinksOnRisingLatency(t *testing.T) {
	l := newLimit(32)
	at := deliveries(l, 50, time.Unix(0, 0), 100*time.Millisecond, false, true, 64)
	before := l.get(64)
	// The receiver slows to ten times its floor: the limit comes down.
	deliveries(l, 50, at, time.Second, false, true, 64)
	if got := l.get(64); got >= before {
		t.Fatalf("limit = %d after latency rose tenfold, want below %d", got, before)
	}
}

func TestLimitIgnoresJitterOfFastReceivers(t *testing.T) {
	l := newLimit(4)
	at := deliveries(l, 20, time.Unix(0, 0), 100*time.Microsecond, false, true, 64)
	// Latencies of a few milliseconds are noise, not a receiver in trouble.
	deliveries(l, 100, at, 5*time.Millisecond, false, true, 64)
	if got := l.get(64); got != 64 {
		t.Fatalf("limit = %d, want the ceiling: a 5 ms answer is not slow", got)
	}
}

func TestSteadySlowReceiverKeepsItsLimit(t *testing.T) {
	l := newLimit(4)
	deliveries(l, 200, time.Unix(0, 0), 10*time.Second, false, true, 16)
	if got := l.get(16); got != 16 {
		t.Fatalf("limit = %d, want 16: a receiver that is slow but steady is not failing", got)
	}
}

func TestLatencyPercentilesOfTheLastMinute(t *testing.T) {
	var r latencies
	now := time.Unix(1000, 0)
	r.add(now.Add(-2*time.Minute), time.Hour) // too old to count
	for i := 1; i <= 100; i++ {
		r.add(now.Add(-time.Second), time.Duration(i)*time.Millisecond)
	}
	p50, p99, n := r.percentiles(now)
	if n != 100 || p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Fatalf("p50, p99, n = %v, %v, %d; want 50ms, 99ms, 100", p50, p99, n)
	}
	if _, _, n := r.percentiles(now.Add(time.Hour)); n != 0 {
		t.Fatalf("an hour later %d latencies count, want none", n)
	}
}
