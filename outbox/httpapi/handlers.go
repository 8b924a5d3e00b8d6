package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// eventOut is an event as the API returns it.
type eventOut struct {
	ID            string `json:"id"`
	Key           string `json:"key"`
	Destination   string `json:"destination"`
	Topic         string `json:"topic,omitempty"`
	Endpoint      string `json:"endpoint,omitempty"`
	State         string `json:"state"`
	Attempts      int    `json:"attempts"`
	CreatedAt     string `json:"created_at,omitempty"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	DeliverAt     string `json:"deliver_at,omitempty"`
	LastStatus    int    `json:"last_status"`
	LastError     string `json:"last_error"`
	DeadReason    string `json:"dead_reason,omitempty"`
	// Deliveries is set for a topic event shown whole (GET /v1/events/{id}).
	Deliveries []deliveryOut `json:"deliveries,omitempty"`
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func toOut(ev *outbox.Event) eventOut {
	out := eventOut{
		ID:          ev.ID,
		Key:         ev.Key,
		Destination: ev.Destination,
		Topic:       ev.Topic,
		Endpoint:    ev.Endpoint,
		State:       stateOf(ev),
		Attempts:    ev.Attempts,
		CreatedAt:   formatTime(ev.CreatedAt),
		DeliverAt:   formatTime(ev.DeliverAt),
		LastStatus:  ev.LastStatus,
		LastError:   ev.LastError,
		DeadReason:  ev.DeadReason,
	}
	if ev.State == outbox.StatePending {
		out.NextAttemptAt = formatTime(ev.NextAttemptAt)
	}
	out.Deliveries = toDeliveriesOut(ev.DeliveryStates)
	return out
}

// isJSON reports whether a Content-Type is application/json (parameters such
// as charset allowed) or a +json type.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// fail answers err: an *apiError with its status, an outbox error mapped to
// its status, a full disk as 503 with Retry-After, anything else as 500
// (logged; the answer does not repeat the error, which may name files).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error, batch bool) {
	if ae, ok := asAPIError(err); ok {
		if ae.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
		}
		writeError(w, ae.status, ae.msg)
		return
	}
	var (
		ve *outbox.ValidationError
		de *outbox.DeletedError
		ue *UnavailableError
	)
	switch {
	case errors.As(err, &ue):
		if s := ue.retryAfterSeconds(); s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
		writeError(w, http.StatusServiceUnavailable, ue.Reason)
	case errors.As(err, &de):
		// Distinct from the content conflict below: the ID is not reused
		// with other content, its event was deleted and will not be sent.
		where := ""
		if batch {
			where = fmt.Sprintf("events[%d]: ", de.Index)
		}
		writeError(w, http.StatusConflict, where+"id "+strconv.Quote(de.ID)+" was deleted by an operator at "+
			formatTime(de.DeletedAt)+"; its ID stays reserved for the tombstone retention")
	case errors.As(err, &ve):
		field := ve.Field
		if batch {
			field = fmt.Sprintf("events[%d].%s", ve.Index, ve.Field)
		}
		// The reason may come from the sink's resolver, prefixed with its
		// package name; the client only needs the reason.
		writeError(w, http.StatusBadRequest, field+": "+strings.TrimPrefix(ve.Reason, "httpsink: "))
	case errors.Is(err, outbox.ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, outbox.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, outbox.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, outbox.ErrNotDead), errors.Is(err, outbox.ErrEndpointDisabled):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, outbox.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "the outbox is shutting down")
	case errors.Is(err, outbox.ErrUnavailable):
		// The database file is damaged: nothing is stored until an operator
		// repairs or restores it. The detail names the file: log it.
		h.cfg.Logger.Error("request refused: the outbox is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the outbox cannot store events now (its database file is damaged); the details are in the server's log")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this answer.
		writeError(w, http.StatusServiceUnavailable, "request cancelled")
	case isStorageFull(err):
		// The commit failed as a whole (the store changes nothing unless it
		// commits), so the same request can be sent again once space is
		// freed. 503 with Retry-After is what clients and load balancers
		// retry; the error names the file, so it is only logged.
		h.cfg.Logger.Error("request failed: out of disk space", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(storageFullRetryAfter))
		writeError(w, http.StatusServiceUnavailable, "the store is out of disk space; nothing was stored or changed, retry later")
	default:
		// The detail (often an I/O error naming the database file) is for
		// the operator's log, not for clients.
		h.cfg.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error; the details are in the server's log")
	}
}

// storageFullRetryAfter is the Retry-After, in seconds, of a 503 answered
// because the disk is full.
const storageFullRetryAfter = 5

// isStorageFull reports whether err comes from a full filesystem or an
// exhausted disk quota.
func isStorageFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// enqueue serves POST /v1/events.
func (h *handler) enqueue(w http.ResponseWriter, r *http.Request) {
	b, err := h.readBody(w, r, false)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	defer b.release()
	body := b.b
	evs, err := decodeEvents(body, limits{maxBatch: h.cfg.MaxBatch, maxPayload: h.cfg.MaxPayloadBytes, maxID: h.cfg.MaxIDBytes,
		now: time.Now()})
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	ids, err := h.o.Enqueue(r.Context(), evs...)
	if err != nil {
		batch := isBatch(body)
		if errors.Is(err, outbox.ErrConflict) {
			err = conflictError(err, evs, batch)
		}
		err = h.tooManyDeliveries(err)
		err = delayField(err, body, batch)
		h.fail(w, r, err, batch)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		IDs []string `json:"ids"`
	}{ids})
}

// conflictError names the event of a refused Enqueue whose ID is taken:
// "events[3].id: ..." once in a batch, "id: ..." for a single event,
// without the wrapping of the outbox's and the store's messages.
func conflictError(err error, evs []outbox.Event, batch bool) error {
	id, ok := outbox.ConflictingID(err)
	first := slices.IndexFunc(evs, func(ev outbox.Event) bool { return ev.ID == id })
	if !ok || first < 0 {
		return errorf(http.StatusConflict, "an event ID is already taken by an event with other content; nothing was stored")
	}
	field := func(i int) string {
		if batch {
			return fmt.Sprintf("events[%d].id", i)
		}
		return "id"
	}
	for j := first + 1; j < len(evs); j++ {
		if evs[j].ID == id && !sameContent(&evs[first], &evs[j]) {
			return errorf(http.StatusConflict, fmt.Sprintf("%s: %q is also the id of events[%d], with other content; nothing was stored",
				field(j), id, first))
		}
	}
	return errorf(http.StatusConflict, fmt.Sprintf("%s: event %q already exists with other content "+
		"(key, destination, topic, method, headers or payload); nothing was stored: send the same content again, or use another id",
		field(first), id))
}

// tooManyDeliveries turns Enqueue's refusal of a request that would create
// too many deliveries into a 413 naming the setting that bounds them, as
// the operator spells it; other errors are returned as they are.
func (h *handler) tooManyDeliveries(err error) error {
	var tm *outbox.TooManyDeliveriesError
	if !errors.As(err, &tm) {
		return err
	}
	return errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request would create %d deliveries "+
		"(one per event with a destination, one per subscribed endpoint of a topic event), over the limit of %d per request set by %s; "+
		"nothing was stored: send fewer events per request", tm.Deliveries, tm.Limit, h.cfg.MaxDeliveriesSetting))
}

// sameContent reports whether a and b carry the same caller-owned content.
func sameContent(a, b *outbox.Event) bool {
	return a.Key == b.Key && a.Destination == b.Destination && a.Topic == b.Topic && a.Method == b.Method &&
		maps.Equal(a.Headers, b.Headers) && bytes.Equal(a.Payload, b.Payload)
}

func isBatch(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// list serves GET /v1/events?state=pending|dead|unrouted&limit=&after=&destination=&topic=.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "state", "limit", "after", "destination", "topic":
		default:
			h.fail(w, r, errorf(http.StatusBadRequest, "unknown query parameter "+strconv.Quote(name)+
				" (known: state, limit, after, destination, topic)"), false)
			return
		}
	}
	opt := outbox.ListOptions{State: outbox.StatePending, After: q.Get("after"), Limit: DefaultListLimit,
		Destination: q.Get("destination"), Topic: q.Get("topic")}
	switch s := q.Get("state"); s {
	case "", "pending":
	case "dead":
		opt.State = outbox.StateDead
	case "unrouted":
		opt.State, opt.Unrouted = 0, true
	default:
		h.fail(w, r, errorf(http.StatusBadRequest, "state: must be pending, dead or unrouted, got "+strconv.Quote(s)), false)
		return
	}
	if err := topicParam(opt.Topic); err != nil {
		h.fail(w, r, err, false)
		return
	}
	n, err := limitParam(q.Get("limit"))
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	opt.Limit = n
	evs, next, err := h.o.List(r.Context(), opt)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	out := make([]eventOut, len(evs))
	for i := range evs {
		out[i] = toOut(&evs[i])
	}
	writeJSON(w, http.StatusOK, struct {
		Events []eventOut `json:"events"`
		Next   string     `json:"next"`
	}{out, next})
}

// get serves GET /v1/events/{id}.
func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ev, err := h.o.Get(r.Context(), id)
	if err != nil {
		h.fail(w, r, notFound(err, "event", id), false)
		return
	}
	writeJSON(w, http.StatusOK, toOut(&ev))
}

// notFound gives ErrNotFound a message naming what was not found.
func notFound(err error, what, name string) error {
	if errors.Is(err, outbox.ErrNotFound) {
		return errorf(http.StatusNotFound, what+" "+strconv.Quote(name)+" not found")
	}
	return err
}

// delete serves DELETE /v1/events/{id}, and with ?endpoint= the delete of
// one delivery (deliveries.go).
func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	endpoint, one, err := endpointParam(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	if one {
		h.deleteDelivery(w, r, id, endpoint)
		return
	}
	if err := h.o.Delete(r.Context(), id); err != nil {
		h.fail(w, r, notFound(err, "pending or dead event", id), false)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// replay serves POST /v1/events/{id}/replay, and with ?endpoint= the
// replay of one delivery (deliveries.go).
func (h *handler) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	endpoint, one, err := endpointParam(r)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	if one {
		h.replayDelivery(w, r, id, endpoint)
		return
	}
	if err := h.o.Replay(r.Context(), id); err != nil {
		if errors.Is(err, outbox.ErrNotDead) {
			err = errorf(http.StatusConflict, "event "+strconv.Quote(id)+" is not dead: only dead events can be replayed")
		}
		h.fail(w, r, notFound(err, "event", id), false)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}{id, outbox.StatePending.String()})
}

// replayFilterIn is the body of POST /v1/dead/replay.
type replayFilterIn struct {
	Destination string  `json:"destination"`
	Status      int     `json:"status"`
	KeyPrefix   string  `json:"key_prefix"`
	Topic       string  `json:"topic"`
	From        string  `json:"from"`
	To          string  `json:"to"`
	Limit       int     `json:"limit"`
	Rate        float64 `json:"rate"`
}

// replayDead serves POST /v1/dead/replay: the body (optional) is a filter.
func (h *handler) replayDead(w http.ResponseWriter, r *http.Request) {
	b, err := h.readBody(w, r, true)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	var in replayFilterIn
	err = decodeOptionalObject(b.b, &in, "body must be a filter object")
	b.release() // decoded: the filter is all that is kept
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	f := outbox.ReplayFilter{Destination: in.Destination, Status: in.Status, KeyPrefix: in.KeyPrefix, Topic: in.Topic,
		Limit: in.Limit, Rate: in.Rate}
	if err := topicParam(in.Topic); err != nil {
		h.fail(w, r, err, false)
		return
	}
	for _, t := range []struct {
		name string
		s    string
		dst  *time.Time
	}{{"from", in.From, &f.From}, {"to", in.To, &f.To}} {
		if t.s == "" {
			continue
		}
		tm, err := time.Parse(time.RFC3339Nano, t.s)
		if err != nil {
			h.fail(w, r, errorf(http.StatusBadRequest, t.name+": must be an RFC 3339 time, got "+strconv.Quote(t.s)), false)
			return
		}
		*t.dst = tm
	}
	switch {
	case in.Status != 0 && (in.Status < 100 || in.Status > 999):
		err = errorf(http.StatusBadRequest, fmt.Sprintf("status: %d is out of range: an HTTP status code is from 100 to 999 (0: any)", in.Status))
	case in.Limit < 0:
		err = errorf(http.StatusBadRequest, fmt.Sprintf("limit: %d is out of range: must not be negative", in.Limit))
	case !f.From.IsZero() && !f.To.IsZero() && f.To.Before(f.From):
		err = errorf(http.StatusBadRequest, "to: must not be before from")
	}
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	n, err := h.o.ReplayDead(r.Context(), f)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		Replayed int `json:"replayed"`
	}{n})
}

// endpointOut is an endpoint's state as the API returns it.
type endpointOut struct {
	Name           string        `json:"name"`
	Disabled       bool          `json:"disabled"`
	DisabledReason string        `json:"disabled_reason,omitempty"`
	ThrottledUntil string        `json:"throttled_until,omitempty"`
	FailureStreak  int           `json:"failure_streak"`
	LastStatus     int           `json:"last_status"`
	Breaker        breakerOut    `json:"breaker"`
	RateLimit      *rateLimitOut `json:"rate_limit,omitempty"`
	RateLimitShare *rateLimitOut `json:"rate_limit_share,omitempty"`
	Rate           float64       `json:"rate"`
	InFlight       int           `json:"in_flight"`
	InFlightLimit  int           `json:"in_flight_limit"`
	LatencyP50     float64       `json:"latency_p50_ms"`
	LatencyP99     float64       `json:"latency_p99_ms"`
	// How it is defined, when Config.Endpoints knows it.
	*endpointDefOut
}

func toEndpointOut(e outbox.EndpointState) endpointOut {
	out := endpointOut{
		Name:           e.Name,
		Disabled:       e.Disabled,
		DisabledReason: e.DisabledReason,
		ThrottledUntil: formatTime(e.ThrottledUntil),
		FailureStreak:  e.FailureStreak,
		LastStatus:     e.LastStatus,
		Breaker:        toBreakerOut(e),
		Rate:           math.Round(e.Rate*100) / 100,
		InFlight:       e.InFlight,
		InFlightLimit:  e.InFlightLimit,
		LatencyP50:     millis(e.LatencyP50),
		LatencyP99:     millis(e.LatencyP99),
	}
	if e.RateLimit != (outbox.RateLimit{}) {
		out.RateLimit = &rateLimitOut{PerSecond: e.RateLimit.PerSecond, Burst: e.RateLimit.Burst}
		out.RateLimitShare = &rateLimitOut{PerSecond: e.RateLimitShare.PerSecond, Burst: e.RateLimitShare.Burst}
	}
	return out
}

// millis returns d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// maxCursorBytes bounds the after= cursor of GET /v1/endpoints: no
// endpoint name is longer.
const maxCursorBytes = 1024

// endpoints serves GET /v1/endpoints?limit=&after=: one page of the
// endpoints, by name.
func (h *handler) endpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, name := range []string{"limit", "after"} {
		if len(q[name]) > 1 {
			h.fail(w, r, errorf(http.StatusBadRequest, name+": given more than once"), false)
			return
		}
	}
	after := q.Get("after")
	if len(after) > maxCursorBytes || !utf8.ValidString(after) {
		h.fail(w, r, errorf(http.StatusBadRequest, fmt.Sprintf("after: must be an endpoint name (UTF-8, at most %d bytes)", maxCursorBytes)), false)
		return
	}
	limit, err := limitParam(q.Get("limit"))
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	eps, next, err := h.o.EndpointsPage(r.Context(), after, limit)
	if err != nil {
		h.fail(w, r, err, false)
		return
	}
	out := make([]endpointOut, len(eps))
	for i, e := range eps {
		out[i] = toEndpointOut(e)
	}
	h.withDefinitions(out)
	writeJSON(w, http.StatusOK, struct {
		Endpoints []endpointOut `json:"endpoints"`
		Next      string        `json:"next"`
	}{out, next})
}

// limitParam parses a list's limit= (DefaultListLimit when empty).
func limitParam(s string) (int, error) {
	if s == "" {
		return DefaultListLimit, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && (n < 1 || n > MaxListLimit):
		return 0, errorf(http.StatusBadRequest, fmt.Sprintf("limit: %s is out of range: must be from 1 to %d", s, MaxListLimit))
	case err != nil:
		return 0, errorf(http.StatusBadRequest, fmt.Sprintf("limit: must be a whole number from 1 to %d, got %q", MaxListLimit, s))
	}
	return n, nil
}

// enable serves POST /v1/endpoints/{name}/enable.
func (h *handler) enable(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := h.o.EnableEndpoint(r.Context(), name); err != nil {
		h.fail(w, r, notFound(err, "endpoint", name), false)
		return
	}
	out := endpointOut{Name: name}
	if eps, err := h.o.Endpoints(r.Context()); err == nil {
		for _, e := range eps {
			if e.Name == name {
				out = toEndpointOut(e)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// StatsBody is the body of GET /v1/stats, without the fields
// Config.ExtraStats adds. A view that answers for several servers (package
// outbox/cluster) decodes each one's answer into a StatsBody and sums them
// with Add, so that every count the API serves is summed.
type StatsBody struct {
	Pending                 int     `json:"pending"`
	Dead                    int     `json:"dead"`
	Unrouted                int     `json:"unrouted"`
	UnroutedDroppedTotal    uint64  `json:"unrouted_dropped_total"`
	InFlight                int     `json:"in_flight"`
	DeliveredTotal          uint64  `json:"delivered_total"`
	FailedTotal             uint64  `json:"failed_total"`
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// Archived counts the delivered events kept in the archive
	// (outbox.Stats.Archived; GET /v1/archive).
	Archived int `json:"archived"`
	// Backfill is the routing of the events kept unrouted to new
	// subscriptions (outbox.Stats.Backfill).
	Backfill BackfillBody `json:"backfill"`
}

// BackfillBody is the "backfill" object of GET /v1/stats: whether the
// routing of kept unrouted events to new subscriptions runs now, the
// events it routed and the deliveries it made since the start, and the
// events still kept unrouted.
type BackfillBody struct {
	Running    bool   `json:"running"`
	Routed     uint64 `json:"routed"`
	Deliveries uint64 `json:"deliveries"`
	Remaining  int    `json:"remaining"`
}

// Add sums o into s: the counts add up, the oldest pending age is the
// older of the two, and a backfill runs when one of the two runs.
func (s *StatsBody) Add(o StatsBody) {
	s.Pending += o.Pending
	s.Dead += o.Dead
	s.Unrouted += o.Unrouted
	s.UnroutedDroppedTotal += o.UnroutedDroppedTotal
	s.InFlight += o.InFlight
	s.DeliveredTotal += o.DeliveredTotal
	s.FailedTotal += o.FailedTotal
	s.OldestPendingAgeSeconds = max(s.OldestPendingAgeSeconds, o.OldestPendingAgeSeconds)
	s.Archived += o.Archived
	s.Backfill.Running = s.Backfill.Running || o.Backfill.Running
	s.Backfill.Routed += o.Backfill.Routed
	s.Backfill.Deliveries += o.Backfill.Deliveries
	s.Backfill.Remaining += o.Backfill.Remaining
}

// stats serves GET /v1/stats.
func (h *handler) stats(w http.ResponseWriter, r *http.Request) {
	s := h.o.Stats()
	out := StatsBody{
		Pending:                 s.Pending,
		Dead:                    s.Dead,
		Unrouted:                s.Unrouted,
		UnroutedDroppedTotal:    s.UnroutedDroppedTotal,
		InFlight:                s.InFlight,
		DeliveredTotal:          s.DeliveredTotal,
		FailedTotal:             s.FailedTotal,
		OldestPendingAgeSeconds: s.OldestPendingAge.Seconds(),
		Archived:                s.Archived,
		Backfill: BackfillBody{Running: s.Backfill.Running, Routed: s.Backfill.Routed,
			Deliveries: s.Backfill.Deliveries, Remaining: s.Backfill.Remaining},
	}
	if h.cfg.ExtraStats == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeJSON(w, http.StatusOK, h.withExtraStats(r, out, h.cfg.ExtraStats()))
}

// statsFields are the JSON names of StatsBody's fields, which Config.ExtraStats
// cannot replace.
var statsFields = func() map[string]bool {
	t := reflect.TypeFor[StatsBody]()
	names := make(map[string]bool, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names[name] = true
	}
	return names
}()

// withExtraStats returns the JSON object of out with the entries of extra
// added after its fields, in key order, leaving out those whose key is a
// field of out and those whose value does not encode (logged).
func (h *handler) withExtraStats(r *http.Request, out StatsBody, extra map[string]any) any {
	b, err := json.Marshal(out)
	if err != nil || len(extra) == 0 {
		return out // (a struct of finite numbers always encodes)
	}
	b = b[:len(b)-1] // the closing brace
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if statsFields[k] {
			continue
		}
		v, err := json.Marshal(extra[k])
		if err != nil {
			h.cfg.Logger.Error("stats: an extra field does not encode as JSON; left out", "path", r.URL.Path, "field", k, "err", err)
			continue
		}
		key, _ := json.Marshal(k) // a string always encodes
		b = append(b, ',')
		b = append(b, key...)
		b = append(b, ':')
		b = append(b, v...)
	}
	return json.RawMessage(append(b, '}'))
}
