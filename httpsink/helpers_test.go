package httpsink_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// fixedNow is the clock of most tests: webhook timestamps and Retry-After
// dates are computed from it.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// receiver is a real HTTP server on loopback that counts what reaches it.
type receiver struct {
	*httptest.Server
	requests atomic.Int64 // requests that reached the handler
	conns    atomic.Int64 // TCP connections accepted
}

func newReceiver(t testing.TB, h http.HandlerFunc) *receiver {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		h(w, req)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	srv.Start()
	r.Server = srv
	t.Cleanup(srv.Close)
	return r
}

// newSink returns a sink closed at the end of the test.
func newSink(t testing.TB, cfg httpsink.Config) *httpsink.Sink {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return fixedNow }
	}
	s, err := httpsink.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func deliver(s *httpsink.Sink, dest string, payload string) outbox.Result {
	return s.Deliver(context.Background(), &outbox.Delivery{
		ID:          "evt-1",
		Destination: dest,
		Method:      http.MethodPost,
		Payload:     []byte(payload),
		Attempt:     1,
		CreatedAt:   fixedNow,
	})
}
