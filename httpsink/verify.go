package httpsink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a delivery's webhook-timestamp may be from the
// receiver's clock, either way, when NewVerifier is given no tolerance: the
// five minutes Standard Webhooks recommends.
const DefaultTolerance = 5 * time.Minute

// Verifier checks Standard Webhooks signatures as a receiver does: the ones
// this package's Sink sends, or any provider's that follows the
// specification (standardwebhooks.com). It is safe for concurrent use.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
}

// NewVerifier returns a Verifier that accepts a signature made with any of
// secrets ("whsec_<base64 key>"; several while one is rotated) on a
// delivery whose timestamp is within tolerance of the receiver's clock
// (DefaultTolerance when tolerance is 0 or less). A malformed secret is a
// *ConfigError naming it by position, never quoting it.
func NewVerifier(secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, &ConfigError{Field: "Secrets", Reason: "no secret"}
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	v := &Verifier{tolerance: tolerance}
	for i, s := range secrets {
		key, reason := decodeSecret(s)
		if reason != "" {
			return nil, &ConfigError{Field: fmt.Sprintf("Secrets[%d]", i), Reason: reason}
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Verify checks the webhook-id, webhook-timestamp and webhook-signature
// headers of a delivery of payload received at now. It returns nil when one
// of the "v1," signatures matches one of the secrets and the timestamp is
// within the tolerance; otherwise an error that unwraps to
// ErrSignatureMissing, ErrSignatureHeaders, ErrTimestampOutOfTolerance or
// ErrSignatureMismatch and says why. Signatures are compared in constant
// time; the error never holds a signature or a secret.
func (v *Verifier) Verify(h http.Header, payload []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	switch {
	case sigs == "":
		return fmt.Errorf("%w", ErrSignatureMissing)
	case id == "":
		return fmt.Errorf("%w: no webhook-id header", ErrSignatureHeaders)
	case ts == "":
		return fmt.Errorf("%w: no webhook-timestamp header", ErrSignatureHeaders)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrSignatureHeaders, clip(ts, 32))
	}
	if d := now.Sub(time.Unix(sec, 0)); d > v.tolerance || d < -v.tolerance {
		when := "old"
		if d < 0 {
			when, d = "ahead of this clock", -d
		}
		return fmt.Errorf("%w: webhook-timestamp is %s %s, over the tolerance of %s",
			ErrTimestampOutOfTolerance, d.Round(time.Second), when, v.tolerance)
	}
	var want [sha256.Size]byte
	v1 := 0
	for _, key := range v.keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(payload)
		m.Sum(want[:0])
		for _, s := range strings.Fields(sigs) {
			b64, ok := strings.CutPrefix(s, "v1,")
			if !ok {
				continue // other versions (v1a: asymmetric) are not configured here
			}
			v1++
			got, err := base64.StdEncoding.DecodeString(b64)
			if err == nil && hmac.Equal(got, want[:]) {
				return nil
			}
		}
	}
	if v1 == 0 {
		return fmt.Errorf("%w: webhook-signature has no v1 signature", ErrSignatureMismatch)
	}
	secret := "the secret"
	if len(v.keys) > 1 {
		secret = "any of the secrets"
	}
	return fmt.Errorf("%w: no v1 signature was made with %s", ErrSignatureMismatch, secret)
}
