package main

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// console prints one readable, timestamped line per thing that happens.
type console struct {
	mu sync.Mutex
	w  io.Writer
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
}
