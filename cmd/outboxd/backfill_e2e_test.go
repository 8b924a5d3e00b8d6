package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// An endpoint is created over 3,000 events waiting unrouted: the create
// answers (with the secret) without waiting for their routing, the
// endpoint's GET answers, and outboxd is killed (SIGKILL) once the
// routing has made progress, most likely in its middle. After a restart every event reaches
// the endpoint exactly once (the receiver holds every request until the
// restart, so none was acknowledged before the kill).
func TestBackfillAcrossSIGKILL(t *testing.T) {
	dir := t.TempDir()
	var inFlight atomic.Int64
	release := make(chan struct{})
	rc := newReceiver(t, holdUntil(release, &inFlight))
	args := []string{"--allow-private-networks", "--interval", "50ms"}
	p := start(t, dir, args...)
	const n = 3000
	var ids []string
	for i := 0; i < n; i += 500 {
		var evs []string
		for j := i; j < i+500; j++ {
			ids = append(ids, fmt.Sprintf("ev-%05d", j))
			evs = append(evs, `{"id": "`+ids[j]+`", "topic": "order.paid", "payload": {"n": `+fmt.Sprint(j)+`}}`)
		}
		if code, body := call(t, "POST", p.url("/v1/events"), "", "["+strings.Join(evs, ",")+"]"); code != http.StatusAccepted {
			t.Fatalf("publish: %d %v", code, body)
		}
	}
	if code, body := call(t, "GET", p.url("/v1/stats"), "", ""); code != http.StatusOK || body["unrouted"] != float64(n) {
		t.Fatalf("stats before the endpoint: %d %v, want %d unrouted", code, body, n)
	}
	began := time.Now()
	code, body := call(t, "POST", p.url("/v1/endpoints/billing"), "", `{"url": "`+rc.URL+`/hook", "topics": ["order.*"]}`)
	if secret, _ := body["secret"].(string); code != http.StatusCreated || secret == "" {
		t.Fatalf("POST billing: %d %v", code, body)
	}
	t.Logf("the create over %d waiting events answered in %v", n, time.Since(began))
	if code, body := call(t, "GET", p.url("/v1/endpoints/billing"), "", ""); code != http.StatusOK || body["backfill"] == nil {
		t.Fatalf("GET billing during the backfill: %d %v", code, body)
	}
	// Kill once the routing has made progress (or ended: the outcome must
	// be the same either way).
	var backfill map[string]any
	testkit.WaitFor(t, time.Minute, "the backfill to route a batch", func() bool {
		_, stats := call(t, "GET", p.url("/v1/stats"), "", "")
		backfill, _ = stats["backfill"].(map[string]any)
		return backfill["routed"] != 0.0 || backfill["running"] != true
	})
	p.signal(syscall.SIGKILL, 5*time.Second)
	t.Logf("killed with the backfill at %v", backfill)

	p = start(t, dir, args...)
	close(release)
	testkit.WaitFor(t, 2*time.Minute, "every event at the endpoint", func() bool { return len(rc.missing(ids)) == 0 })
	testkit.WaitFor(t, time.Minute, "no event unrouted or pending", func() bool {
		_, body := call(t, "GET", p.url("/v1/stats"), "", "")
		return body["unrouted"] == 0.0 && body["pending"] == 0.0
	})
	for _, id := range ids {
		if got := rc.ackedCount(id); got != 1 {
			t.Fatalf("%s acknowledged %d times, want once", id, got)
		}
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}
