package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// A record found damaged at run time (its bytes no longer match their
// checksum) makes the outbox unavailable: Health says the file is damaged,
// no delivery is attempted, Enqueue refuses new events instead of
// accepting what it could not deliver, and the condition is logged once,
// not at every punctuation.
func TestDamagedRecordMakesOutboxUnavailable(t *testing.T) {
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	cfg := testConfig(sink)
	cfg.Concurrency = 1
	o, path := open(t, cfg)
	ctx := context.Background()
	var evs []outbox.Event
	for i := range 20 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("e%02d", i), Destination: "receiver",
			Payload: []byte(fmt.Sprintf(`{"marker":"DAMAGE-ME-%02d"}`, i))})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	stop(t, o)

	// Flip a byte inside every copy of one record's payload: the event's
	// record and its changelog entry no longer match their checksums.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marker := []byte("DAMAGE-ME-00")
	n := 0
	for i := bytes.Index(b, marker); i >= 0; i = bytes.Index(b, marker) {
		b[i] = 'X'
		n++
	}
	if n == 0 {
		t.Fatal("the payload is not in the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	logs := &testkit.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	done := make(chan struct{}, 1)
	cfg.Hooks.OnPunctuation = func(time.Duration, int) {
		select {
		case done <- struct{}{}:
		default:
		}
	}
	o, err = outbox.Open(path, cfg)
	if err != nil {
		t.Skipf("Open refuses the damaged file already (%v); nothing to find at run time", err)
	}
	t.Cleanup(func() { stop(t, o) })
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "Health to report the damage", func() bool { return o.Health() != nil })
	if err := o.Health(); !errors.Is(err, outbox.ErrUnavailable) || !errors.Is(err, outbox.ErrDamaged) {
		t.Fatalf("Health() = %v, want ErrUnavailable and ErrDamaged", err)
	}
	_, err = o.Enqueue(ctx, outbox.Event{ID: "new", Destination: "receiver"})
	if !errors.Is(err, outbox.ErrUnavailable) {
		t.Fatalf("Enqueue on a damaged file: %v, want ErrUnavailable", err)
	}
	if _, err := o.Get(ctx, "new"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("the refused event: %v, want not found", err)
	}
	// Many punctuations later the damage is still logged once.
	for range 20 {
		<-done
	}
	if c := strings.Count(logs.String(), "damaged"); c != 1 {
		t.Errorf("the damage was logged %d times, want once:\n%s", c, logs.String())
	}
}
