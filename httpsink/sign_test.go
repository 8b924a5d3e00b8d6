package httpsink_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// verifyWebhook checks a request as a Standard Webhooks receiver does,
// written from the specification (standardwebhooks.com, "Verifying webhook
// signatures") and sharing no code with the sink:
//   - the signed content is webhook-id, ".", webhook-timestamp, ".", body;
//   - the key is the base64 decoding of the secret after its "whsec_" prefix;
//   - the signature is the base64 of HMAC-SHA256(key, signed content);
//   - webhook-signature holds space-delimited "v1,<signature>" entries, and
//     the request is authentic if any of them matches;
//   - the timestamp must be within tolerance of the receiver's clock.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("bad timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp outside the tolerance")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", id, ts, body)
	want := mac.Sum(nil)
	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// TestVerifierMatchesSpecVector pins the test's verifier to the published
// Standard Webhooks example, so that it cannot share a mistake with the sink.
func TestVerifierMatchesSpecVector(t *testing.T) {
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if err := verifyWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0)); err != nil {
		t.Fatal(err)
	}
}

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_dGhlIG5ldyBzZWNyZXQgYWZ0ZXIgcm90YXRpb24h"
	secretC = "whsec_bm90IHRoZSBzZWNyZXQgb2YgdGhpcyBlbmRwb2ludA=="
)

type captured struct {
	h    http.Header
	body []byte
}

func capturingReceiver(t *testing.T, status func(n int64) int) (*receiver, chan captured) {
	got := make(chan captured, 10)
	var n atomic.Int64
	rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- captured{r.Header.Clone(), b}
		w.WriteHeader(status(n.Add(1)))
	})
	return rcv, got
}

// TestSignatureSpecVector: the sink's signature for the published example
// is the published one.
func TestSignatureSpecVector(t *testing.T) {
	rcv, got := capturingReceiver(t, func(int64) int { return 204 })
	s := newSink(t, httpsink.Config{
		Now:       func() time.Time { return time.Unix(1614265330, 0) },
		Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true, Secrets: []string{secretA}}},
	})
	s.Deliver(context.Background(), &outbox.Delivery{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Destination: "e", Payload: []byte(`{"test": 2432232314}`)})
	if sig := (<-got).h.Get("webhook-signature"); sig != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("webhook-signature %q", sig)
	}
}

// TestSignatureRotation: with two secrets, receivers holding either one
// verify the request, and one holding neither does not.
func TestSignatureRotation(t *testing.T) {
	rcv, got := capturingReceiver(t, func(int64) int { return 200 })
	s := newSink(t, httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true, Secrets: []string{secretA, secretB}}},
	})
	payload := []byte(`{"type":"order.created","data":{"id":7,"note":"ünïcode . and dots"}}`)
	res := s.Deliver(context.Background(), &outbox.Delivery{ID: "evt-rot", Destination: "e", Payload: payload})
	if res.Action != outbox.ActionSuccess {
		t.Fatalf("got %s (%v)", res.Action, res.Err)
	}
	c := <-got
	if n := len(strings.Fields(c.h.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures, want 2: %q", n, c.h.Get("webhook-signature"))
	}
	for _, sec := range []string{secretA, secretB} {
		if err := verifyWebhook(sec, c.h, c.body, fixedNow); err != nil {
			t.Errorf("receiver with secret %s...: %v", sec[:10], err)
		}
	}
	if err := verifyWebhook(secretC, c.h, c.body, fixedNow); err == nil {
		t.Error("a receiver with another secret verified the request")
	}
	tampered := append([]byte(nil), c.body...)
	tampered[len(tampered)-2] = '!'
	if err := verifyWebhook(secretA, c.h, tampered, fixedNow); err == nil {
		t.Error("a tampered body verified")
	}
}

// TestSignatureFreshOnInlineRetry: an inline retry carries the same
// webhook-id with a fresh timestamp and a signature that verifies.
func TestSignatureFreshOnInlineRetry(t *testing.T) {
	rcv, got := capturingReceiver(t, func(n int64) int {
		if n == 1 {
			return 503
		}
		return 200
	})
	var ticks atomic.Int64
	s := newSink(t, httpsink.Config{
		// Each reading of the clock is a second later.
		Now:       func() time.Time { return fixedNow.Add(time.Duration(ticks.Add(1)) * time.Second) },
		Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true, Secrets: []string{secretB}}},
	})
	if res := deliver(s, "e", `{"x":1}`); res.Action != outbox.ActionSuccess {
		t.Fatalf("got %s/%d", res.Action, res.Status)
	}
	first, second := <-got, <-got
	if first.h.Get("webhook-id") != "evt-1" || second.h.Get("webhook-id") != "evt-1" || second.h.Get("Idempotency-Key") != "evt-1" {
		t.Fatalf("ids %q, %q", first.h.Get("webhook-id"), second.h.Get("webhook-id"))
	}
	if first.h.Get("webhook-timestamp") == second.h.Get("webhook-timestamp") {
		t.Fatalf("the retry reused timestamp %s", first.h.Get("webhook-timestamp"))
	}
	for i, c := range []captured{first, second} {
		if err := verifyWebhook(secretB, c.h, c.body, fixedNow); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
}
