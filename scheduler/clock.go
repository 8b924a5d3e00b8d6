package scheduler

import "time"

// Clock is the time source of a [Scheduler]: the current time and one-shot timers.
// [RealClock] is the default. Inside a testing/synctest bubble the real clock is already
// deterministic, so most tests need no other implementation; a custom Clock is for
// simulations that drive time by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a started timer that sends on C once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a [Clock], with the semantics of [time.Timer]
// (Go 1.23+: after Stop or Reset no stale value is received). The scheduler tolerates a
// Timer that fires early or spuriously: it always re-checks [Clock.Now].
type Timer interface {
	// C returns the channel on which the timer delivers its time.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped an active timer.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer was active.
	Reset(d time.Duration) bool
}

// RealClock returns the [Clock] backed by the time package (time.Now and time.NewTimer).
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
