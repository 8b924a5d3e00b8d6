package outbox

import (
	"time"

	"github.com/outboxd/outbox/scheduler"
)

// Clock is the time source of an Outbox: the current time, for every
// timestamp it writes, and one-shot timers, for its punctuations. The default
// is the time package's clock; inside a testing/synctest bubble that clock is
// already deterministic, so a custom Clock is for simulations that move time
// by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a started timer that sends on C once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock, with the semantics of
// time.Timer (after Stop or Reset no stale value is received). A Timer that
// fires early or spuriously is tolerated: the outbox re-checks Clock.Now.
type Timer interface {
	// C returns the channel on which the timer delivers its time.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped an
	// active timer.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether the timer
	// was active.
	Reset(d time.Duration) bool
}

// realClock is the default Clock: time.Now and time.NewTimer.
type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// schedClock lets the scheduler run on an outbox Clock (a Timer has the
// scheduler's Timer methods).
type schedClock struct{ c Clock }

func (s schedClock) Now() time.Time                           { return s.c.Now() }
func (s schedClock) NewTimer(d time.Duration) scheduler.Timer { return s.c.NewTimer(d) }
