package httpapi

import "time"

// UnavailableError is an error a Backend returns when it cannot do what was
// asked now, for a reason its client may be told: the handler answers 503
// with {"error": Reason}, and a Retry-After header (whole seconds, rounded
// up) when RetryAfter is positive. Nothing of the request may have been
// done: a client sends the same request again later. outboxd returns it in
// Kafka group mode when the brokers did not acknowledge the events of a
// POST /v1/events.
type UnavailableError struct {
	// Reason is the answer's error message. It must not hold secrets.
	Reason string
	// RetryAfter, when positive, is sent as Retry-After.
	RetryAfter time.Duration
	// Err is the underlying error, for the server's log and errors.Is.
	Err error
}

// Error implements error.
func (e *UnavailableError) Error() string { return e.Reason }

// Unwrap returns Err.
func (e *UnavailableError) Unwrap() error { return e.Err }

// retryAfterSeconds is RetryAfter in whole seconds, rounded up; 0 for none.
func (e *UnavailableError) retryAfterSeconds() int {
	if e.RetryAfter <= 0 {
		return 0
	}
	return int((e.RetryAfter + time.Second - 1) / time.Second)
}
