package engine

import (
	"net/textproto"
	"unicode/utf8"

	"github.com/outboxd/outbox/store"
)

// loggedHeaders are the response headers the attempt log keeps: what says
// what the receiver answered and when to come back, never cookies,
// credentials or tracing that may identify users.
var loggedHeaders = map[string]bool{
	"Content-Type":     true,
	"Content-Length":   true,
	"Content-Encoding": true,
	"Retry-After":      true,
	"Location":         true,
	"Date":             true,
	"Server":           true,
}

// LoggedHeader reports whether the attempt log keeps a response header of
// that name (any case).
func LoggedHeader(name string) bool {
	return loggedHeaders[textproto.CanonicalMIMEHeaderKey(name)]
}

// attemptOf is the attempt log record of the job's attempt, nil when the
// log is off. Only the logged headers are kept, whatever the sink returned,
// and the body is cut to the configured excerpt.
func (e *Engine) attemptOf(j *job) *store.Attempt {
	if !e.cfg.LogAttempts {
		return nil
	}
	res := j.res
	a := &store.Attempt{
		Delivery:  j.rec.Deliveries + 1,
		StartedAt: j.begun.UTC(),
		Duration:  j.duration,
		Action:    res.Action.String(),
		Status:    res.Status,
	}
	if res.Err != nil {
		a.Error = truncate(res.Err.Error(), maxErrorBytes)
	}
	if n := e.cfg.ExcerptBytes; n > 0 && len(res.Body) > 0 {
		a.Body = []byte(textCut(res.Body, n))
	}
	a.Headers = loggedOnly(res.Header)
	return a
}

// maxLoggedHeaderValue bounds each header value the attempt log keeps.
const maxLoggedHeaderValue = 512

// loggedOnly returns the headers of h the attempt log keeps, under their
// canonical names, with values cut to maxLoggedHeaderValue. h itself when
// it holds nothing else (the usual answer of a sink that filtered them),
// so that the log costs no copy; the outbox never writes to it.
func loggedOnly(h map[string]string) map[string]string {
	clean := true
	for k, v := range h {
		if !loggedHeaders[k] || len(v) > maxLoggedHeaderValue {
			clean = false
			break
		}
	}
	if clean {
		return h
	}
	var out map[string]string
	for k, v := range h {
		if LoggedHeader(k) {
			if out == nil {
				out = make(map[string]string, len(loggedHeaders))
			}
			out[textproto.CanonicalMIMEHeaderKey(k)] = truncate(v, maxLoggedHeaderValue)
		}
	}
	return out
}

// textCut cuts s to at most n bytes. Text cut in the middle of a character
// (here or by the sink's bounded read) loses the partial character, so that
// it stays text; other bytes are kept as they are.
func textCut(s string, n int) string {
	s = s[:min(n, len(s))]
	if utf8.ValidString(s) {
		return s
	}
	for cut := 1; cut <= utf8.UTFMax-1 && cut < len(s); cut++ {
		if t := s[:len(s)-cut]; utf8.ValidString(t) {
			return t
		}
	}
	return s
}
