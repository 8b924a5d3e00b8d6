package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// damageLines counts the lines of a server log that report damage.
func damageLines(log string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "corrupt") || strings.Contains(line, "damaged") {
			n++
		}
	}
	return n
}

// 32 bytes overwritten in a live leaf of the events bucket of a cleanly
// stopped server's file: check finds it and names the page, inspect says
// the file is damaged, and a server started on it either refuses to start
// naming the damage or, once it meets the damaged page, is not ready (with
// the reason), refuses new events with 503 instead of accepting what it
// cannot deliver, and does not flood its log.
func TestDamagedPageStopsServeFromAcceptingEvents(t *testing.T) {
	dir := t.TempDir()
	// 404 parks the events (no attempt spent): they stay pending and are
	// due again shortly, in the first run and in the second.
	rc := newReceiver(t, func(*http.Request, string) int { return http.StatusNotFound })
	args := []string{"--endpoint", rc.endpoint("orders"), "--interval", "100ms", "--park-interval", "100ms"}
	p := start(t, dir, args...)
	enqueueBatches(t, p, "evt", "orders", 3000, 500)
	p.signal(syscall.SIGTERM, 10*time.Second)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("first run exited %d", code)
	}
	if code, out := run(t, dir, "check", "--db", "outboxd.db"); code != 0 || !strings.Contains(out, "ok: no problems found") {
		t.Fatalf("check of the healthy file: exit %d\n%s", code, out)
	}

	db := filepath.Join(dir, "outboxd.db")
	ps, leaves := testkit.LeafPages(t, db, "events")
	if len(leaves) < 5 {
		t.Fatalf("the events bucket has %d leaves; the test needs a middle one", len(leaves))
	}
	leaf := leaves[len(leaves)/2]
	testkit.Overwrite(t, db, ps, leaf, testkit.MiddleValueOffset(t, db, ps, leaf), testkit.Junk(32))

	code, out := run(t, dir, "check", "--db", "outboxd.db")
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, fmt.Sprintf("events, page %d, ID \"evt-", leaf)) ||
		!strings.Contains(out, "what to do") {
		t.Fatalf("check of the damaged file: exit %d, want 1 naming page %d of events\n%s", code, leaf, out)
	}
	code, out = run(t, dir, "inspect", "--db", "outboxd.db", "--limit", "3000")
	if code != 1 || !strings.Contains(out, "outboxd.db is damaged") || !strings.Contains(out, "outboxd check --db outboxd.db") {
		t.Fatalf("inspect of the damaged file: exit %d\n%s", code, out)
	}

	began := time.Now()
	p = startNoWait(t, dir, args...)
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case p.addr = <-p.log.listening:
	case <-p.done:
		// Refusing to start is an answer, if it names the damage.
		if p.exitCode() == 0 || !strings.Contains(p.log.String(), "damaged") {
			t.Fatalf("serve on a damaged file exited %d without saying the file is damaged:\n%s", p.exitCode(), p.log)
		}
		return
	case <-timer.C:
		t.Fatalf("outboxd did not listen within 20s:\n%s", p.log)
	}
	var status string
	var checks []any
	testkit.WaitFor(t, 20*time.Second, "/readyz to say the file is damaged", func() bool {
		code, m := call(t, "GET", p.url("/readyz"), "", "")
		status, _ = m["status"].(string)
		checks, _ = m["checks"].([]any)
		return code == http.StatusServiceUnavailable && strings.Contains(status, "damaged")
	})

	if !strings.Contains(status, "outboxd check") {
		t.Errorf("/readyz says %q; want it to point at outboxd check", status)
	}
	// The answer names the failed check: the store.
	if len(checks) != 1 || checks[0].(map[string]any)["name"] != "store" || checks[0].(map[string]any)["ok"] != false ||
		!strings.Contains(fmt.Sprint(checks[0].(map[string]any)["reason"]), "damaged") {
		t.Errorf("/readyz checks %v; want the store check alone, failed, saying the file is damaged", checks)
	}
	code, m := call(t, "POST", p.url("/v1/events"), "", `{"destination":"orders","payload":{"after":"damage"}}`)
	if msg, _ := m["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "damaged") {
		t.Errorf("POST on a damaged store: %d %v, want 503 saying the file is damaged", code, m)
	}
	// Stay a while: still not ready, and the damage is not logged over and
	// over (the report this test comes from saw 20 lines a second).
	observe := time.NewTimer(3 * time.Second)
	defer observe.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for watching := true; watching; {
		select {
		case <-observe.C:
			watching = false
		case <-p.done:
			t.Fatalf("outboxd exited while not ready:\n%s", p.log)
		case <-tick.C:
			if code, _ := call(t, "GET", p.url("/readyz"), "", ""); code != http.StatusServiceUnavailable {
				t.Fatalf("/readyz went back to %d on a damaged file", code)
			}
		}
	}
	elapsed := time.Since(began)
	if n, limit := damageLines(p.log.String()), 3+int(elapsed.Seconds()); n > limit {
		t.Errorf("%d log lines about the damage in %s (at most %d expected)", n, elapsed.Round(time.Millisecond), limit)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}
