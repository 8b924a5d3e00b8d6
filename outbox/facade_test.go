package outbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// nopSink fails every delivery; the outboxes of these tests are never
// started, or their events are not due.
var nopSink = sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Err: errors.New("not delivering")}
})

// The errors of Open that a caller acts on match outbox sentinels, and
// keep the detail (the file) in their message.
func TestOpenErrorsMatchOutboxSentinels(t *testing.T) {
	_, path := open(t, testConfig(nopSink)) // holds the file's lock
	cfg := testConfig(nopSink)
	cfg.LockTimeout = 50 * time.Millisecond
	begun := time.Now()
	_, err := outbox.Open(path, cfg)
	if !errors.Is(err, outbox.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("second Open of a file in use: %v, want ErrLocked naming %s", err, path)
	}
	if waited := time.Since(begun); waited > 5*time.Second {
		t.Errorf("Open waited %s for the lock, LockTimeout is 50ms", waited)
	}

	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Open(junk, testConfig(nopSink)); !errors.Is(err, outbox.ErrNotDatabase) || !strings.Contains(err.Error(), junk) {
		t.Errorf("Open of a file of random text: %v, want ErrNotDatabase naming it", err)
	}
}

// An outbox opened read-only reads what the file holds, refuses every
// write with ErrReadOnly, and does not start.
func TestReadOnlyOpenForInspection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.db")
	ctx := context.Background()
	rw, err := outbox.Open(path, testConfig(nopSink))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Enqueue(ctx, outbox.Event{ID: "a", Destination: "d"}); err != nil {
		t.Fatal(err)
	}
	stop(t, rw)

	cfg := testConfig(nopSink)
	cfg.ReadOnly = true
	ro, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, ro)
	if ev, err := ro.Get(ctx, "a"); err != nil || ev.State != outbox.StatePending {
		t.Errorf("Get on the read-only outbox = %+v, %v; want a pending event", ev, err)
	}
	if _, err := ro.Enqueue(ctx, outbox.Event{ID: "b", Destination: "d"}); !errors.Is(err, outbox.ErrReadOnly) {
		t.Errorf("Enqueue on the read-only outbox: %v, want ErrReadOnly", err)
	}
	if err := ro.Delete(ctx, "a"); !errors.Is(err, outbox.ErrReadOnly) {
		t.Errorf("Delete on the read-only outbox: %v, want ErrReadOnly", err)
	}
	if err := ro.Start(); !errors.Is(err, outbox.ErrReadOnly) {
		t.Errorf("Start on the read-only outbox: %v, want ErrReadOnly", err)
	}
	if s := ro.Stats(); s.Pending != 1 {
		t.Errorf("Stats on the read-only outbox: %+v, want 1 pending", s)
	}

	if _, err := outbox.Open(filepath.Join(t.TempDir(), "missing.db"), cfg); err == nil {
		t.Error("read-only Open of a missing file succeeded")
	}
}

