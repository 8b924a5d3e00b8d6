package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// fileWith returns the path of a stopped outbox's file holding n pending
// events of 300-byte payloads, and the IDs of as many again that were
// deleted (their space is what Compact gives back).
func fileWith(t *testing.T, n int) string {
	t.Helper()
	o, path := open(t, testConfig(nopSink))
	ctx := context.Background()
	for _, prefix := range []string{"evt", "gone"} {
		evs := make([]outbox.Event, n)
		for i := range evs {
			evs[i] = outbox.Event{ID: fmt.Sprintf("%s-%05d", prefix, i), Destination: "orders", Payload: []byte(strings.Repeat("p", 300))}
		}
		if _, err := o.Enqueue(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := o.Delete(ctx, fmt.Sprintf("gone-%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stop(t, o)
	return path
}

// Check reports a healthy file as healthy, and a damaged one with the
// problem (bucket, page, key) and an error matching ErrDamaged; Compact
// gives back the space of deleted events of a healthy file and refuses a
// damaged one, leaving it as it was.
func TestCheckAndCompactOffline(t *testing.T) {
	path := fileWith(t, 1500)
	rep, err := outbox.Check(path, outbox.CheckOptions{})
	if err != nil || rep == nil || rep.Damaged() || rep.Path != path || rep.FileSize == 0 || rep.PageSize == 0 || len(rep.Buckets) == 0 {
		t.Fatalf("Check of a healthy file = %+v, %v", rep, err)
	}
	events := false
	for _, b := range rep.Buckets {
		if b.Name == "events" {
			events = b.Keys == 1500 && b.Checked && !b.Damaged
		}
	}
	if !events {
		t.Errorf("Check's buckets %+v, want events with 1500 keys, checked", rep.Buckets)
	}

	before := fileSize(t, path)
	if err := outbox.Compact(path); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if after := fileSize(t, path); after >= before {
		t.Errorf("Compact: %d -> %d bytes, want smaller", before, after)
	}
	if rep, err := outbox.Check(path, outbox.CheckOptions{}); err != nil || rep.Damaged() {
		t.Fatalf("Check after Compact = %+v, %v", rep, err)
	}

	ps, leaves := testkit.LeafPages(t, path, "events")
	leaf := leaves[len(leaves)/2]
	testkit.Overwrite(t, path, ps, leaf, testkit.MiddleValueOffset(t, path, ps, leaf), testkit.Junk(32))
	rep, err = outbox.Check(path, outbox.CheckOptions{MaxProblems: 1})
	if !errors.Is(err, outbox.ErrDamaged) || !strings.Contains(err.Error(), path) || rep == nil || !rep.Damaged() {
		t.Fatalf("Check of a damaged file = %+v, %v; want a report and ErrDamaged naming the file", rep, err)
	}
	if p := rep.Problems[0]; p.Bucket != "events" || p.Page != leaf || !strings.HasPrefix(p.Key, `ID "evt-`) ||
		!strings.HasPrefix(p.String(), fmt.Sprintf("events, page %d, ID \"evt-", leaf)) {
		t.Errorf("first problem %+v (%s), want one in events on page %d naming the ID", p, p, leaf)
	}
	if len(rep.Problems) != 1 {
		t.Errorf("MaxProblems 1: %d problems listed", len(rep.Problems))
	}
	damaged, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Compact(path); !errors.Is(err, outbox.ErrDamaged) {
		t.Errorf("Compact of a damaged file: %v, want ErrDamaged", err)
	}
	if now, err := os.ReadFile(path); err != nil || string(now) != string(damaged) {
		t.Errorf("Compact changed the damaged file it refused (%v)", err)
	}
}

// Neither Check nor Compact works on a file an outbox has open for
// writing: both fail with ErrLocked, as Open does.
func TestCheckAndCompactRefuseAFileInUse(t *testing.T) {
	_, path := open(t, testConfig(nopSink))
	if rep, err := outbox.Check(path, outbox.CheckOptions{LockTimeout: 50 * time.Millisecond}); rep != nil || !errors.Is(err, outbox.ErrLocked) {
		t.Errorf("Check of a file in use = %+v, %v; want no report and ErrLocked", rep, err)
	}
	if err := outbox.Compact(path); !errors.Is(err, outbox.ErrLocked) {
		t.Errorf("Compact of a file in use: %v, want ErrLocked", err)
	}
	if _, err := outbox.Check(path+".missing", outbox.CheckOptions{}); err == nil {
		t.Error("Check of a missing file succeeded")
	}
}

// An outbox opened read-only, for inspection, needs no Sink; one that
// delivers does.
func TestReadOnlyOpenNeedsNoSink(t *testing.T) {
	path := fileWith(t, 1)
	ro, err := outbox.Open(path, outbox.Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open without a Sink: %v", err)
	}
	defer stop(t, ro)
	ctx := context.Background()
	if evs, _, err := ro.List(ctx, outbox.ListOptions{}); err != nil || len(evs) != 1 {
		t.Errorf("List = %d events, %v; want 1", len(evs), err)
	}
	if eps, err := ro.Endpoints(ctx); err != nil || len(eps) != 0 {
		t.Errorf("Endpoints = %+v, %v; want none", eps, err)
	}
	var ce *outbox.ConfigError
	if _, err := outbox.Open(path+".other", outbox.Config{}); !errors.As(err, &ce) || ce.Field != "Sink" {
		t.Errorf("Open without a Sink: %v, want a ConfigError naming Sink", err)
	}
}

// An event's history is its changelog entries, oldest first, and nothing of
// other events; Deliveries counts parks beside the attempts they do not
// spend, and survives Replay, which resets Attempts.
func TestHistoryAndDeliveries(t *testing.T) {
	sink := sinkFunc(func(_ context.Context, d *outbox.Delivery) outbox.Result {
		if d.Attempt == 1 {
			return outbox.Result{Action: outbox.ActionPark, Status: 404}
		}
		return outbox.Result{Action: outbox.ActionRetry, Status: 500, Err: errors.New("status 500")}
	})
	cfg := testConfig(sink)
	cfg.MaxAttempts = 1
	o, path := open(t, cfg)
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "h", Destination: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.EnqueueDead(ctx, outbox.Event{ID: "other", Destination: "d"}, "bad input"); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "h to be dead", func() bool {
		ev, err := o.Get(ctx, "h")
		return err == nil && ev.State == outbox.StateDead
	})
	ev, err := o.Get(ctx, "h")
	if err != nil || ev.Attempts != 1 || ev.Deliveries != 2 {
		t.Errorf("Get(h) = %+v, %v; want 1 attempt spent in 2 deliveries", ev, err)
	}
	hist, err := o.Changelog().History("h")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, en := range hist {
		if en.ID != "h" {
			t.Errorf("History(h) holds an entry of %q", en.ID)
		}
		ops = append(ops, en.Op.String())
	}
	if got := strings.Join(ops, " "); got != "enqueue reschedule dead" {
		t.Errorf("History(h) ops %q, want enqueue reschedule dead", got)
	}
	if len(hist) == 3 {
		if e, ok := hist[1].Event(); !ok || e.Deliveries != 1 || e.Attempts != 0 || e.LastStatus != 404 {
			t.Errorf("the park's entry carries %+v, want 1 delivery, no attempt, status 404", e)
		}
	}
	if none, err := o.Changelog().History("never"); err != nil || len(none) != 0 {
		t.Errorf("History(never) = %v, %v; want none", none, err)
	}
	stop(t, o)

	o, err = outbox.Open(path, testConfig(nopSink))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, o)
	if err := o.Replay(ctx, "h"); err != nil {
		t.Fatal(err)
	}
	if ev, err := o.Get(ctx, "h"); err != nil || ev.Attempts != 0 || ev.Deliveries != 2 {
		t.Errorf("after Replay: Get(h) = %+v, %v; want attempts reset, 2 deliveries kept", ev, err)
	}
	stop(t, o)
	if _, err := o.Changelog().History("h"); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("History after Stop: %v, want ErrClosed", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
