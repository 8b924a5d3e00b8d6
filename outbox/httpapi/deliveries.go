package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/outboxd/outbox/outbox"
)

// deliveryOut is one delivery of a topic event as the API returns it, in
// the "deliveries" of GET /v1/events/{id}.
type deliveryOut struct {
	Endpoint      string `json:"endpoint"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	LastStatus    int    `json:"last_status"`
	LastError     string `json:"last_error"`
	DeadReason    string `json:"dead_reason,omitempty"`
	DeadAt        string `json:"dead_at,omitempty"`
}

// toDeliveriesOut converts the deliveries of a topic event; nil for none.
func toDeliveriesOut(ds []outbox.DeliveryStatus) []deliveryOut {
	if len(ds) == 0 {
		return nil
	}
	out := make([]deliveryOut, len(ds))
	for i, d := range ds {
		out[i] = deliveryOut{
			Endpoint:   d.Endpoint,
			State:      d.State.String(),
			Attempts:   d.Attempts,
			LastStatus: d.LastStatus,
			LastError:  d.LastError,
			DeadReason: d.DeadReason,
			DeadAt:     formatTime(d.DeadAt),
		}
		if d.State == outbox.StatePending {
			out[i].NextAttemptAt = formatTime(d.NextAttemptAt)
		}
	}
	return out
}

// stateOf is the state the API shows of an event: "unrouted" for a topic
// event kept pending until an endpoint subscribes to its topic (it has no
// endpoint and no deliveries), else its State.
func stateOf(ev *outbox.Event) string {
	if ev.State == outbox.StatePending && ev.Topic != "" && ev.Endpoint == "" && len(ev.DeliveryStates) == 0 {
		return "unrouted"
	}
	return ev.State.String()
}

// endpointParam reads the optional "endpoint" query parameter of
// DELETE /v1/events/{id} and POST /v1/events/{id}/replay: one says whether
// it was given, so that the call acts on that one delivery. Any other
// parameter is refused, so that a misspelt "endpoint" never acts on the
// whole event.
func endpointParam(r *http.Request) (endpoint string, one bool, err error) {
	q := r.URL.Query()
	for name := range q {
		if name != "endpoint" {
			return "", false, errorf(http.StatusBadRequest, "unknown query parameter "+strconv.Quote(name)+" (known: endpoint)")
		}
	}
	vs, one := q["endpoint"]
	switch {
	case !one:
		return "", false, nil
	case len(vs) > 1:
		return "", false, errorf(http.StatusBadRequest, "endpoint: given more than once; a call acts on one delivery")
	case vs[0] == "":
		return "", false, errorf(http.StatusBadRequest, "endpoint: must not be empty (leave it out to act on the whole event)")
	case !outbox.ValidText(vs[0]):
		return "", false, errorf(http.StatusBadRequest, "endpoint: must be valid UTF-8 without control characters")
	}
	return vs[0], true, nil
}

// topicParam checks a topic given as a filter: "" (any topic) or a valid
// topic name.
func topicParam(topic string) error {
	if topic == "" {
		return nil
	}
	if err := outbox.ValidateTopic(topic); err != nil {
		return errorf(http.StatusBadRequest, "topic: "+quoteShort(topic)+": "+err.Error())
	}
	return nil
}

// deliveryNotFound gives ErrNotFound a message naming the delivery.
func deliveryNotFound(err error, what, id, endpoint string) error {
	if errors.Is(err, outbox.ErrNotFound) {
		return errorf(http.StatusNotFound, what+" of event "+strconv.Quote(id)+" to endpoint "+strconv.Quote(endpoint)+" not found")
	}
	return err
}

// deleteDelivery serves DELETE /v1/events/{id}?endpoint=: it drops the
// pending or dead delivery of topic event id to endpoint; the event's
// other deliveries are untouched.
func (h *handler) deleteDelivery(w http.ResponseWriter, r *http.Request, id, endpoint string) {
	if err := h.o.DeleteDelivery(r.Context(), id, endpoint); err != nil {
		h.fail(w, r, deliveryNotFound(err, "pending or dead delivery", id, endpoint), false)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// replayDelivery serves POST /v1/events/{id}/replay?endpoint=: it moves the
// dead delivery of topic event id to endpoint back to pending.
func (h *handler) replayDelivery(w http.ResponseWriter, r *http.Request, id, endpoint string) {
	if err := h.o.ReplayDelivery(r.Context(), id, endpoint); err != nil {
		if errors.Is(err, outbox.ErrNotDead) {
			err = errorf(http.StatusConflict, "the delivery of event "+strconv.Quote(id)+" to endpoint "+strconv.Quote(endpoint)+
				" is not dead: only dead deliveries can be replayed")
		}
		h.fail(w, r, deliveryNotFound(err, "delivery", id, endpoint), false)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		ID       string `json:"id"`
		Endpoint string `json:"endpoint"`
		State    string `json:"state"`
	}{id, endpoint, outbox.StatePending.String()})
}
