package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// archiveReplayer is the optional capability of a Backend that replays
// delivered events from its archive (/v1/archive/replay), as
// *outbox.Outbox does.
type archiveReplayer interface {
	StartArchiveReplay(r outbox.ArchiveReplay) (string, error)
	ArchiveReplayStatus(id string) (outbox.ArchiveReplayStatus, error)
	CancelArchiveReplay(id string) error
}

// archiveReplayIn is the body of POST /v1/archive/replay: the search's
// filter, the endpoint to send to (target), the pace and a bound.
type archiveReplayIn struct {
	Topic     string  `json:"topic"`
	Endpoint  string  `json:"endpoint"`
	KeyPrefix string  `json:"key_prefix"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Target    string  `json:"target"`
	Rate      float64 `json:"rate"`
	Limit     int     `json:"limit"`
}

// archiveReplayOut is a replay's progress as the API returns it.
type archiveReplayOut struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Replayed  int    `json:"replayed"`
	Skipped   int    `json:"skipped"`
	Error     string `json:"error,omitempty"`
	StartedAt string `json:"started_at"`
	EndedAt   string `json:"ended_at,omitempty"`
}

func toReplayOut(s outbox.ArchiveReplayStatus) archiveReplayOut {
	return archiveReplayOut{ID: s.ID, State: s.State, Replayed: s.Replayed, Skipped: s.Skipped, Error: s.Error,
		StartedAt: formatTime(s.StartedAt), EndedAt: formatTime(s.EndedAt)}
}

// replayer returns the Backend's replay capability, or answers 404.
func (h *handler) replayer(w http.ResponseWriter, r *http.Request) (archiveReplayer, bool) {
	rp, ok := h.o.(archiveReplayer)
	if !ok {
		h.fail(w, r, errorf(http.StatusNotFound, "this server keeps no archive of delivered events"), false)
	}
	return rp, ok
}

// replayArchive serves POST /v1/archive/replay: it starts a paced replay
// and answers 202 with its progress.
func (h *handler) replayArchive(w http.ResponseWriter, r *http.Request) {
	rp, ok := h.replayer(w, r)
	if !ok {
		return
	}
	b, err := h.readBody(w, r, true)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	var in archiveReplayIn
	err = decodeOptionalObject(b.b, &in, "body must be a replay object")
	b.release()
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	req, err := in.replay()
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	id, err := rp.StartArchiveReplay(req)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	st, err := rp.ArchiveReplayStatus(id)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	writeJSON(w, http.StatusAccepted, toReplayOut(st))
}

// replay checks the body and returns the replay it asks for.
func (in *archiveReplayIn) replay() (outbox.ArchiveReplay, error) {
	req := outbox.ArchiveReplay{Filter: outbox.ArchiveQuery{Topic: in.Topic, Endpoint: in.Endpoint, KeyPrefix: in.KeyPrefix},
		Endpoint: in.Target, Rate: in.Rate, Limit: in.Limit}
	if in.Topic != "" {
		if err := outbox.ValidateTopicPattern(in.Topic); err != nil {
			return req, errorf(http.StatusBadRequest, "topic: "+quoteShort(in.Topic)+": "+err.Error())
		}
	}
	for _, t := range []struct {
		name, s string
		dst     *time.Time
	}{{"from", in.From, &req.Filter.From}, {"to", in.To, &req.Filter.To}} {
		if t.s == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, t.s)
		if err != nil {
			return req, errorf(http.StatusBadRequest, t.name+": must be an RFC 3339 time, got "+strconv.Quote(t.s))
		}
		*t.dst = tm
	}
	switch {
	case in.Limit < 0:
		return req, errorf(http.StatusBadRequest, fmt.Sprintf("limit: %d is out of range: must not be negative", in.Limit))
	case !req.Filter.From.IsZero() && !req.Filter.To.IsZero() && req.Filter.To.Before(req.Filter.From):
		return req, errorf(http.StatusBadRequest, "to: must not be before from")
	}
	return req, nil
}

// archiveReplayStatus serves GET /v1/archive/replay/{id}.
func (h *handler) archiveReplayStatus(w http.ResponseWriter, r *http.Request) {
	rp, ok := h.replayer(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	st, err := rp.ArchiveReplayStatus(id)
	if err != nil {
		h.fail(w, r, notFound(err, "replay", id), false)
		return
	}
	writeJSON(w, http.StatusOK, toReplayOut(st))
}

// cancelArchiveReplay serves DELETE /v1/archive/replay/{id}: the replay
// stores nothing more; the answer is its progress (running until it has
// stopped, then cancelled).
func (h *handler) cancelArchiveReplay(w http.ResponseWriter, r *http.Request) {
	rp, ok := h.replayer(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := rp.CancelArchiveReplay(id); err != nil {
		h.fail(w, r, notFound(err, "replay", id), false)
		return
	}
	st, err := rp.ArchiveReplayStatus(id)
	if err != nil {
		h.fail(w, r, notFound(err, "replay", id), false)
		return
	}
	writeJSON(w, http.StatusOK, toReplayOut(st))
}
