package main

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Vectors from the providers' own documentation and libraries, so that the
// verifiers are checked against something they were not written from.
func TestVerifyPublishedVectors(t *testing.T) {
	// GitHub's docs, "Validating webhook deliveries": secret "It's a Secret
	// to Everybody", payload "Hello, World!".
	gh, err := newVerifier(SchemeGitHub, []string{"It's a Secret to Everybody"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("X-GitHub-Event", "ping")
	in, err := gh.verify(h, []byte("Hello, World!"), time.Now())
	if err != nil || in.DeliveryID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || in.Type != "ping" {
		t.Fatalf("github: %+v, %v", in, err)
	}

	// The Standard Webhooks reference libraries' test vector.
	sw, err := newVerifier(SchemeStandardWebhooks, []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h = http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	in, err = sw.verify(h, body, time.Unix(1614265330, 0).Add(time.Minute))
	if err != nil || in.DeliveryID != "msg_p5jXN8AQM9LWM0D4loKWxJek" {
		t.Fatalf("standard webhooks: %+v, %v", in, err)
	}
	if _, err := sw.verify(h, body, time.Unix(1614265330, 0).Add(6*time.Minute)); !errors.Is(err, errStale) {
		t.Fatalf("standard webhooks 6 minutes later: %v, want errStale", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	key := []byte("0123456789abcdef0123")
	swSecret := "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM=" // base64 of key
	stSecret := "whsec_stripe"
	stSig := func(ts string, b []byte) string {
		return "t=" + ts + ",v1=" + hexMAC([]byte(stSecret), ts+"."+string(b))
	}
	swHeaders := func(id, ts, sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sig)
		return h
	}
	goodSW := "v1," + b64MAC(key, "msg_1."+ts+"."+string(body))

	cases := []struct {
		name   string
		scheme string
		secret string
		h      http.Header
		body   []byte
		want   error // nil: accepted
	}{
		{"sw ok", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", ts, goodSW), body, nil},
		{"sw ok among others", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", ts, "v1a,xyz v1,AAAA "+goodSW), body, nil},
		{"sw body changed", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", ts, goodSW), []byte(`{}`), errBadSignature},
		{"sw id changed", SchemeStandardWebhooks, swSecret, swHeaders("msg_2", ts, goodSW), body, errBadSignature},
		{"sw no signature", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", ts, ""), body, errNoSignature},
		{"sw no id", SchemeStandardWebhooks, swSecret, swHeaders("", ts, goodSW), body, errBadHeader},
		{"sw bad timestamp", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", "yesterday", goodSW), body, errBadHeader},
		{"sw future", SchemeStandardWebhooks, swSecret, swHeaders("msg_1", strconv.FormatInt(now.Unix()+301, 10), goodSW), body, errStale},
		{"gh no signature", SchemeGitHub, "s", http.Header{"X-Github-Delivery": {"d"}}, body, errNoSignature},
		{"gh sha1 only", SchemeGitHub, "s", http.Header{"X-Hub-Signature-256": {"sha1=" + hexMAC([]byte("s"), string(body))}}, body, errBadHeader},
		{"gh not hex", SchemeGitHub, "s", http.Header{"X-Hub-Signature-256": {"sha256=zz"}}, body, errBadHeader},
		{"gh wrong secret", SchemeGitHub, "s", http.Header{"X-Hub-Signature-256": {"sha256=" + hexMAC([]byte("t"), string(body))}}, body, errBadSignature},
		{"gh no delivery id", SchemeGitHub, "s", http.Header{"X-Hub-Signature-256": {"sha256=" + hexMAC([]byte("s"), string(body))}}, body, errNoDeliveryID},
		{"gh delivery id with a newline", SchemeGitHub, "s", http.Header{"X-Github-Delivery": {"a\nb"}, "X-Hub-Signature-256": {"sha256=" + hexMAC([]byte("s"), string(body))}}, body, errBadDeliveryID},
		{"stripe ok", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {stSig(ts, body)}}, body, nil},
		{"stripe stale", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {stSig("1699999000", body)}}, body, errStale},
		{"stripe v0 only", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {"t=" + ts + ",v0=" + hexMAC([]byte(stSecret), ts+"."+string(body))}}, body, errBadSignature},
		{"stripe two t", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {"t=1,t=2,v1=00"}}, body, errBadHeader},
		{"stripe no t", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {"v1=00"}}, body, errBadHeader},
		{"stripe garbage", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {"garbage"}}, body, errBadHeader},
		{"stripe timestamp swapped", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {"t=" + strconv.FormatInt(now.Unix()-1, 10) + ",v1=" + hexMAC([]byte(stSecret), ts+"."+string(body))}}, body, errBadSignature},
		{"stripe body not JSON", SchemeStripe, stSecret, http.Header{"Stripe-Signature": {stSig(ts, []byte("x"))}}, []byte("x"), errNoDeliveryID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := newVerifier(c.scheme, []string{c.secret}, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.verify(c.h, c.body, now)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("verify: %v, want %v", err, c.want)
			}
		})
	}
}

func TestVerifyAcceptsEitherSecretWhileRotating(t *testing.T) {
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"id":"evt_9"}`)
	v, err := newVerifier(SchemeStripe, []string{"whsec_old", "whsec_new"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"whsec_old", "whsec_new"} {
		h := http.Header{"Stripe-Signature": {"t=" + ts + ",v1=" + hexMAC([]byte(s), ts+"."+string(body))}}
		if _, err := v.verify(h, body, now); err != nil {
			t.Errorf("signed with %s: %v", s, err)
		}
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	base := `
targets:
  billing: {url: "https://billing.internal/hooks", topics: ["stripe.*"]}
sources:
  stripe: {scheme: stripe, secret_env: RELAY_TEST_STRIPE}
`
	t.Setenv("RELAY_TEST_STRIPE", "whsec_x")
	cases := []struct{ name, yaml, want string }{
		{"ok", base, ""},
		{"unknown field", base + "listen_on: x\n", "listen_on"},
		{"no topics", strings.Replace(base, `, topics: ["stripe.*"]`, "", 1), "targets.billing.topics: at least one"},
		{"bad topic", strings.Replace(base, `"stripe.*"`, `"stripe.*.paid"`, 1), "targets.billing.topics[0]"},
		{"bad filter", strings.Replace(base, `topics: ["stripe.*"]`, `topics: ["stripe.*"], filter: {"bad name": x}`, 1), "targets.billing.filter"},
		{"sources name no targets", strings.Replace(base, "RELAY_TEST_STRIPE}", "RELAY_TEST_STRIPE, targets: [billing]}", 1), "targets"},
		{"unknown scheme", strings.Replace(base, "scheme: stripe", "scheme: paypal", 1), `sources.stripe: unknown scheme "paypal"`},
		{"missing env", strings.Replace(base, "RELAY_TEST_STRIPE", "RELAY_TEST_UNSET", 1), "RELAY_TEST_UNSET is empty or not set"},
		{"bad url", strings.Replace(base, "https://billing.internal/hooks", "billing.internal", 1), "targets.billing.url"},
		{"bad whsec", strings.Replace(base, "scheme: stripe", "scheme: standard-webhooks", 1), `standard-webhooks secret must start with "whsec_"`},
		{"bad name", strings.Replace(base, "  stripe:", "  Stripe!:", 1), "sources.Stripe!: a name is"},
		{"no sources", "targets:\n  a: {url: \"http://a\", topics: [\"*\"]}\n", "sources: at least one source"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "bad whsec" {
				t.Setenv("RELAY_TEST_STRIPE", "not-whsec")
			}
			p := filepath.Join(t.TempDir(), "relay.yaml")
			if err := os.WriteFile(p, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadConfig(p)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("loadConfig: %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// FuzzVerify feeds arbitrary headers and bodies to every verifier: none may
// panic, and none may accept a request whose signature it cannot have
// produced (the fuzzer does not know the secrets).
func FuzzVerify(f *testing.F) {
	f.Add("msg_1", "1700000000", "v1,AAAA", "t=1700000000,v1=00", "sha256=00", []byte(`{"id":"evt_1"}`))
	f.Add("", "", "", "", "", []byte{})
	f.Add("a\x00b", "-1", "v1, v1,,", "t=,v1=,=,", "sha256=", []byte("\xff"))
	now := time.Unix(1_700_000_000, 0)
	var vs []verifier
	for _, c := range [][2]string{{SchemeStandardWebhooks, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, {SchemeGitHub, "secret"}, {SchemeStripe, "whsec_stripe"}} {
		v, err := newVerifier(c[0], []string{c[1]}, 0)
		if err != nil {
			f.Fatal(err)
		}
		vs = append(vs, v)
	}
	f.Fuzz(func(t *testing.T, id, ts, swSig, stripeSig, ghSig string, body []byte) {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", swSig)
		h.Set("Stripe-Signature", stripeSig)
		h.Set("X-Hub-Signature-256", ghSig)
		h.Set("X-GitHub-Delivery", id)
		for _, v := range vs {
			if in, err := v.verify(h, body, now); err == nil {
				t.Fatalf("%T accepted a forged request: %+v", v, in)
			}
		}
	})
}

func hexMAC(key []byte, msg string) string { return hex.EncodeToString(mac(key, []byte(msg))) }

func b64MAC(key []byte, msg string) string {
	return base64.StdEncoding.EncodeToString(mac(key, []byte(msg)))
}
