package httpsink_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// The published Standard Webhooks example verifies within the tolerance and
// is refused, saying why, outside it, both ways.
func TestVerifierSpecVectorAndTolerance(t *testing.T) {
	v, err := httpsink.NewVerifier([]string{secretA}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	signed := time.Unix(1614265330, 0)
	for _, d := range []time.Duration{0, 4 * time.Minute, -4 * time.Minute} {
		if err := v.Verify(h, body, signed.Add(d)); err != nil {
			t.Errorf("received %s after signing: %v", d, err)
		}
	}
	for d, want := range map[time.Duration]string{6 * time.Minute: "6m0s old", -6 * time.Minute: "6m0s ahead of this clock"} {
		err := v.Verify(h, body, signed.Add(d))
		if !errors.Is(err, httpsink.ErrTimestampOutOfTolerance) || !strings.Contains(err.Error(), want) {
			t.Errorf("received %s after signing: %v, want ErrTimestampOutOfTolerance saying %q", d, err, want)
		}
	}
	long, err := httpsink.NewVerifier([]string{secretA}, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := long.Verify(h, body, signed.Add(6*time.Minute)); err != nil {
		t.Errorf("tolerance of 10m, 6m later: %v", err)
	}
}

// What the sink signs verifies with any of the endpoint's secrets, and with
// no other secret, nor once the body, the ID or the timestamp changed.
func TestVerifierAcceptsTheSinksSignatures(t *testing.T) {
	rcv, got := capturingReceiver(t, func(int64) int { return 200 })
	s := newSink(t, httpsink.Config{
		Now:       func() time.Time { return fixedNow },
		Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true, Secrets: []string{secretA, secretB}}},
	})
	res := s.Deliver(context.Background(), &outbox.Delivery{ID: "evt-v", Destination: "e", Payload: []byte(`{"n":1}`)})
	if res.Action != outbox.ActionSuccess {
		t.Fatalf("got %s (%v)", res.Action, res.Err)
	}
	c := <-got
	for _, secrets := range [][]string{{secretA}, {secretB}, {secretC, secretB}} {
		v, err := httpsink.NewVerifier(secrets, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(c.h, c.body, fixedNow); err != nil {
			t.Errorf("secrets %d: %v", len(secrets), err)
		}
	}
	v, err := httpsink.NewVerifier([]string{secretC}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(c.h, c.body, fixedNow); !errors.Is(err, httpsink.ErrSignatureMismatch) {
		t.Errorf("another secret: %v, want ErrSignatureMismatch", err)
	}
	good, _ := httpsink.NewVerifier([]string{secretA}, 0)
	changed := func(k, v string) http.Header {
		h := c.h.Clone()
		h.Set(k, v)
		return h
	}
	if err := good.Verify(c.h, []byte(`{"n":2}`), fixedNow); !errors.Is(err, httpsink.ErrSignatureMismatch) {
		t.Errorf("body changed: %v", err)
	}
	if err := good.Verify(changed("webhook-id", "evt-w"), c.body, fixedNow); !errors.Is(err, httpsink.ErrSignatureMismatch) {
		t.Errorf("id changed: %v", err)
	}
	ts := strconv.FormatInt(fixedNow.Unix()+1, 10)
	if err := good.Verify(changed("webhook-timestamp", ts), c.body, fixedNow); !errors.Is(err, httpsink.ErrSignatureMismatch) {
		t.Errorf("timestamp changed: %v", err)
	}
}

// Each malformed delivery gets its own error, and none of them quotes the
// signature.
func TestVerifierRefusals(t *testing.T) {
	v, err := httpsink.NewVerifier([]string{secretA}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(fixedNow.Unix(), 10)
	hdr := func(id, ts, sig string) http.Header {
		h := http.Header{}
		for k, v := range map[string]string{"webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig} {
			if v != "" {
				h.Set(k, v)
			}
		}
		return h
	}
	const sig = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	cases := []struct {
		name string
		h    http.Header
		want error
		says string
	}{
		{"no signature", hdr("m", ts, ""), httpsink.ErrSignatureMissing, "no webhook-signature header"},
		{"no id", hdr("", ts, sig), httpsink.ErrSignatureHeaders, "no webhook-id"},
		{"no timestamp", hdr("m", "", sig), httpsink.ErrSignatureHeaders, "no webhook-timestamp"},
		{"timestamp not a number", hdr("m", "yesterday", sig), httpsink.ErrSignatureHeaders, "not unix seconds"},
		{"only other versions", hdr("m", ts, "v1a,xyz v2,abc"), httpsink.ErrSignatureMismatch, "no v1 signature"},
		{"not base64", hdr("m", ts, "v1,!!!"), httpsink.ErrSignatureMismatch, "made with the secret"},
		{"too long", hdr("m", ts, "v1,"+strings.Repeat("QUFB", 40)), httpsink.ErrSignatureMismatch, "made with the secret"},
		{"wrong", hdr("m", ts, sig), httpsink.ErrSignatureMismatch, "made with the secret"},
	}
	for _, c := range cases {
		err := v.Verify(c.h, []byte("{}"), fixedNow)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, err, c.want, c.says)
		}
		if err != nil && strings.Contains(err.Error(), "AAAA") {
			t.Errorf("%s: the error quotes the signature: %v", c.name, err)
		}
	}
}

// A malformed secret is refused by position, without quoting it.
func TestNewVerifierRefusesBadSecrets(t *testing.T) {
	for _, secrets := range [][]string{nil, {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, {secretA, "whsec_%%%"}, {"whsec_c2hvcnQ="}} {
		_, err := httpsink.NewVerifier(secrets, 0)
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, httpsink.ErrInvalidConfig) {
			t.Errorf("%d secrets: %v, want a *ConfigError", len(secrets), err)
			continue
		}
		for _, s := range secrets {
			if len(s) > 8 && strings.Contains(err.Error(), s[6:]) {
				t.Errorf("the error quotes the secret: %v", err)
			}
		}
	}
}
