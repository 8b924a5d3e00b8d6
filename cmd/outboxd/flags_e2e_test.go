package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// The flags scripts and operators rely on do what they say: --db,
// --allow-raw-urls, --allow-private-networks, --max-attempts, --max-age,
// --ordered, --policy and --log-level (the others are exercised by the other
// tests).
func TestOperatorFlagsWork(t *testing.T) {
	dir := t.TempDir()
	tries := &attemptLog{fails: map[string]int{"o-1": 2}} // the ordered key's attempts
	rc := newReceiver(t, func(r *http.Request, id string) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/fail"):
			return http.StatusInternalServerError
		case strings.HasSuffix(r.URL.Path, "/notyet"):
			return http.StatusNotFound
		case strings.HasSuffix(r.URL.Path, "/exists"):
			return http.StatusConflict // success by --policy 409=success
		}
		return tries.respond(id)
	})
	db := filepath.Join(dir, "data", "events.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, "--db", db, "--allow-raw-urls", "--allow-private-networks",
		"--max-attempts", "2", "--max-age", "700ms", "--ordered", "--log-level", "debug", "--policy", "409=success",
		"--interval", "20ms", "--park-interval", "50ms", "--backoff-initial", "20ms", "--backoff-max", "50ms")
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("--db: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "outboxd.db")); err == nil {
		t.Error("--db ignored: ./outboxd.db created")
	}
	raw := rc.URL
	code, m := call(t, "POST", p.url("/v1/events"), "", `[
		{"id":"o-1","key":"k","destination":"`+raw+`/ok"},
		{"id":"o-2","key":"k","destination":"`+raw+`/ok"},
		{"id":"o-3","key":"k","destination":"`+raw+`/ok"},
		{"id":"attempts","destination":"`+raw+`/fail"},
		{"id":"age","destination":"`+raw+`/notyet"},
		{"id":"exists","destination":"`+raw+`/exists"}]`)
	if code != http.StatusAccepted {
		t.Fatalf("raw URL destinations with --allow-raw-urls: %d %v", code, m)
	}
	testkit.WaitFor(t, 15*time.Second, "the ordered key delivered", func() bool {
		return rc.ackedCount("o-3") > 0
	})

	if got, want := tries.String(), "try o-1, try o-1, try o-1, ok o-1, try o-2, ok o-2, try o-3, ok o-3"; got != want {
		t.Errorf("--ordered: receiver saw %s\nwant %s", got, want)
	}
	testkit.WaitFor(t, 15*time.Second, "dead letters by max attempts and max age", func() bool {
		_, a := call(t, "GET", p.url("/v1/events/attempts"), "", "")
		_, b := call(t, "GET", p.url("/v1/events/age"), "", "")
		return a["state"] == "dead" && b["state"] == "dead"
	})

	_, a := call(t, "GET", p.url("/v1/events/attempts"), "", "")
	if r, _ := a["dead_reason"].(string); !strings.Contains(r, "max attempts (2)") || a["attempts"] != float64(2) {
		t.Errorf("--max-attempts 2: %v", a)
	}
	_, b := call(t, "GET", p.url("/v1/events/age"), "", "")
	if r, _ := b["dead_reason"].(string); !strings.Contains(r, "max age 700ms") {
		t.Errorf("--max-age 700ms: %v", b)
	}
	testkit.WaitFor(t, 15*time.Second, "--policy 409=success: the event answered 409 delivered", func() bool {
		_, m := call(t, "GET", p.url("/v1/events/exists"), "", "")
		return m["state"] == "delivered"
	})

	if !strings.Contains(p.log.String(), `"level":"DEBUG"`) {
		t.Error("--log-level debug: no debug records in the log")
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}

// Without --ordered outboxd keeps no key index (it would only slow keyed
// enqueues down); a restart with --ordered rebuilds it from the pending
// events, so the events that waited keep their per-key order.
func TestOrderedAfterARestartWithoutIt(t *testing.T) {
	dir := t.TempDir()
	var healthy atomic.Bool
	tries := &attemptLog{fails: map[string]int{"o-1": 2}} // attempts once healthy
	rc := newReceiver(t, func(r *http.Request, id string) int {
		if !healthy.Load() {
			return http.StatusServiceUnavailable
		}
		return tries.respond(id)
	})
	args := []string{"--allow-raw-urls", "--allow-private-networks",
		"--interval", "20ms", "--backoff-initial", "20ms", "--backoff-max", "50ms"}
	p := start(t, dir, args...)
	raw := rc.URL
	code, m := call(t, "POST", p.url("/v1/events"), "", `[
		{"id":"o-1","key":"k","destination":"`+raw+`/ok"},
		{"id":"o-2","key":"k","destination":"`+raw+`/ok"},
		{"id":"o-3","key":"k","destination":"`+raw+`/ok"}]`)
	if code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %v", code, m)
	}
	// Unordered, all three are attempted while the receiver is down.
	testkit.WaitFor(t, 15*time.Second, "every event of the key attempted", func() bool {
		return rc.attemptCount("o-1") > 0 && rc.attemptCount("o-2") > 0 && rc.attemptCount("o-3") > 0
	})

	p.signal(syscall.SIGTERM, 10*time.Second)

	healthy.Store(true)
	p = start(t, dir, append(args, "--ordered")...)
	testkit.WaitFor(t, 15*time.Second, "the key delivered in order", func() bool {
		return rc.ackedCount("o-1") > 0 && rc.ackedCount("o-2") > 0 && rc.ackedCount("o-3") > 0
	})

	if got, want := tries.String(), "try o-1, try o-1, try o-1, ok o-1, try o-2, ok o-2, try o-3, ok o-3"; got != want {
		t.Errorf("after the restart with --ordered the receiver saw %s\nwant %s", got, want)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	if _, out := run(t, dir, "inspect", "--db", "outboxd.db"); !strings.Contains(out, "key index kept") {
		t.Errorf("inspect after a server with --ordered does not say the key index is kept:\n%s", out)
	}
}

// attemptLog answers a receiver's requests for events, failing each ID's
// first fails[ID] attempts with 503, and records the attempts ("try ID") and
// successes ("ok ID") in arrival order.
type attemptLog struct {
	mu    sync.Mutex
	fails map[string]int
	order []string
}

func (l *attemptLog) respond(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.order = append(l.order, "try "+id)
	if l.fails[id] > 0 {
		l.fails[id]--
		return http.StatusServiceUnavailable
	}
	l.order = append(l.order, "ok "+id)
	return http.StatusNoContent
}

// String returns the attempts and successes so far, comma separated.
func (l *attemptLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.order, ", ")
}
