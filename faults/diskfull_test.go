//go:build fault

package faults

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// mountSmallFS mounts a tmpfs of the given size on a new directory and
// unmounts it at the end of the test. It skips the test, saying why, where
// mounting is not permitted (not root, no CAP_SYS_ADMIN, a container that
// forbids it).
func mountSmallFS(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("SKIP disk full: cannot mount a %s tmpfs here (%v: %s); this scenario needs root with CAP_SYS_ADMIN (e.g. a VM or a privileged container)",
			size, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFull: the database lives on a 32 MiB tmpfs that also holds a
// 12 MiB ballast file. Events are posted until the filesystem is full.
// Enqueue must then fail with an error answer while the process stays up
// and serves; everything acknowledged must still be there; once the
// ballast is deleted enqueue must succeed again, and a healed receiver must
// get every acknowledged event.
func TestDiskFull(t *testing.T) {
	dir := mountSmallFS(t, "32m")
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "outboxd.db")
	addr := testkit.FreeAddr(t)
	rcv := newReceiver(t)
	// Hold every event: the receiver is unavailable, so that the file only
	// grows while the disk fills (the retries' own writes fail too once it
	// is full, which is part of the scenario).
	rcv.set(func(string) answer { return answerUnavailable })
	s := start(t, db, addr, "--endpoint", "recv="+rcv.url(0), "--allow-private-networks",
		"--interval", "100ms", "--backoff-initial", "2s", "--backoff-max", "2s", "--max-attempts", "100000")

	// Fill: batches of 20 events of ~8 KiB until the API refuses 10 in a
	// row (or two minutes pass).
	ld := newLoader(addr, "full", 1000, 20, 8<<10)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	refusedInARow := 0
	var lastRefusal string
	for refusedInARow < 10 && ctx.Err() == nil {
		before := ld.refusedTotal()
		ld.send(ctx, client)
		if ld.refusedTotal() > before {
			refusedInARow++
			lastRefusal = ld.lastRefusal()
		} else {
			refusedInARow = 0
		}
		if s.Exited() {
			t.Fatalf("VIOLATION: outboxd exited while the disk filled: %v\noutput:\n%s", s.Err(), s.logs)
		}
	}
	if refusedInARow < 10 {
		t.Fatalf("the disk never filled up: %s", ld.summary())
	}
	acked, _ := ld.ledger()
	fi, _ := os.Stat(db)
	t.Logf("disk full after %d acknowledged events; file %d bytes; last refusal: %s", len(acked), fi.Size(), lastRefusal)

	// Still up and serving, and every acknowledged event still there.
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("VIOLATION: /healthz with a full disk: %v %v\noutput:\n%s", err, resp, s.logs)
	} else {
		resp.Body.Close()
	}
	missing := 0
	for id := range acked {
		resp, err := client.Get("http://" + addr + "/v1/events/" + id)
		if err != nil {
			t.Fatalf("GET /v1/events/%s: %v", id, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("VIOLATION: %d of %d acknowledged events are not found with a full disk", missing, len(acked))
	}

	// Free space: enqueue works again.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	var recovered time.Duration
	freed := time.Now()
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if err := testkit.Poll(rctx, 100*time.Millisecond, func() (bool, error) {
		before := ld.ackedTotal()
		ld.send(rctx, client)
		return ld.ackedTotal() > before, nil
	}); err != nil {
		t.Fatalf("VIOLATION: enqueue still fails a minute after space was freed: %v; last refusal: %s\noutput:\n%s", err, ld.lastRefusal(), s.logs)
	}
	recovered = time.Since(freed)

	// Heal the receiver: the same process, without a restart, delivers
	// everything acknowledged (including what it acknowledged after space
	// was freed), then stops cleanly on a sound file.
	rcv.set(func(string) answer { return answerOK })
	acked, _ = ld.ledger()
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer dcancel()
	if err := testkit.Poll(dctx, 100*time.Millisecond, func() (bool, error) { return rcv.hasAll(acked) == 0, nil }); err != nil {
		t.Errorf("VIOLATION: %d of %d acknowledged events not delivered after the disk was freed: %v\noutput:\n%s", rcv.hasAll(acked), len(acked), err, s.logs)
	}
	s.stop()
	for _, p := range checkDB(db) {
		t.Errorf("VIOLATION: bbolt check at the end: %s", p)
	}
	report(t, "**Disk full** (32 MiB tmpfs with a 12 MiB ballast): %s. Once full the process stayed up and every acknowledged event stayed readable; enqueue succeeded again %.1fs after the ballast was deleted, and once the receiver healed the same process delivered all %d acknowledged events and stopped cleanly on a file that passes bbolt's check.",
		ld.summary(), recovered.Seconds(), len(acked))
}

// fillDisk writes a file in dir until the filesystem refuses more bytes,
// and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			chunk = chunk[:len(chunk)/2]
		}
	}
	return path
}

