package testkit

import (
	"sync"
	"time"
)

// Clock is a fake clock whose time moves only when the test moves it, for
// simulations that drive time by hand (inside a testing/synctest bubble the
// real clock is usually enough). It is safe for concurrent use.
//
// Its NewTimer returns a *Timer, which has the methods of outbox.Timer and
// scheduler.Timer; this package imports neither (the store's own tests use
// it), so a test hands the Clock to an outbox or a scheduler through a
// two-line adapter whose NewTimer returns the package's Timer type.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*Timer
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires the timers that became
// due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked(false)
}

// Set moves the clock to t and fires the timers that are due then: a timer
// due long before t fires late, once, as after a paused process.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	c.fireLocked(false)
}

// Fire makes every active timer fire now, due or not, as a timer that
// fires early or spuriously does.
func (c *Clock) Fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fireLocked(true)
}

// NewTimer returns a started timer that fires once the clock has moved d
// past now (at once if d <= 0).
func (c *Clock) NewTimer(d time.Duration) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{c: c, ch: make(chan time.Time, 1), at: c.now.Add(d), active: true}
	c.timers = append(c.timers, t)
	c.fireLocked(false)
	return t
}

// fireLocked sends the time on the channel of each active timer that is due
// (or of every active timer, with all).
func (c *Clock) fireLocked(all bool) {
	for _, t := range c.timers {
		if t.active && (all || !t.at.After(c.now)) {
			t.active = false
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
}

// Timer is a one-shot timer of a [Clock], with the semantics of
// [time.Timer]: after Stop or Reset no stale time is received.
type Timer struct {
	c      *Clock
	ch     chan time.Time
	at     time.Time
	active bool
}

// C returns the channel on which the timer delivers the clock's time.
func (t *Timer) C() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing; it reports whether it stopped an
// active timer.
func (t *Timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	t.drainLocked()
	return was
}

// Reset changes the timer to fire once the clock has moved d past now; it
// reports whether the timer was active.
func (t *Timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.drainLocked()
	t.at = t.c.now.Add(d)
	t.active = true
	t.c.fireLocked(false)
	return was
}

func (t *Timer) drainLocked() {
	select {
	case <-t.ch:
	default:
	}
}
