package ratelimit

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSpanSaturatesInsteadOfOverflowing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		perSecond float64
		want      time.Duration
	}{
		{"the floor: one a day", 1, MinPerSecond, 24 * time.Hour},
		{"the ceiling", 1, MaxPerSecond, time.Microsecond},
		{"a backlog at the ceiling", 3_000_000, MaxPerSecond, 3 * time.Second},
		{"one a second", 5, 1, 5 * time.Second},
		{"below the floor", 1, 1e-300, MaxSpan},
		{"just below where float64(time.Second)/rate overflowed", 1, 1.1e-10, MaxSpan},
		{"a long backlog at the floor", math.MaxInt, MinPerSecond, MaxSpan},
		{"zero rate", 1, 0, MaxSpan},
		{"negative rate", 1, -1, MaxSpan},
		{"NaN", 1, math.NaN(), MaxSpan},
		{"+Inf", 7, math.Inf(1), 0},
		{"-Inf", 1, math.Inf(-1), MaxSpan},
		{"no event", 0, 1e-300, 0},
		{"negative count", -3, 1, 0},
		{"the largest float", 1, math.MaxFloat64, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Span(tc.n, tc.perSecond)
			if got != tc.want {
				t.Fatalf("Span(%d, %g) = %v, want %v", tc.n, tc.perSecond, got, tc.want)
			}
			if got < 0 || got > MaxSpan {
				t.Fatalf("Span(%d, %g) = %v, outside [0, MaxSpan]", tc.n, tc.perSecond, got)
			}
			if at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).Add(got); at.Year() < 2026 {
				t.Fatalf("a span of %v schedules in %d", got, at.Year())
			}
		})
	}
}

func TestCheckRateNamesTheBounds(t *testing.T) {
	for _, ok := range []float64{MinPerSecond, 1, 100, MaxPerSecond} {
		if reason := CheckRate(ok); reason != "" {
			t.Errorf("CheckRate(%g) = %q, want it accepted", ok, reason)
		}
	}
	for _, bad := range []float64{1e-300, MinPerSecond / 2, 0, -1, MaxPerSecond * 1.000001, math.NaN(), math.Inf(1), math.Inf(-1)} {
		reason := CheckRate(bad)
		if !strings.Contains(reason, "out of range: from 1/86400 (one per day) to 1000000 per second") {
			t.Errorf("CheckRate(%g) = %q, want the bounds named", bad, reason)
		}
	}
}

func TestNewRefusesLimitsOutOfBounds(t *testing.T) {
	for _, perSecond := range []float64{1e-300, MaxPerSecond * 2} {
		_, err := New(map[string]Limit{"a": {PerSecond: perSecond, Burst: 1}})
		if err == nil || !strings.Contains(err.Error(), `RateLimits["a"].PerSecond: `) || !strings.Contains(err.Error(), "one per day") {
			t.Fatalf("New(%g/s) = %v, want the bounds named", perSecond, err)
		}
	}
	if _, err := New(map[string]Limit{"a": {PerSecond: MinPerSecond, Burst: 1}, "b": {PerSecond: MaxPerSecond, Burst: 1}}); err != nil {
		t.Fatalf("New at the bounds = %v", err)
	}
}
