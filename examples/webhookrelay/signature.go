package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/httpsink"
)

// The signature schemes a source can use.
const (
	// SchemeStandardWebhooks is https://www.standardwebhooks.com: headers
	// webhook-id, webhook-timestamp and webhook-signature ("v1,<base64
	// HMAC-SHA256 of id.timestamp.body>", space-separated when several), with
	// secrets written whsec_<base64 key>.
	SchemeStandardWebhooks = "standard-webhooks"
	// SchemeGitHub is GitHub's X-Hub-Signature-256: "sha256=<hex HMAC-SHA256
	// of the body>" with the secret's bytes as the key; the delivery ID is
	// X-GitHub-Delivery, kept on redelivery.
	SchemeGitHub = "github"
	// SchemeStripe is Stripe's Stripe-Signature: "t=<unix>,v1=<hex
	// HMAC-SHA256 of t.body>" with the whole whsec_ secret string as the key;
	// the delivery ID is the event's "id" in the body, kept on retries.
	SchemeStripe = "stripe"
)

// DefaultTolerance is how far a signed timestamp may be from the relay's
// clock (both ways) for the schemes that sign one (Standard Webhooks and
// Stripe): both recommend five minutes.
const DefaultTolerance = 5 * time.Minute

// maxDeliveryID caps a provider's delivery ID: the relay's event IDs are
// <source>:<delivery ID>:<target> and must fit the outbox's ID limit.
const maxDeliveryID = 128

// Errors of signature verification. Every one of them makes the relay answer
// 401 without storing anything.
var (
	errNoSignature   = errors.New("no signature header")
	errBadSignature  = errors.New("signature does not match")
	errBadHeader     = errors.New("malformed signature header")
	errStale         = errors.New("timestamp outside the tolerance")
	errNoDeliveryID  = errors.New("no delivery ID")
	errBadDeliveryID = errors.New("delivery ID is too long or not printable")
)

// inbound is a verified delivery from a provider.
type inbound struct {
	// DeliveryID is the provider's ID of this delivery, the same on every
	// redelivery of it.
	DeliveryID string
	// Type is the provider's event type when the scheme carries one
	// (X-GitHub-Event, the "type" of a Stripe or Standard Webhooks payload),
	// else empty.
	Type string
}

// verifier checks one provider's signature scheme.
type verifier interface {
	// verify checks the signature of a request with these headers and body
	// at time now and returns what the relay needs to know about it.
	verify(h http.Header, body []byte, now time.Time) (inbound, error)
}

