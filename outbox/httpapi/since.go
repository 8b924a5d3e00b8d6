package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// sinceBackfiller is the optional capability of a Backend that backfills
// a new subscription from its archive and its pending events
// (POST and PUT /v1/endpoints/{name} with "since"), as *outbox.Outbox does.
type sinceBackfiller interface {
	BackfillSince(s outbox.Subscription, since time.Time, rate float64) (string, error)
}

// sinceIn is the backfill a POST or PUT /v1/endpoints/{name} asks for: the
// events since at (zero: none), rate a second.
type sinceIn struct {
	at   time.Time
	rate float64
}

// readSince checks the body's since and backfill_rate. A since the Backend
// cannot serve is refused before anything changes.
func (h *handler) readSince(in *endpointSpecIn) (sinceIn, error) {
	if in.Since == "" {
		if in.BackfillRate != 0 {
			return sinceIn{}, errorf(http.StatusBadRequest, "backfill_rate: only with since")
		}
		return sinceIn{}, nil
	}
	if _, ok := h.o.(sinceBackfiller); !ok {
		return sinceIn{}, errorf(http.StatusBadRequest, "since: this server keeps no archive of delivered events to backfill from")
	}
	at, err := time.Parse(time.RFC3339Nano, in.Since)
	if err != nil {
		return sinceIn{}, errorf(http.StatusBadRequest, "since: must be an RFC 3339 time, got "+strconv.Quote(in.Since))
	}
	if in.BackfillRate != 0 {
		if err := outbox.ValidateRate(in.BackfillRate); err != nil {
			return sinceIn{}, errorf(http.StatusBadRequest, "backfill_rate: "+err.Error())
		}
	}
	return sinceIn{at: at, rate: in.BackfillRate}, nil
}

// backfillSince starts the backfill since asks for, once the endpoint's
// subscription is in force, and returns its ID ("" when none was asked).
func (h *handler) backfillSince(name string, spec EndpointSpec, since sinceIn) (string, error) {
	if since.at.IsZero() {
		return "", nil
	}
	b := h.o.(sinceBackfiller) // checked by readSince
	return b.BackfillSince(outbox.Subscription{Endpoint: name, Topics: spec.Topics, Headers: spec.Filter}, since.at, since.rate)
}
