package sinktest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// With Delivery.LogResponse a sink returns, for any outcome, at least the
// first ExcerptBytes of the body (it may return more of a failure's for
// its own use) and the response headers the attempt log keeps, never a
// cookie.
func testAttemptLog(t *testing.T, newSink Factory) {
	rcv := newReceiver(t)
	s := newSink(t, rcv.URL+"/hook")
	body := strings.Repeat("0123456789", 300)
	for _, code := range []int{200, 404, 500} {
		rcv.set(func(*http.Request, string, int) testkit.Reply {
			return testkit.Reply{Status: code, Body: body,
				Header: http.Header{"Content-Type": {"text/plain"}, "Set-Cookie": {"session=abc"}, "X-Secret-Trace": {"t"}}}
		})
		for _, n := range []int{7, 2000} {
			d := delivery("evt-log")
			d.LogResponse, d.ExcerptBytes = true, n
			res := s.Deliver(context.Background(), d)
			if res.Status != code || !strings.HasPrefix(res.Body, body[:n]) {
				t.Errorf("%d, excerpt %d: status %d, body of %d bytes %.20q...; want the first %d bytes", code, n, res.Status, len(res.Body), res.Body, n)
			}
			if res.Header["Content-Type"] != "text/plain" {
				t.Errorf("%d: headers %v, want Content-Type", code, res.Header)
			}
			for k := range res.Header {
				if !outbox.IsLoggedHeader(k) {
					t.Errorf("%d: header %q returned for the attempt log", code, k)
				}
			}
		}
	}
}