// Stats carry what callers used to read from the store: the file's counts,
// LSNs, size and key index, and the group committer's work.
func TestStatsReportTheFileAndTheCommits(t *testing.T) {
	ctx := context.Background()
	for _, noIndex := range []bool{false, true} {
		cfg := testConfig(nopSink)
		cfg.NoKeyIndex = noIndex
		o, path := open(t, cfg)
		if _, err := o.Enqueue(ctx, outbox.Event{ID: "a", Key: "k", Destination: "d"}, outbox.Event{ID: "b", Destination: "d"},
			outbox.Event{ID: "c", Destination: "d"}); err != nil {
			t.Fatal(err)
		}
		if err := o.Delete(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		s := o.Stats()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending != 2 || s.Tombstones != 1 || s.LastLSN != 4 || s.ChangelogEntries != 4 || s.ShippedLSN != 0 ||
			s.FileSize != fi.Size() || s.KeyIndex == noIndex {
			t.Errorf("NoKeyIndex %v: Stats = %+v (file %d bytes)", noIndex, s, fi.Size())
		}
		if c := s.Commits; c.Commits < 2 || c.Records < 4 || c.Calls < 2 || c.Failed != 0 || c.Busy <= 0 || c.Running != 0 {
			t.Errorf("NoKeyIndex %v: commit stats = %+v", noIndex, c)
		}
		if o.Path() != path {
			t.Errorf("Path = %q, want %q", o.Path(), path)
		}
	}
}

// The changelog view reads entries with their events, records what was
// shipped, and gives a snapshot; a fresh outbox restored from the entries
// (through their binary encoding, as a shipped topic holds them) has the
// original's events and tombstones.
func TestChangelogViewAndRestore(t *testing.T) {
	ctx := context.Background()
	o, _ := open(t, testConfig(nopSink))
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "p", Key: "k", Destination: "d", Headers: map[string]string{"X-A": "1"},
		Payload: []byte("pending")}, outbox.Event{ID: "gone", Destination: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.EnqueueDead(ctx, outbox.Event{ID: "x", Destination: "d", Payload: []byte("dead")}, "bad input"); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	cl := o.Changelog()
	entries, err := cl.Entries(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for i, e := range entries {
		ops = append(ops, e.Op.String()+" "+e.ID)
		if e.LSN != uint64(i+1) {
			t.Errorf("entry %d has LSN %d", i, e.LSN)
		}
		ev, ok := e.Event()
		if ok == e.Op.Deleting() || (ok && ev.ID != e.ID) {
			t.Errorf("entry %d (%v %s): Event() = %+v, %v", i, e.Op, e.ID, ev, ok)
		}
	}
	if want := []string{"enqueue p", "enqueue gone", "dead x", "drop gone"}; !reflect.DeepEqual(ops, want) {
		t.Fatalf("changelog ops %q, want %q", ops, want)
	}
	if ev, _ := entries[0].Event(); string(ev.Payload) != "pending" || ev.Key != "k" || ev.Headers["X-A"] != "1" || ev.State != outbox.StatePending {
		t.Errorf("enqueue entry's event = %+v", ev)
	}
	if ev, _ := entries[2].Event(); ev.State != outbox.StateDead || ev.DeadReason != "bad input" {
		t.Errorf("dead entry's event = %+v", ev)
	}
	if from3, err := cl.Entries(3, 1); err != nil || len(from3) != 1 || from3[0].LSN != 3 {
		t.Errorf("Entries(3, 1) = %+v, %v", from3, err)
	}

	if cl.LastLSN() != 4 {
		t.Errorf("LastLSN = %d, want 4", cl.LastLSN())
	}
	if err := cl.MarkShipped(ctx, 5); err == nil {
		t.Error("MarkShipped past the last LSN succeeded")
	}
	if err := cl.MarkShipped(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.ShippedLSN(); err != nil || n != 3 {
		t.Errorf("ShippedLSN = %d, %v; want 3", n, err)
	}

	snap, next, err := cl.Snapshot(outbox.StatePending, "", 10)
	if err != nil || next != "" || len(snap) != 1 || snap[0].ID != "p" || snap[0].Op != outbox.OpEnqueue {
		t.Errorf("Snapshot(pending) = %+v, %q, %v", snap, next, err)
	}
	if snap, _, err := cl.Snapshot(outbox.StateDead, "", 10); err != nil || len(snap) != 1 || snap[0].Op != outbox.OpDead {
		t.Errorf("Snapshot(dead) = %+v, %v", snap, err)
	}
	if _, _, err := cl.Snapshot(outbox.StateDelivered, "", 10); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("Snapshot(delivered): %v, want ErrInvalid", err)
	}

	// Through the wire encoding, into a fresh outbox.
	shipped := make([]outbox.ChangelogEntry, len(entries))
	for i, e := range entries {
		if e.Op.Deleting() {
			shipped[i] = outbox.ChangelogEntry{LSN: e.LSN, Op: e.Op, ID: e.ID, Version: e.Version, Time: e.Time}
			continue
		}
		b, err := e.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if shipped[i], err = outbox.DecodeChangelogEntry(b); err != nil {
			t.Fatal(err)
		}
		if a, b := mustEvent(t, e), mustEvent(t, shipped[i]); !reflect.DeepEqual(a, b) {
			t.Errorf("entry %d changed through its encoding: %+v, then %+v", i, a, b)
		}
	}
	damaged, _ := entries[0].MarshalBinary()
	damaged[len(damaged)/2] ^= 0xff
	if _, err := outbox.DecodeChangelogEntry(damaged); !errors.Is(err, outbox.ErrDamaged) {
		t.Errorf("decoding a damaged entry: %v, want ErrDamaged", err)
	}
	fresh, _ := open(t, testConfig(nopSink))
	if err := fresh.Restore(ctx, []outbox.ChangelogEntry{{LSN: 1, Op: outbox.OpEnqueue, ID: "no-event"}}); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("Restore of an enqueue without its event: %v, want ErrInvalid", err)
	}
	if err := fresh.Restore(ctx, shipped); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]outbox.State{"p": outbox.StatePending, "x": outbox.StateDead, "gone": outbox.StateDeleted} {
		got, err := fresh.Get(ctx, id)
		if err != nil || got.State != want {
			t.Errorf("restored %s: %+v, %v; want %v", id, got, err, want)
		}
	}
	if got, _ := fresh.Get(ctx, "p"); string(got.Payload) != "pending" || got.Key != "k" {
		t.Errorf("restored p = %+v", got)
	}
	if err := fresh.Start(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Restore(ctx, shipped); err == nil {
		t.Error("Restore into a started outbox succeeded")
	}
}

func mustEvent(t *testing.T, e outbox.ChangelogEntry) outbox.Event {
	t.Helper()
	ev, ok := e.Event()
	if !ok {
		t.Fatalf("%v entry %s has no event", e.Op, e.ID)
	}
	return ev
}

// Changelog op names read back.
func TestParseChangelogOp(t *testing.T) {
	for op := outbox.OpEnqueue; op <= outbox.OpSupersede; op++ {
		if got, ok := outbox.ParseChangelogOp(op.String()); !ok || got != op {
			t.Errorf("ParseChangelogOp(%q) = %v, %v", op.String(), got, ok)
		}
	}
	if _, ok := outbox.ParseChangelogOp("explode"); ok {
		t.Error("ParseChangelogOp accepted an unknown name")
	}
}
