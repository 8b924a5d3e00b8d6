package main

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Endpoint isolation with the real binary at its defaults: with a backlog
// of 3,000 events for an endpoint that refuses every connection, events
// for a healthy endpoint enqueued after the backlog are delivered, and the
// dead endpoint's backlog stays pending (none lost, none dead).
func TestHealthyEndpointDeliversBesideDeadEndpointsBacklog(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there: every connection is refused
	rc := newReceiver(t, nil)
	p := start(t, dir, "--endpoint", "dead=http://"+dead+"/hook,allow-private", "--endpoint", rc.endpoint("healthy"))

	const backlog = 3000
	enqueueBatches(t, p, "dead", "dead", backlog, 1000)
	healthy := enqueueBatches(t, p, "healthy", "healthy", 20, 1)

	testkit.WaitFor(t, 60*time.Second, "the healthy endpoint's events beside the dead endpoint's backlog", func() bool {
		return len(rc.missing(healthy)) == 0
	})
	testkit.WaitFor(t, 30*time.Second, "the dead endpoint's backlog to be all that is pending", func() bool {
		code, stats := call(t, "GET", p.url("/v1/stats"), "", "")
		return code == http.StatusOK && stats["pending"] == float64(backlog) && stats["dead"] == 0.0
	})
	for _, id := range healthy {
		if n := rc.ackedCount(id); n != 1 {
			t.Errorf("%s acknowledged %d times, want once", id, n)
		}
	}
}
