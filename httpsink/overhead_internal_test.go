package httpsink

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// stubTransport answers every request with a 204 without any I/O, so that a
// benchmark measures what the client side computes per request.
type stubTransport struct{}

func (stubTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 204, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// BenchmarkOverhead is the CPU a delivery costs on the client side, without
// the network: the sink against a plain http.Client sending the same
// headers, both on a transport that answers at once.
func BenchmarkOverhead(b *testing.B) {
	payload := bytes.Repeat([]byte(`{"order":42,"status":"paid"},`), 10)
	b.Run("client=plain", func(b *testing.B) {
		b.ReportAllocs()
		c := &http.Client{Transport: stubTransport{}}
		h := http.Header{"Content-Type": {"application/json"}, "X-Trace": {"abc"}, "Idempotency-Key": {"evt"}, "Webhook-Id": {"evt"},
			"Webhook-Timestamp": {"1767323045"}, "Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}}
		for b.Loop() {
			req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://127.0.0.1:1/hook", bytes.NewReader(payload))
			for k, v := range h {
				req.Header[k] = v
			}
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("client=sink", func(b *testing.B) {
		b.ReportAllocs()
		s, err := New(Config{Endpoints: []Endpoint{{Name: "e", URL: "http://127.0.0.1:1/hook", AllowPrivate: true,
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.endpoint("e").client.Transport = stubTransport{}
		d := &outbox.Delivery{ID: "evt", Destination: "e", Method: "POST", Headers: map[string]string{"X-Trace": "abc"}, Payload: payload}
		for b.Loop() {
			if r := s.Deliver(context.Background(), d); r.Action != outbox.ActionSuccess {
				b.Fatal(r)
			}
		}
	})
	b.Run("client=sink-raw", func(b *testing.B) {
		b.ReportAllocs()
		s, err := New(Config{AllowRawURLs: true, AllowPrivateNetworks: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.raw.Transport = stubTransport{}
		d := &outbox.Delivery{ID: "evt", Destination: "http://127.0.0.1:1/hook", Method: "POST", Headers: map[string]string{"X-Trace": "abc"}, Payload: payload}
		for b.Loop() {
			if r := s.Deliver(context.Background(), d); r.Action != outbox.ActionSuccess {
				b.Fatal(r)
			}
		}
	})
}
