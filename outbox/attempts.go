package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outbox/outbox/internal/engine"
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

// IsLoggedHeader reports whether the attempt log keeps a response header of
// that name (any case): Content-Type, Content-Length, Content-Encoding,
// Retry-After, Location, Date and Server. Set-Cookie, authentication
// challenges and every other header are never kept.
func IsLoggedHeader(name string) bool {
	return engine.LoggedHeader(name)
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

// validateAttemptLog checks the attempt log's fields of a Config.
func (c Config) validateAttemptLog() error {
	if c.AttemptExcerptBytes > MaxAttemptExcerptBytes {
		return &ConfigError{Field: "AttemptExcerptBytes", Reason: fmt.Sprintf("must not exceed %d", MaxAttemptExcerptBytes)}
	}
	return nil
}
