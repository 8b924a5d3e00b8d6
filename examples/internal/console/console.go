package console

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

// Console prints one readable, timestamped line per thing that happens. It
// is safe for concurrent use.
type Console struct {
	mu       sync.Mutex
	w        io.Writer
	attempts atomic.Uint64 // delivery attempts printed
}

// New returns a Console writing to w.
func New(w io.Writer) *Console {
	return &Console{w: w}
}

// Printf prints one line, formatted as fmt.Sprintf does and prefixed with
// the wall-clock time.
func (c *Console) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.w, "%s %s\n", time.Now().Format("15:04:05.000"), line)
}

// PrintDelivery prints the committed outcome of one delivery attempt:
// delivered, retried, parked, throttled, disabled or dead-lettered. It fits
// outbox.Hooks.OnDelivery.
func (c *Console) PrintDelivery(d outbox.DeliveryInfo) { c.PrintDeliveryBy("", d) }

// PrintDeliveryBy is PrintDelivery for a program that runs several
// deliverers (the Kafka relay's demo runs two relays): who, when not empty,
// is printed before the line.
func (c *Console) PrintDeliveryBy(who string, d outbox.DeliveryInfo) {
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
	if who != "" {
		who += " "
	}
	c.Printf("%s→ %-8s %s  attempt %d: %s, %s", who, d.Endpoint, d.ID, d.Attempt, status, what)
	c.attempts.Add(1)
}

// WaitIdle waits until box has nothing pending or in flight, every attempt
// it counted was printed, and done (if not nil) holds, twice in a row 50ms
// apart, so that what is printed next comes after every delivery line. It
// gives up with an error after limit, or when ctx is done.
func (c *Console) WaitIdle(ctx context.Context, box *outbox.Outbox, limit time.Duration, done func() bool) error {
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

// DemoPace sets the delivery timings of a demo, seconds rather than the
// production defaults' minutes, except those given on the command line:
// set holds the names of the flags given ("interval", "park-interval",
// "backoff").
func DemoPace(set map[string]bool, interval, park, backoff *time.Duration) {
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
