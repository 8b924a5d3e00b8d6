package httpsink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
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

// signature returns the value of the webhook-signature header: "v1,<base64
// HMAC-SHA256 of id.timestamp.payload>" for each key, space-separated, as
// Standard Webhooks specifies (several keys while a secret is rotated).
func signature(keys [][]byte, id string, ts int64, payload []byte) string {
	var tsb [20]byte
	t := strconv.AppendInt(tsb[:0], ts, 10)
	var sb strings.Builder
	var sum [sha256.Size]byte
	var enc [44]byte // base64 of 32 bytes
	for i, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write(t)
		m.Write([]byte{'.'})
		m.Write(payload)
		base64.StdEncoding.Encode(enc[:], m.Sum(sum[:0]))
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString("v1,")
		sb.Write(enc[:])
	}
	return sb.String()
}
