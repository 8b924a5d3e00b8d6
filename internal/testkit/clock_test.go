package testkit

import (
	"testing"
	"time"
)

func fired(tm *Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

// Timers fire when the clock reaches them, late when it jumps past them,
// early when told to, and never after Stop; Reset re-arms without a stale
// time.
func TestClockTimers(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	tm := c.NewTimer(time.Second)
	c.Advance(999 * time.Millisecond)
	if _, ok := fired(tm); ok {
		t.Fatal("fired before it was due")
	}
	c.Advance(time.Millisecond)
	if at, ok := fired(tm); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("due: fired %v at %v, want at %v", ok, at, t0.Add(time.Second))
	}
	if tm.Reset(time.Minute) {
		t.Error("Reset of a fired timer reports it active")
	}
	c.Set(t0.Add(time.Hour))
	if at, ok := fired(tm); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("late: fired %v at %v, want once at the new time", ok, at)
	}
	tm.Reset(time.Minute)
	c.Fire()
	if at, ok := fired(tm); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Fire: fired %v at %v, want at once", ok, at)
	}
	tm.Reset(time.Minute)
	c.Advance(time.Minute) // fires, then Reset drops the stale time
	tm.Reset(time.Minute)
	if _, ok := fired(tm); ok {
		t.Fatal("a stale time was received after Reset")
	}
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop must report an active timer once")
	}
	c.Advance(time.Hour)
	if _, ok := fired(tm); ok {
		t.Fatal("a stopped timer fired")
	}
	if now := c.Now(); !now.Equal(t0.Add(2*time.Hour + time.Minute)) {
		t.Fatalf("Now = %v", now)
	}
}
