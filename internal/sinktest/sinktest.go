package sinktest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
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

// receiver is the loopback receiver of a case: it records what it
// received, by Idempotency-Key, and answers as the case set.
type receiver struct {
	*testkit.Receiver
	release chan struct{} // closed at cleanup: hanging answers return
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{Receiver: testkit.NewReceiver(t, "Idempotency-Key", nil), release: make(chan struct{})}
	t.Cleanup(func() { close(r.release) }) // before the server closes
	return r
}

// set makes the receiver answer with a from now on, and forgets what it
// received so far.
func (r *receiver) set(a testkit.Answer) {
	r.SetAnswer(a)
	r.Forget()
}

// status answers code, with the header name/value pairs, and the body
// "answer <code>".
func status(code int, header ...string) testkit.Answer {
	return func(*http.Request, string, int) testkit.Reply {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return testkit.Reply{Status: code, Header: h, Body: fmt.Sprintf("answer %d", code)}
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
	t.Run("AttemptLog", func(t *testing.T) { testAttemptLog(t, newSink) })
}

// A 2xx is ActionSuccess; the receiver gets the method, the payload byte for
// byte, the event's headers, and the event ID as Idempotency-Key and
// webhook-id.
func testSuccess(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.URL+"/hook")
	for _, code := range []int{200, 201, 204} {
		rcv.set(status(code))
		d := delivery(fmt.Sprintf("evt-%d", code))
		res := s.Deliver(context.Background(), d)
		if res.Action != outbox.ActionSuccess || res.Status != code {
			t.Fatalf("%d: %+v, want ActionSuccess with the status", code, res)
		}
		got := rcv.Requests()
		if len(got) != 1 {
			t.Fatalf("%d: %d requests, want 1", code, len(got))
		}
		r := got[0]
		if r.Method != d.Method || string(r.Body) != string(d.Payload) {
			t.Errorf("%d: %s %q, want %s %q", code, r.Method, r.Body, d.Method, d.Payload)
		}
		if r.Header.Get("X-Tenant") != "acme" {
			t.Errorf("%d: the event's header is missing: %v", code, r.Header)
		}
		if r.Header.Get("Idempotency-Key") != d.ID || r.Header.Get("Webhook-Id") != d.ID {
			t.Errorf("%d: Idempotency-Key %q, webhook-id %q; want the event ID %q", code,
				r.Header.Get("Idempotency-Key"), r.Header.Get("Webhook-Id"), d.ID)
		}
	}
}

// The default status policy table of the design.
func testPolicyTable(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.URL+"/hook")
	cases := []struct {
		answer     testkit.Answer
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
	url := "http://" + testkit.FreeAddr(t) + "/hook" // nothing listens there: connection refused
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
	s := newSink(t, rcv.URL+"/hook")
	arrived := make(chan struct{}, 1)
	rcv.set(func(req *http.Request, _ string, _ int) testkit.Reply {
		arrived <- struct{}{}
		select {
		case <-req.Context().Done():
		case <-rcv.release:
		}
		return testkit.Reply{}
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
	s := newSink(t, rcv.URL+"/hook")
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
	for _, r := range rcv.Requests() {
		seen[r.Header.Get("Idempotency-Key")]++
	}
	for i, res := range results {
		id := fmt.Sprintf("evt-%02d", i)
		if res.Action != outbox.ActionSuccess || seen[id] != 1 {
			t.Errorf("%s: %+v, received %d times; want delivered once", id, res, seen[id])
		}
	}
}
