package httpapi

import (
	"bytes"
	"net/http"

	"github.com/outboxd/outbox/outbox"
)

// breakerOut is an endpoint's circuit breaker as the API returns it.
type breakerOut struct {
	// State is "closed", "open" or "half-open".
	State string `json:"state"`
	// OpenedAt is when it last opened, Until when it half-opens.
	OpenedAt string `json:"opened_at,omitempty"`
	Until    string `json:"until,omitempty"`
	// Opens counts its consecutive openings.
	Opens int `json:"opens,omitempty"`
}

func toBreakerOut(e outbox.EndpointState) breakerOut {
	return breakerOut{
		State:    e.Breaker.String(),
		OpenedAt: formatTime(e.BreakerOpenedAt),
		Until:    formatTime(e.BreakerUntil),
		Opens:    e.BreakerOpens,
	}
}

// rateLimitOut is an endpoint's rate limit as the API returns it.
type rateLimitOut struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// retryIn is the optional body of POST /v1/endpoints/{name}/retry.
type retryIn struct {
	// Rate is the pace, in events per second (0: the default, 100).
	Rate float64 `json:"rate"`
}

// retryEndpoint serves POST /v1/endpoints/{name}/retry: the endpoint's
// breaker closes, its throttle is lifted, and its pending events become
// due now, paced.
func (h *handler) retryEndpoint(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := h.readBody(w, r, true)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	var in retryIn
	err = decodeOptionalObject(b.b, &in, `body must be an object such as {"rate": 50}`)
	b.release()
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	n, err := h.o.RetryEndpoint(r.Context(), name, in.Rate)
	if err != nil {
		h.fail(w, r, notFound(err, "endpoint", name), false)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		Retried int `json:"retried"`
	}{n})
}

// decodeOptionalObject decodes an optional JSON object body into v, strictly
// (unknown fields and invalid text are errors); an empty body leaves v as it
// is. notObject is the error for a body that is not an object.
func decodeOptionalObject(body []byte, v any, notObject string) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
		return errorf(http.StatusBadRequest, notObject)
	}
	if err := decodeStrict(body, v); err != nil {
		return decodeError(err, "")
	}
	return checkRaw(body, 0, "", "")
}
