package console

import (
	"bytes"
	"context"
	"errors"
	"io"
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
	c.PrintDeliveryBy("relay-b", outbox.DeliveryInfo{ID: "order:o-4:created", Endpoint: "orders", Action: outbox.ActionPark, Status: 404, Attempt: 3})
	want := []string{
		"→ orders   order:o-1:created  attempt 1: 200, delivered",
		"→ orders   order:o-2:created  attempt 2: no response, will retry (backoff)",
		"→ orders   order:o-3:created  attempt 1: 422, refused → dead letter (kept, replayable)",
		"relay-b → orders   order:o-4:created  attempt 3: 404, parked: not there yet, will ask again",
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
	if got := c.attempts.Load(); got != 4 {
		t.Errorf("%d attempts counted, want 4", got)
	}
}

func TestDemoPaceKeepsTheFlagsGiven(t *testing.T) {
	interval, park, backoff := time.Minute, time.Hour, 2*time.Minute
	DemoPace(map[string]bool{"park-interval": true}, &interval, &park, &backoff)
	if interval != 100*time.Millisecond || park != time.Hour || backoff != 300*time.Millisecond {
		t.Errorf("interval %v, park %v, backoff %v; want 100ms, the 1h given, 300ms", interval, park, backoff)
	}
}

func TestRunDemoEndsAsTheProgramShould(t *testing.T) {
	boom := errors.New("boom")
	t.Run("demo failure is wrapped", func(t *testing.T) {
		err := New(io.Discard).RunDemo(context.Background(), nil,
			func(context.Context) error { return boom }, false, "")
		if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "demo: ") {
			t.Fatalf("RunDemo = %v, want demo: boom", err)
		}
	})
	t.Run("demo-exit stops after a clean demo", func(t *testing.T) {
		var buf bytes.Buffer
		err := New(&buf).RunDemo(context.Background(), nil,
			func(context.Context) error { return nil }, true, "keeps running")
		if err != nil || !strings.Contains(buf.String(), "demo complete") || strings.Contains(buf.String(), "keeps running") {
			t.Fatalf("RunDemo = %v, printed %q", err, buf.String())
		}
	})
	t.Run("a failed server ends the program after the demo", func(t *testing.T) {
		var buf bytes.Buffer
		failed := make(chan error, 1)
		failed <- boom
		err := New(&buf).RunDemo(context.Background(), failed,
			func(context.Context) error { return nil }, false, "keeps running")
		// Either the demo's end (then the failure) or the failure comes first.
		if !errors.Is(err, boom) {
			t.Fatalf("RunDemo = %v, want boom", err)
		}
	})
	t.Run("interrupt cancels the demo and joins it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var joined bool
		go func() { <-started; cancel() }()
		err := New(io.Discard).RunDemo(ctx, nil, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			joined = true
			return ctx.Err()
		}, false, "")
		if err != nil || !joined {
			t.Fatalf("RunDemo = %v, demo joined %v", err, joined)
		}
	})
}
