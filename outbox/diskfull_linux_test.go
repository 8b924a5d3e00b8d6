//go:build linux

package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// While the outcomes of deliveries cannot be committed (every write fails
// with ENOSPC), no delivery is repeated and none starts: the delivered
// events' outcomes wait in memory, Health says why, the failure is logged
// once, and nothing is counted delivered. Once the disk takes writes again,
// the outcomes are committed, deliveries resume, and every event has been
// delivered exactly once.
func TestFullDiskDoesNotRepeatDeliveries(t *testing.T) {
	const events, concurrency = 40, 4
	gate := make(chan struct{})
	var mu sync.Mutex
	got := map[string]int{}
	var total atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		total.Add(1)
	}))
	t.Cleanup(rcv.Close)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})

	var fdMu sync.Mutex
	var dbFile *os.File
	sink := newWebSink()
	t.Cleanup(sink.close)
	logs := &testkit.Buffer{}
	var punctuations atomic.Int64
	cfg := testConfig(sink)
	cfg.Concurrency = concurrency
	cfg.Interval = 5 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Hooks.OnPunctuation = func(time.Duration, int) { punctuations.Add(1) }
	cfg.NoSync = true
	cfg.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		fdMu.Lock()
		dbFile = f
		fdMu.Unlock()
		return f, err
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o) })
	fdMu.Lock()
	fd := int(dbFile.Fd())
	fdMu.Unlock()

	var evs []outbox.Event
	for i := range events {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("ev-%02d", i), Destination: rcv.URL + "/hook"})
	}
	if _, err := o.Enqueue(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the first deliveries to reach the receiver", func() bool { return o.Stats().InFlight == concurrency })

	// The disk fills while those deliveries are under way; they succeed.
	restore := testkit.RedirectFD(t, fd, "/dev/full", os.O_WRONLY)
	close(gate)
	testkit.WaitFor(t, settle, "Health to report the failing commits", func() bool { return o.Health() != nil })
	err = o.Health()
	if !errors.Is(err, outbox.ErrUnavailable) || errors.Is(err, outbox.ErrDamaged) || !strings.Contains(err.Error(), "deliveries paused") {
		t.Errorf("Health() = %v, want ErrUnavailable saying deliveries are paused", err)
	}
	// The deliveries that started before the first commit failed finish;
	// then many punctuations run while the disk is full, and none may
	// deliver again.
	testkit.WaitFor(t, settle, "the deliveries under way to finish", func() bool { return o.Stats().InFlight == 0 })
	before := total.Load()
	seen := punctuations.Load()
	testkit.WaitFor(t, settle, "50 punctuations on the full disk", func() bool { return punctuations.Load() >= seen+50 })
	if n := total.Load(); n != before {
		t.Errorf("%d deliveries while outcomes could not be committed, want none after the %d under way", n-before, before)
	}
	if max := int64(concurrency + o.Config().MaxUncommitted); before > max {
		t.Errorf("%d deliveries before the failure stopped them, want at most Concurrency + MaxUncommitted = %d", before, max)
	}
	if s := o.Stats(); s.DeliveredTotal != 0 {
		t.Errorf("DeliveredTotal = %d before any outcome was committed, want 0", s.DeliveredTotal)
	}
	if n := strings.Count(logs.String(), "committing delivery outcomes failed"); n != 1 {
		t.Errorf("the failing commits were logged %d times, want once:\n%s", n, logs.String())
	}

	mu.Lock()
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times while the disk was full, want once", id, n)
		}
	}
	mu.Unlock()

	restore()
	testkit.WaitFor(t, settle, "every event delivered once the disk takes writes", func() bool {
		s := o.Stats()
		return s.Pending == 0 && s.InFlight == 0 && s.DeliveredTotal == events
	})

	if err := o.Health(); err != nil {
		t.Errorf("Health() after recovery = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times, want once", id, n)
		}
	}
	if len(got) != events {
		t.Errorf("%d distinct events delivered, want %d", len(got), events)
	}
	if !strings.Contains(logs.String(), "deliveries resumed") {
		t.Errorf("the recovery was not logged:\n%s", logs.String())
	}
}
