package console

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/outbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestPrintDeliveryLines(t *testing.T) {
	var buf bytes.Buffer
	c := New(&buf)
	c.PrintDelivery(outbox.DeliveryInfo{ID: "order:o-1:created", Endpoint: "orders", Action: outbox.ActionSuccess, Status: 200, Attempt: 1})
	c.PrintDelivery(outbox.DeliveryInfo{ID: "order:o-2:created", Endpoint: "orders", Action: outbox.ActionRetry, Attempt: 2})
	c.PrintDelivery(outbox.DeliveryInfo{ID: "order:o-3:created", Endpoint: "orders", Action: outbox.ActionDead, Dead: true, Status: 422, Attempt: 1})
	want := []string{
		"→ orders   order:o-1:created  attempt 1: 200, delivered",
		"→ orders   order:o-2:created  attempt 2: no response, will retry (backoff)",
		"→ orders   order:o-3:created  attempt 1: 422, refused → dead letter (kept, replayable)",
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines printed, want %d:\n%s", len(lines), len(want), buf.String())
	}
	stamp := regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d\d\d `)
	for i, line := range lines {
		if !stamp.MatchString(line) {
			t.Errorf("line %q does not start with a 15:04:05.000 time", line)
			continue
		}
		if got := line[len("15:04:05.000 "):]; got != want[i] {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
	if got := c.attempts.Load(); got != 3 {
		t.Errorf("%d attempts counted, want 3", got)
	}
}

func TestDemoPaceKeepsTheFlagsGiven(t *testing.T) {
	interval, park, backoff := time.Minute, time.Hour, 2*time.Minute
	DemoPace(map[string]bool{"park-interval": true}, &interval, &park, &backoff)
	if interval != 100*time.Millisecond || park != time.Hour || backoff != 300*time.Millisecond {
		t.Errorf("interval %v, park %v, backoff %v; want 100ms, the 1h given, 300ms", interval, park, backoff)
	}
}
