package httpapi

import (
	"encoding/base64"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// attemptsOut is the answer of GET /v1/events/{id}/attempts.
type attemptsOut struct {
	ID       string       `json:"id"`
	Attempts []attemptOut `json:"attempts"`
}

// attemptOut is one attempt as the API shows it.
type attemptOut struct {
	// Attempt numbers the event's logged attempts from 1 (it goes on across
	// replays); Delivery is the delivery number the sink saw.
	Attempt    uint64       `json:"attempt"`
	Delivery   int          `json:"delivery"`
	Endpoint   string       `json:"endpoint,omitempty"`
	StartedAt  time.Time    `json:"started_at"`
	DurationMS float64      `json:"duration_ms"`
	Outcome    string       `json:"outcome"`
	Status     int          `json:"status"`
	Error      string       `json:"error,omitempty"`
	Response   *responseOut `json:"response,omitempty"`
}

// responseOut is what the log kept of a response: the safe headers and the
// body's excerpt, as text when it is valid UTF-8 (body), else as base64
// (body_base64); never both.
type responseOut struct {
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
}

// attempts serves GET /v1/events/{id}/attempts; with ?endpoint= only the
// attempts of the topic event's delivery to that endpoint.
func (h *handler) attempts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	endpoint, one, err := endpointParam(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	as, err := h.o.Attempts(r.Context(), id)
	if err != nil {
		h.fail(w, r, notFound(err, "event", id), false)
		return
	}
	out := attemptsOut{ID: id, Attempts: make([]attemptOut, 0, len(as))}
	for _, a := range as {
		if one && a.Endpoint != endpoint {
			continue
		}
		out.Attempts = append(out.Attempts, toAttemptOut(&a))
	}
	writeJSON(w, http.StatusOK, out)
}

func toAttemptOut(a *outbox.Attempt) attemptOut {
	o := attemptOut{
		Attempt:    a.Seq,
		Delivery:   a.Delivery,
		Endpoint:   a.Endpoint,
		StartedAt:  a.StartedAt.UTC(),
		DurationMS: float64(a.Duration.Microseconds()) / 1000,
		Outcome:    a.Action.String(),
		Status:     a.Status,
		Error:      a.Error,
	}
	if len(a.Header) > 0 || len(a.Body) > 0 {
		o.Response = &responseOut{Headers: a.Header}
		switch {
		case len(a.Body) == 0:
		case utf8.Valid(a.Body):
			s := string(a.Body)
			o.Response.Body = &s
		default:
			o.Response.BodyBase64 = base64.StdEncoding.EncodeToString(a.Body)
		}
	}
	return o
}
