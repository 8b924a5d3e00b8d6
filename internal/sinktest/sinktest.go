package sinktest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// Destination is the endpoint name the sink under test must deliver to the
// suite's receiver.
const Destination = "receiver"

// Factory builds the sink under test for one test. url is the receiver's
// endpoint URL (a loopback address): the sink must deliver the destination
// Destination there, and must allow loopback addresses. It should answer
// 503 and 502 without inline retries or with a short retry budget. The
// suite closes nothing: the factory registers the sink's cleanup with t.
type Factory func(t *testing.T, url string) outbox.Sink

// request is what the receiver saw of one delivery.
type request struct {
	method string
	header http.Header
	body   []byte
}

// receiver is a loopback HTTP server that answers each request with the
// handler the current case set, and records what it received.
type receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	answer  http.HandlerFunc
	got     []request
	release chan struct{} // closed at cleanup: hanging handlers return
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.got = append(r.got, request{method: req.Method, header: req.Header.Clone(), body: body})
		answer := r.answer
		r.mu.Unlock()
		answer(w, req)
	}))
	t.Cleanup(func() {
		close(r.release)
		r.srv.Close()
	})
	return r
}

func (r *receiver) set(h http.HandlerFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = h
	r.got = nil
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", code)
	}
}

func delivery(id string) *outbox.Delivery {
	return &outbox.Delivery{
		ID:          id,
		Destination: Destination,
		Endpoint:    Destination,
		Method:      http.MethodPost,
		Headers:     map[string]string{"X-Tenant": "acme"},
		Payload:     []byte(`{"order":42,"note":"caf\u00e9"}`),
		Attempt:     1,
		CreatedAt:   time.Now().UTC(),
	}
}

// Run runs the suite against the sinks newSink builds.
func Run(t *testing.T, newSink Factory) {
	t.Run("Success", func(t *testing.T) { testSuccess(t, newSink) })
	t.Run("PolicyTable", func(t *testing.T) { testPolicyTable(t, newSink) })
	t.Run("TransportError", func(t *testing.T) { testTransportError(t, newSink) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, newSink) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newSink) })
}

// A 2xx is ActionSuccess; the receiver gets the method, the payload byte for
// byte, the event's headers, and the event ID as Idempotency-Key and
// webhook-id.
func testSuccess(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.srv.URL+"/hook")
	for _, code := range []int{200, 201, 204} {
		rcv.set(status(code))
		d := delivery(fmt.Sprintf("evt-%d", code))
		res := s.Deliver(context.Background(), d)
		if res.Action != outbox.ActionSuccess || res.Status != code {
			t.Fatalf("%d: %+v, want ActionSuccess with the status", code, res)
		}
		got := rcv.requests()
		if len(got) != 1 {
			t.Fatalf("%d: %d requests, want 1", code, len(got))
		}
		r := got[0]
		if r.method != d.Method || string(r.body) != string(d.Payload) {
			t.Errorf("%d: %s %q, want %s %q", code, r.method, r.body, d.Method, d.Payload)
		}
		if r.header.Get("X-Tenant") != "acme" {
			t.Errorf("%d: the event's header is missing: %v", code, r.header)
		}
		if r.header.Get("Idempotency-Key") != d.ID || r.header.Get("Webhook-Id") != d.ID {
			t.Errorf("%d: Idempotency-Key %q, webhook-id %q; want the event ID %q", code,
				r.header.Get("Idempotency-Key"), r.header.Get("Webhook-Id"), d.ID)
		}
	}
}

// The default status policy table of the design.
func testPolicyTable(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.srv.URL+"/hook")
	cases := []struct {
		answer     http.HandlerFunc
		code       int
		want       outbox.Action
		retryAfter time.Duration
	}{
		{status(404), 404, outbox.ActionPark, 0},
		{status(408), 408, outbox.ActionRetry, 0},
		{status(500), 500, outbox.ActionRetry, 0},
		{status(503), 503, outbox.ActionRetry, 0},
		{status(429, "Retry-After", "7"), 429, outbox.ActionThrottle, 7 * time.Second},
		{status(410), 410, outbox.ActionDisable, 0},
		{status(400), 400, outbox.ActionDead, 0},
		{status(422), 422, outbox.ActionDead, 0},
		{status(302, "Location", "/elsewhere"), 302, outbox.ActionDead, 0},
	}
	for _, c := range cases {
		rcv.set(c.answer)
		res := s.Deliver(context.Background(), delivery(fmt.Sprintf("evt-%d", c.code)))
		if res.Action != c.want || res.Status != c.code {
			t.Errorf("%d: %v with status %d, want %v", c.code, res.Action, res.Status, c.want)
		}
		if c.retryAfter > 0 && res.RetryAfter != c.retryAfter {
			t.Errorf("%d: RetryAfter %s, want %s", c.code, res.RetryAfter, c.retryAfter)
		}
		if c.want == outbox.ActionDead && !strings.Contains(res.Body, fmt.Sprintf("answer %d", c.code)) {
			t.Errorf("%d: dead without the start of the body: %q", c.code, res.Body)
		}
	}
}

// No response at all is a retry with status 0 and the error, never a
// success or a dead letter.
func testTransportError(t *testing.T, newSink Factory) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook"
	ln.Close() // nothing listens there now: connection refused
	s := newSink(t, url)
	res := s.Deliver(context.Background(), delivery("evt-refused"))
	if res.Action != outbox.ActionRetry || res.Status != 0 || res.Err == nil {
		t.Fatalf("connection refused: %+v, want ActionRetry with status 0 and the error", res)
	}
}

// A cancelled context ends a delivery the receiver does not answer, as a
// retry (the outbox then keeps the event without spending an attempt).
func testCancel(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.srv.URL+"/hook")
	arrived := make(chan struct{}, 1)
	rcv.set(func(w http.ResponseWriter, req *http.Request) {
		arrived <- struct{}{}
		select {
		case <-req.Context().Done():
		case <-rcv.release:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Result, 1)
	go func() { done <- s.Deliver(ctx, delivery("evt-hang")) }()
	<-arrived
	cancel()
	select {
	case res := <-done:
		if res.Action == outbox.ActionSuccess || res.Action == outbox.ActionDead {
			t.Fatalf("cancelled delivery: %+v, want a retry", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Deliver did not return after its context was cancelled")
	}
}

// The sink is safe for concurrent use: concurrent deliveries each reach the
// receiver once, with their own ID.
func testConcurrent(t *testing.T, newSink Factory) {
	const n = 32
	rcv := newReceiver(t)
	s := newSink(t, rcv.srv.URL+"/hook")
	rcv.set(status(200))
	var wg sync.WaitGroup
	results := make([]outbox.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.Deliver(context.Background(), delivery(fmt.Sprintf("evt-%02d", i)))
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for _, r := range rcv.requests() {
		seen[r.header.Get("Idempotency-Key")]++
	}
	for i, res := range results {
		id := fmt.Sprintf("evt-%02d", i)
		if res.Action != outbox.ActionSuccess || seen[id] != 1 {
			t.Errorf("%s: %+v, received %d times; want delivered once", id, res, seen[id])
		}
	}
}
