package httpsink

import (
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/outboxd/outbox/outbox"
)

// What the sink returns for the outbox's attempt log (Delivery.LogResponse):
// the response headers outbox.IsLoggedHeader accepts, and up to
// Delivery.ExcerptBytes of the body whatever the outcome, as received. The
// request's secrets are cut out of both: the endpoint's signing secrets and
// header values, the event's credential headers and the request's
// signature, should a receiver echo them.

// maxLogExcerpt bounds the body read for the attempt log, whatever the
// Delivery asks.
const maxLogExcerpt = outbox.MaxAttemptExcerptBytes

// minSecretLen is the shortest header value treated as a secret: shorter
// ones ("json", "1") would blank out ordinary text.
const minSecretLen = 8

// secretsOf returns the texts that must not reach the attempt log from an
// endpoint: its signing secrets (as configured and their key part) and its
// header values.
func secretsOf(e Endpoint) []string {
	var out []string
	all := slices.Clone(e.Secrets)
	for _, rs := range e.RetiringSecrets {
		all = append(all, rs.Secret)
	}
	for _, s := range all {
		out = append(out, s)
		if b64, ok := strings.CutPrefix(s, secretPrefix); ok && len(b64) >= minSecretLen {
			out = append(out, b64)
		}
	}
	for _, v := range e.Headers {
		if len(v) >= minSecretLen {
			out = append(out, v)
			if _, cred, ok := strings.Cut(v, " "); ok && len(cred) >= minSecretLen {
				out = append(out, cred) // "Bearer <token>": the token alone
			}
		}
	}
	return out
}

// credentialHeader reports whether an event header of that name carries a
// credential, whose value must not reach the attempt log.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "secret", "key", "cookie", "signature", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// logSecrets returns the texts to cut from this call's attempt log record.
func (c *call) logSecrets(req http.Header) []string {
	out := c.ep.secrets
	for k, v := range c.d.Headers {
		if credentialHeader(k) && len(v) >= minSecretLen {
			out = append(out[:len(out):len(out)], v)
		}
	}
	if sig := req.Get("Webhook-Signature"); sig != "" {
		out = append(out[:len(out):len(out)], sig)
		for _, part := range strings.Fields(sig) {
			if _, b64, ok := strings.Cut(part, ","); ok && len(b64) >= minSecretLen {
				out = append(out, b64)
			}
		}
	}
	return out
}

// redactAll replaces every secret in s.
func redactAll(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// logResponse fills r's Body and Header for the attempt log from resp; want
// is how many body bytes to keep.
func (c *call) logResponse(r *outbox.Result, resp *http.Response, want int) {
	var sent http.Header
	if resp.Request != nil {
		sent = resp.Request.Header
	}
	secrets := c.logSecrets(sent)
	for k, vs := range resp.Header {
		if len(vs) > 0 && outbox.IsLoggedHeader(k) {
			if r.Header == nil {
				r.Header = make(map[string]string, 4)
			}
			r.Header[k] = redactAll(vs[0], secrets)
		}
	}
	want = min(want, maxLogExcerpt)
	if want <= 0 {
		return
	}
	// Read past the excerpt by the longest secret, so that one cut by the
	// excerpt's end is still recognised and removed.
	extra := 0
	for _, s := range secrets {
		extra = max(extra, len(s))
	}
	bp, _ := c.s.excerptBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer c.s.excerptBufs.Put(bp)
	if cap(*bp) < want+extra {
		*bp = make([]byte, want+extra)
	}
	buf := (*bp)[:want+extra]
	n, _ := io.ReadFull(resp.Body, buf)
	r.Body = redactExcerpt(string(buf[:n]), want, secrets)
}

// redactExcerpt returns the first want bytes of s with every secret that
// starts in them replaced, whole, by "xxxxx" (s holds enough bytes past
// want for the longest secret): what is cut is decided on the received
// bytes, so a replacement never pulls later bytes into the excerpt.
func redactExcerpt(s string, want int, secrets []string) string {
	type span struct{ from, to int }
	var spans []span
	for _, sec := range secrets {
		for i := 0; sec != "" && i < want; {
			j := strings.Index(s[i:], sec)
			if j < 0 || i+j >= want {
				break
			}
			spans = append(spans, span{i + j, i + j + len(sec)})
			i += j + len(sec)
		}
	}
	if len(spans) == 0 {
		return s[:min(want, len(s))]
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	pos := 0
	for _, sp := range spans {
		if sp.to <= pos {
			continue // inside one already replaced
		}
		if sp.from >= pos {
			b.WriteString(s[pos:sp.from])
			b.WriteString(redacted)
		}
		pos = sp.to // an overlapping one extends the replaced run
	}
	if pos < want {
		b.WriteString(s[pos:min(want, len(s))])
	}
	return b.String()
}
