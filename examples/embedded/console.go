package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// console prints one readable, timestamped line per thing that happens.
type console struct {
	mu       sync.Mutex
	w        io.Writer
	attempts atomic.Uint64 // delivery attempts printed
}

func (c *console) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, "%s %s\n", time.Now().Format("15:04:05.000"), line)
}

// printDelivery prints the committed outcome of one delivery attempt:
// delivered, retried, parked, throttled, disabled or dead-lettered.
func (c *console) printDelivery(d outbox.DeliveryInfo) {
	what := map[outbox.Action]string{
		outbox.ActionSuccess:  "delivered",
		outbox.ActionRetry:    "will retry (backoff)",
		outbox.ActionPark:     "parked: not there yet, will ask again",
		outbox.ActionThrottle: "throttled: the whole target waits",
		outbox.ActionDisable:  "target disabled (410): its events wait for an operator",
		outbox.ActionDead:     "refused",
	}[d.Action]
	if d.Dead {
		what += " → dead letter (kept, replayable)"
	}
	status := "no response"
	if d.Status != 0 {
		status = strconv.Itoa(d.Status)
	}
	c.printf("→ %-8s %s  attempt %d: %s, %s", d.Endpoint, d.ID, d.Attempt, status, what)
	c.attempts.Add(1)
}

// waitIdle waits until box has nothing pending or in flight, every attempt
// it counted was printed, and done (if not nil) holds, twice in a row 50ms
// apart, so that what is printed next comes after every delivery line.
func (c *console) waitIdle(ctx context.Context, box *outbox.Outbox, limit time.Duration, done func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(limit)
	for streak := 0; streak < 2; {
		st := box.Stats()
		if st.Pending == 0 && st.InFlight == 0 && c.attempts.Load() == st.DeliveredTotal+st.FailedTotal && (done == nil || done()) {
			streak++
		} else {
			streak = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after %v: %d pending, %d in flight", limit, st.Pending, st.InFlight)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// demoPace sets the delivery timings of a demo, seconds rather than the
// production defaults' minutes, except those given on the command line.
func demoPace(set map[string]bool, interval, park, backoff *time.Duration) {
	for _, f := range []struct {
		flag string
		d    *time.Duration
		v    time.Duration
	}{{"interval", interval, 100 * time.Millisecond}, {"park-interval", park, 500 * time.Millisecond}, {"backoff", backoff, 300 * time.Millisecond}} {
		if !set[f.flag] {
			*f.d = f.v
		}
	}
}