// newVerifier returns the verifier of scheme with the given secrets (any of
// them may match: several are configured while a secret is rotated).
func newVerifier(scheme string, secrets []string, tolerance time.Duration) (verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret")
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	switch scheme {
	case SchemeStandardWebhooks:
		return newStandardWebhooks(secrets, tolerance)
	case SchemeGitHub:
		v := &github{}
		for _, s := range secrets {
			v.keys = append(v.keys, []byte(s))
		}
		return v, nil
	case SchemeStripe:
		v := &stripe{tolerance: tolerance}
		for _, s := range secrets {
			v.keys = append(v.keys, []byte(s))
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown scheme %q (want %s, %s or %s)", scheme, SchemeStandardWebhooks, SchemeGitHub, SchemeStripe)
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// checkID validates a provider's delivery ID.
func checkID(id string) error {
	if id == "" {
		return errNoDeliveryID
	}
	if len(id) > maxDeliveryID || !utf8.ValidString(id) {
		return errBadDeliveryID
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return errBadDeliveryID
		}
	}
	return nil
}

// checkTime parses a unix-seconds timestamp and checks it against now.
func checkTime(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errBadHeader
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > tolerance || d < -tolerance {
		return errStale
	}
	return nil
}

// standardWebhooks verifies https://www.standardwebhooks.com signatures with
// the verifier of httpsink, the package that signs the relay's own
// deliveries.
type standardWebhooks struct {
	v *httpsink.Verifier
}

func newStandardWebhooks(secrets []string, tolerance time.Duration) (*standardWebhooks, error) {
	v, err := httpsink.NewVerifier(secrets, tolerance)
	if err != nil {
		var ce *httpsink.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		// Field is Secrets[i]: name the secret as the other schemes do.
		n := strings.TrimSuffix(strings.TrimPrefix(ce.Field, "Secrets["), "]")
		if i, aerr := strconv.Atoi(n); aerr == nil {
			return nil, fmt.Errorf("secret %d: a standard-webhooks secret %s", i+1, ce.Reason)
		}
		return nil, errors.New(ce.Reason)
	}
	return &standardWebhooks{v: v}, nil
}

func (v *standardWebhooks) verify(h http.Header, body []byte, now time.Time) (inbound, error) {
	if err := v.v.Verify(h, body, now); err != nil {
		switch {
		case errors.Is(err, httpsink.ErrSignatureMissing):
			return inbound{}, errNoSignature
		case errors.Is(err, httpsink.ErrSignatureHeaders):
			return inbound{}, errBadHeader
		case errors.Is(err, httpsink.ErrTimestampOutOfTolerance):
			return inbound{}, errStale
		default:
			return inbound{}, errBadSignature
		}
	}
	// Checked after the signature matched: an unsigned ID is never used.
	id := h.Get("webhook-id")
	if err := checkID(id); err != nil {
		return inbound{}, err
	}
	// The payload's "type" (Standard Webhooks' recommended envelope) names
	// the event type, when it has one.
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body, &ev) != nil || checkID(ev.Type) != nil {
		ev.Type = ""
	}
	return inbound{DeliveryID: id, Type: ev.Type}, nil
}

// github verifies GitHub's X-Hub-Signature-256.
type github struct {
	keys [][]byte
}

func (v *github) verify(h http.Header, body []byte, _ time.Time) (inbound, error) {
	sig := h.Get("X-Hub-Signature-256")
	if sig == "" {
		return inbound{}, errNoSignature
	}
	hx, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return inbound{}, errBadHeader
	}
	got, err := hex.DecodeString(hx)
	if err != nil {
		return inbound{}, errBadHeader
	}
	matched := false
	for _, k := range v.keys {
		if hmac.Equal(got, mac(k, body)) {
			matched = true
		}
	}
	if !matched {
		return inbound{}, errBadSignature
	}
	// GitHub signs the body only: the delivery ID header is not covered by
	// the signature. A forger who replays a captured body under a new ID gets
	// the same payload delivered again, which is what a redelivery is too;
	// receivers that must not act twice dedup on the payload's own IDs.
	id := h.Get("X-GitHub-Delivery")
	if err := checkID(id); err != nil {
		return inbound{}, err
	}
	typ := h.Get("X-GitHub-Event")
	if checkID(typ) != nil {
		typ = ""
	}
	return inbound{DeliveryID: id, Type: typ}, nil
}

// stripe verifies Stripe's Stripe-Signature.
type stripe struct {
	keys      [][]byte
	tolerance time.Duration
}

// parseStripeHeader splits "t=...,v1=...,v1=...,v0=..." into the timestamp
// and the v1 signatures (other schemes are ignored, as Stripe's libraries do).
func parseStripeHeader(s string) (ts string, v1 [][]byte, err error) {
	for item := range strings.SplitSeq(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return "", nil, errBadHeader
		}
		switch k {
		case "t":
			if ts != "" {
				return "", nil, errBadHeader
			}
			ts = val
		case "v1":
			b, err := hex.DecodeString(val)
			if err != nil {
				continue
			}
			v1 = append(v1, b)
		}
	}
	if ts == "" {
		return "", nil, errBadHeader
	}
	return ts, v1, nil
}

func (v *stripe) verify(h http.Header, body []byte, now time.Time) (inbound, error) {
	hdr := h.Get("Stripe-Signature")
	if hdr == "" {
		return inbound{}, errNoSignature
	}
	ts, sigs, err := parseStripeHeader(hdr)
	if err != nil {
		return inbound{}, err
	}
	if len(sigs) == 0 {
		return inbound{}, errBadSignature
	}
	if err := checkTime(ts, now, v.tolerance); err != nil {
		return inbound{}, err
	}
	matched := false
	for _, k := range v.keys {
		want := mac(k, []byte(ts), []byte{'.'}, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				matched = true
			}
		}
	}
	if !matched {
		return inbound{}, errBadSignature
	}
	// The event ID is inside the signed body and stays the same when Stripe
	// retries the event.
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return inbound{}, errNoDeliveryID
	}
	if err := checkID(ev.ID); err != nil {
		return inbound{}, err
	}
	if checkID(ev.Type) != nil {
		ev.Type = ""
	}
	return inbound{DeliveryID: ev.ID, Type: ev.Type}, nil
}
