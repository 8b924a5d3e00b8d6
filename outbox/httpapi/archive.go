package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// archiveSearcher is the optional capability of a Backend that keeps
// delivered events (GET /v1/archive), as *outbox.Outbox does.
type archiveSearcher interface {
	SearchArchive(ctx context.Context, q outbox.ArchiveQuery) ([]outbox.ArchivedEvent, string, error)
}

// archivedOut is one archived delivery as GET /v1/archive returns it: the
// event as it was delivered, its payload as the event object gives it
// (JSON when it is valid JSON, else base64), and when it was delivered.
type archivedOut struct {
	eventOut
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 string            `json:"payload_base64,omitempty"`
	Deliveries    int               `json:"deliveries"`
	DeliveredAt   string            `json:"delivered_at"`
}

func toArchivedOut(a *outbox.ArchivedEvent) archivedOut {
	out := archivedOut{eventOut: toOut(&a.Event), Headers: maps.Clone(a.Headers), Deliveries: a.Deliveries,
		DeliveredAt: formatTime(a.DeliveredAt)}
	switch {
	case len(a.Payload) == 0:
	case json.Valid(a.Payload):
		out.Payload = json.RawMessage(a.Payload)
	default:
		out.PayloadBase64 = base64.StdEncoding.EncodeToString(a.Payload)
	}
	return out
}

// archiveParams are the query parameters of GET /v1/archive.
var archiveParams = []string{"topic", "endpoint", "key_prefix", "from", "to", "cursor", "limit"}

// archive serves GET /v1/archive: a page of the kept delivered events.
func (h *handler) archive(w http.ResponseWriter, r *http.Request) {
	as, ok := h.o.(archiveSearcher)
	if !ok {
		h.fail(w, r, errorf(http.StatusNotFound, "this server keeps no archive of delivered events"), false)
		return
	}
	q, err := archiveQuery(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	evs, next, err := as.SearchArchive(r.Context(), q)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	out := make([]archivedOut, len(evs))
	for i := range evs {
		out[i] = toArchivedOut(&evs[i])
	}
	writeJSON(w, http.StatusOK, struct {
		Events []archivedOut `json:"events"`
		Next   string        `json:"next"`
	}{out, next})
}

// archiveQuery reads and checks the query of GET /v1/archive.
func archiveQuery(r *http.Request) (outbox.ArchiveQuery, error) {
	v := r.URL.Query()
	for name := range v {
		if !slices.Contains(archiveParams, name) {
			return outbox.ArchiveQuery{}, errorf(http.StatusBadRequest, "unknown query parameter "+strconv.Quote(name)+
				" (known: topic, endpoint, key_prefix, from, to, cursor, limit)")
		}
	}
	q := outbox.ArchiveQuery{Topic: v.Get("topic"), Endpoint: v.Get("endpoint"), KeyPrefix: v.Get("key_prefix"), After: v.Get("cursor")}
	if q.Topic != "" {
		if err := outbox.ValidateTopicPattern(q.Topic); err != nil {
			return q, errorf(http.StatusBadRequest, "topic: "+quoteShort(q.Topic)+": "+err.Error())
		}
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		s := v.Get(t.name)
		if s == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, errorf(http.StatusBadRequest, t.name+": must be an RFC 3339 time, got "+quoteShort(s))
		}
		*t.dst = tm
	}
	if !q.From.IsZero() && !q.To.IsZero() && q.To.Before(q.From) {
		return q, errorf(http.StatusBadRequest, "to: must not be before from")
	}
	n, err := limitParam(v.Get("limit"))
	q.Limit = n
	return q, err
}
