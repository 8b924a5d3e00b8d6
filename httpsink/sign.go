package httpsink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// secretPrefix starts a Standard Webhooks signing secret.
const secretPrefix = "whsec_"

// decodeSecret decodes a "whsec_<base64>" secret into its key bytes.
func decodeSecret(s string) ([]byte, string) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, `must start with "whsec_" followed by the base64 key`
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return nil, "the part after whsec_ is not valid base64"
	}
	if len(key) < 16 {
		return nil, "the key is shorter than 16 bytes (Standard Webhooks asks for 24 to 64)"
	}
	return key, ""
}

// signingKey is a decoded secret with a pool of keyed HMACs: keying one
// costs two SHA-256 blocks and a few allocations, on every attempt otherwise.
type signingKey struct {
	macs sync.Pool // of hash.Hash, keyed, reset
	// until is when a retiring secret stops signing; zero: never.
	until time.Time
}

func newSigningKey(key []byte, until time.Time) *signingKey {
	k := &signingKey{until: until}
	k.macs.New = func() any { return hmac.New(sha256.New, key) }
	return k
}

// signature returns the value of the webhook-signature header: "v1,<base64
// HMAC-SHA256 of id.timestamp.payload>" for each key, space-separated, as
// Standard Webhooks specifies (several keys while a secret is rotated). A
// key whose until is not after now is skipped.
func signature(keys []*signingKey, id string, ts int64, payload []byte, now time.Time) string {
	var tsb [20]byte
	t := strconv.AppendInt(tsb[:0], ts, 10)
	var sb strings.Builder
	sb.Grow(len(keys) * 48)
	var sum [sha256.Size]byte
	var enc [44]byte // base64 of 32 bytes
	for _, k := range keys {
		if !k.until.IsZero() && !now.Before(k.until) {
			continue
		}
		m := k.macs.Get().(hash.Hash)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write(t)
		m.Write([]byte{'.'})
		m.Write(payload)
		base64.StdEncoding.Encode(enc[:], m.Sum(sum[:0]))
		m.Reset()
		k.macs.Put(m)
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.Write(enc[:])
	}
	return sb.String()
}