// TestDiskFullDuringDelivery: events are pending when the disk fills up and
// the receiver answers 200. The outcomes of those deliveries cannot be
// committed. The promise "a crash repeats at most Concurrency +
// MaxUncommitted deliveries" must hold for a failing disk too: no event may
// be delivered again while the disk is full, delivered_total counts each
// event once, /readyz says why it is not ready, the condition is logged
// once rather than at every punctuation, and once space is freed every
// event has been delivered exactly once.
func TestDiskFullDuringDelivery(t *testing.T) {
	const events = 1000
	dir := mountSmallFS(t, "32m")
	db := filepath.Join(dir, "outboxd.db")
	addr := testkit.FreeAddr(t)
	rcv := newReceiver(t)
	rcv.set(func(string) answer { return answerUnavailable })
	s := start(t, db, addr, "--endpoint", "recv="+rcv.url(0), "--allow-private-networks",
		"--interval", "50ms", "--backoff-initial", "500ms", "--backoff-max", "500ms", "--max-attempts", "100000")
	ld := newLoader(addr, "dfd", 1000, 100, 64)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	for range events / 100 {
		ld.send(context.Background(), client)
	}
	acked, _ := ld.ledger()
	if len(acked) != events {
		t.Fatalf("%d of %d events acknowledged before the disk filled: %s", len(acked), events, ld.summary())
	}

	filler := fillDisk(t, dir)
	errorsBefore := s.logs.errorLines()
	rcv.set(func(string) answer { return answerOK })

	// Watch for three seconds: the events come due within the backoff and
	// are delivered once; their outcomes cannot be committed.
	readyReason := ""
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = testkit.Poll(ctx, 100*time.Millisecond, func() (bool, error) {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			readyReason = string(body)
		}
		return false, nil // watch the whole window
	})
	got := rcv.delivered()
	total, repeated, most := 0, 0, 0
	for _, ds := range got {
		total += len(ds)
		if len(ds) > 1 {
			repeated++
		}
		most = max(most, len(ds))
	}
	st, _ := s.stats()
	errLines := s.logs.errorLines() - errorsBefore
	t.Logf("disk full for 3s: %d successful deliveries of %d distinct events (%d delivered more than once, one %d times); delivered_total %v; %d error lines; /readyz: %q",
		total, len(got), repeated, most, st.DeliveredTotal, errLines, readyReason)
	if repeated > 0 {
		t.Errorf("VIOLATION: %d events delivered more than once while the disk was full (one %d times)", repeated, most)
	}
	// A commit that only rewrites pages the file already has can still
	// succeed on a full tmpfs, so a few outcomes may be committed; what
	// must not happen is an event counted twice.
	if v := st.DeliveredTotal; v > uint64(len(got)) {
		t.Errorf("VIOLATION: delivered_total %v on the full disk, more than the %d distinct events delivered", v, len(got))
	}
	if !strings.Contains(readyReason, "committing delivery outcomes") {
		t.Errorf("VIOLATION: /readyz did not report the failing commits while the disk was full (last not-ready answer %q)", readyReason)
	}
	if errLines > 5 {
		t.Errorf("VIOLATION: %d error lines in 3s on a full disk; the condition should be logged once\noutput:\n%s", errLines, s.logs)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer dcancel()
	if err := testkit.Poll(dctx, 100*time.Millisecond, func() (bool, error) {
		st, err := s.stats()
		return err == nil && st.Pending == 0 && rcv.hasAll(acked) == 0, nil
	}); err != nil {
		t.Fatalf("VIOLATION: %d of %d events not delivered after space was freed: %v\noutput:\n%s", rcv.hasAll(acked), len(acked), err, s.logs)
	}
	for id, ds := range rcv.delivered() {
		if len(ds) != 1 {
			t.Errorf("VIOLATION: %s delivered %d times in all, want once", id, len(ds))
		}
	}
	if st, _ := s.stats(); st.DeliveredTotal != events {
		t.Errorf("VIOLATION: delivered_total %v after recovery, want %d", st.DeliveredTotal, events)
	}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("VIOLATION: /readyz after recovery: %v %v", err, resp)
	}
	if resp != nil {
		resp.Body.Close()
	}
	s.stop()
	report(t, "**Disk full during delivery** (32 MiB tmpfs filled up while 1,000 events were due to a healthy receiver): in 3 s on the full disk %d successful deliveries of %d distinct events, %d error lines, /readyz not ready (%s); after space was freed every event was delivered exactly once.",
		total, len(got), errLines, strings.TrimSpace(readyReason))
}
