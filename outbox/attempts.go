package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/store"
)

// Attempt is one delivery attempt of an event, as the attempt log keeps it
// (see Outbox.Attempts).
type Attempt struct {
	// Seq numbers the event's logged attempts from 1, in order; it goes on
	// across replays. The log keeps an event's last AttemptsPerEvent.
	Seq uint64
	// Delivery is the Delivery.Attempt the sink saw (parks included).
	Delivery int
	// Endpoint is the endpoint of the delivery the attempt belongs to, for
	// a topic event (whose deliveries Attempts lists together); "" for an
	// event with a Destination.
	Endpoint string
	// StartedAt is when the attempt began (the outbox's clock, UTC), and
	// Duration how long the Sink took.
	StartedAt time.Time
	Duration  time.Duration
	// Action is what the outbox made of the answer.
	Action Action
	// Status is the HTTP status, 0 when no response was received.
	Status int
	// Error is the transport error, "" when there was none. Like
	// Result.Err it carries no credentials.
	Error string
	// Header holds the response headers kept: only those IsLoggedHeader
	// accepts, under their canonical names. Nil when there are none.
	Header map[string]string
	// Body is the start of the response body (at most
	// Config.AttemptExcerptBytes); nil when none was kept. It may be any
	// bytes, not only text.
	Body []byte
}

// AttemptsPerEvent is the most attempts the log keeps of one event: an
// event retried or parked for days keeps its latest ones.
const AttemptsPerEvent = store.AttemptsPerEvent

// MaxAttemptExcerptBytes is the largest Config.AttemptExcerptBytes.
const MaxAttemptExcerptBytes = store.MaxAttemptBody

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

// IsLoggedHeader reports whether the attempt log keeps a response header of
// that name (any case): Content-Type, Content-Length, Content-Encoding,
// Retry-After, Location, Date and Server. Set-Cookie, authentication
// challenges and every other header are never kept.
func IsLoggedHeader(name string) bool {
	return loggedHeaders[textproto.CanonicalMIMEHeaderKey(name)]
}

// Attempts returns the logged attempts of the event with that ID, oldest
// first (empty when it has none yet): of a pending or dead event, and of a
// delivered or deleted one while its tombstone lasts. ErrNotFound
// otherwise. The log is local to this file: a store rebuilt from a
// changelog has none of the attempts made before. Of a topic event it
// returns the attempts of every delivery, each with its Endpoint, in the
// order they started.
func (o *Outbox) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	if err := o.enter(); err != nil {
		return nil, err
	}
	defer o.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	as, err := o.st.Attempts(id)
	if errors.Is(err, store.ErrNotFound) && validEventID(id) {
		out, ok, gerr := o.attemptsOfGroup(id)
		if gerr != nil {
			return nil, mapErr("attempts", id, gerr)
		}
		if ok {
			return out, nil
		}
	}
	if err != nil {
		return nil, mapErr("attempts", id, err)
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = attemptFromStore(a, "")
	}
	return out, nil
}

// attemptFromStore converts a logged attempt of the delivery to endpoint
// ("" for an event with a Destination).
func attemptFromStore(a store.Attempt, endpoint string) Attempt {
	act, _ := ParseAction(a.Action)
	return Attempt{Seq: a.Seq, Delivery: a.Delivery, Endpoint: endpoint, StartedAt: a.StartedAt, Duration: a.Duration,
		Action: act, Status: a.Status, Error: a.Error, Header: a.Headers, Body: a.Body}
}

// logsAttempts reports whether the outbox keeps an attempt log.
func (c *Config) logsAttempts() bool { return !c.NoAttemptLog }

// excerptBytes is how much of a response body the attempt log keeps.
func (c *Config) excerptBytes() int {
	if c.NoAttemptLog || c.AttemptExcerptBytes < 0 {
		return 0
	}
	return c.AttemptExcerptBytes
}

// attemptOf is the attempt log record of the job's attempt, nil when the
// log is off. Only the logged headers are kept, whatever the sink returned,
// and the body is cut to the configured excerpt.
func (o *Outbox) attemptOf(j *job) *store.Attempt {
	if !o.cfg.logsAttempts() {
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
	if n := o.cfg.excerptBytes(); n > 0 && len(res.Body) > 0 {
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
		if IsLoggedHeader(k) {
			if out == nil {
				out = make(map[string]string, len(loggedHeaders))
			}
			out[textproto.CanonicalMIMEHeaderKey(k)] = truncate(v, maxLoggedHeaderValue)
		}
	}
	return out
}

// validateAttemptLog checks the attempt log's fields of a Config.
func (c Config) validateAttemptLog() error {
	if c.AttemptExcerptBytes > MaxAttemptExcerptBytes {
		return &ConfigError{Field: "AttemptExcerptBytes", Reason: fmt.Sprintf("must not exceed %d", MaxAttemptExcerptBytes)}
	}
	return nil
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
