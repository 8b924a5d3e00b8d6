package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outbox/outbox"
)

// pageData is what every page's template gets.
type pageData struct {
	Title         string
	Base          string // the console's path without its trailing slash
	Active        string // the navigation entry to mark
	CSRF          string
	LoggedIn      bool // a token is set and this request has a session
	HasPartitions bool
	Error         string
	Notice        string
	Data          any
}

var funcs = template.FuncMap{
	"time": fmtTime,
	"dur":  roughDuration,
}

// pageNames are the templates in templates/, each parsed with layout.html.
var pageNames = []string{"overview", "events", "event", "dead", "history", "endpoints", "partitions", "login", "confirm", "error"}

func parsePages() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes a page. Rendering goes to a buffer first, so a template
// error is answered with a 500, not half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, active string, d pageData) {
	d.Base = c.base
	d.Active = active
	d.HasPartitions = c.cfg.Partitions != nil
	if name != "login" || c.cfg.Token == "" {
		id := c.identity(w, r, true)
		if id != "" {
			d.CSRF = c.csrfFor(id)
			d.LoggedIn = c.cfg.Token != ""
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, d); err != nil {
		c.cfg.Logger.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with the error page (the login page when a token is set and
// the request has no session).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if c.cfg.Token != "" && c.identity(w, r, false) == "" {
		c.toLogin(w, r)
		return
	}
	c.render(w, r, status, "error", "", pageData{Title: http.StatusText(status), Error: text(msg)})
}

func (c *Console) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		http.Redirect(w, r, c.base+"/login", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusForbidden, "login", "", pageData{Title: "Log in", Error: "Log in first."})
}

// errStatus is the HTTP status of a Backend error.
func errStatus(err error) int {
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, outbox.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, outbox.ErrNotDead), errors.Is(err, outbox.ErrConflict), errors.Is(err, outbox.ErrEndpointDisabled):
		return http.StatusConflict
	case errors.Is(err, outbox.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// badRequest is an error in a form or query field, answered 400.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

// page wraps a page handler: with a token, a request without a session
// is sent to the login page.
func (c *Console) page(fn func(r *http.Request) (name, active string, d pageData, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Token != "" && c.identity(w, r, false) == "" {
			c.toLogin(w, r)
			return
		}
		name, active, d, err := fn(r)
		if err != nil {
			status := errStatus(err)
			var br badRequest
			if errors.As(err, &br) {
				status = http.StatusBadRequest
			} else if status == http.StatusInternalServerError {
				c.cfg.Logger.Error("console: page failed", "path", r.URL.Path, "err", err)
			}
			c.fail(w, r, status, err.Error())
			return
		}
		if msg := doneMessage(r.URL.Query()); msg != "" {
			d.Notice = msg
		}
		c.render(w, r, http.StatusOK, name, active, d)
	}
}

// doneMessage is the notice shown after an action redirected here; only
// fixed texts, never text from the URL.
func doneMessage(q url.Values) string {
	n, _ := strconv.Atoi(q.Get("n"))
	switch q.Get("done") {
	case "replayed":
		return "Replayed: the event is pending again."
	case "deleted":
		return "Deleted."
	case "replayed-delivery":
		return "Replayed: the delivery is pending again."
	case "deleted-delivery":
		return "Delivery deleted; the event's other deliveries are untouched."
	case "replay-started":
		return "Replay by filter started; its progress is shown below."
	case "enabled":
		return "Endpoint enabled: its pending events are due now."
	case "retried":
		return fmt.Sprintf("Retry started: %d pending events made due.", n)
	}
	return ""
}

// ---- overview

type overviewData struct {
	Stats              outbox.Stats
	OldestPending      string
	DeliveredPerSecond string
	FailedPerSecond    string
	Chart              chart
	ReplayRunning      bool
}

type chart struct {
	Samples        int
	Span           string
	PendingPoints  string
	RatePoints     string
	MaxPending     int
	MaxRate        string
	Width, Height  int
	HasData        bool
	LatestPending  int
	LatestRateText string
}

func (c *Console) overview(r *http.Request) (string, string, pageData, error) {
	st := c.b.Stats()
	c.mu.Lock()
	ss := c.samples.all()
	running := c.replay.running
	c.mu.Unlock()
	d := overviewData{Stats: st, ReplayRunning: running, OldestPending: "-"}
	if st.OldestPendingAge > 0 {
		d.OldestPending = roughDuration(st.OldestPendingAge)
	}
	d.DeliveredPerSecond, d.FailedPerSecond = "-", "-"
	if len(ss) >= 2 {
		// The rates over the last minute of samples (or what there is).
		last := ss[len(ss)-1]
		first := ss[0]
		for i := len(ss) - 2; i >= 0; i-- {
			first = ss[i]
			if last.at.Sub(ss[i].at) >= time.Minute {
				break
			}
		}
		if dt := last.at.Sub(first.at).Seconds(); dt > 0 {
			d.DeliveredPerSecond = fmt.Sprintf("%.1f/s", float64(last.delivered-first.delivered)/dt)
			d.FailedPerSecond = fmt.Sprintf("%.1f/s", float64(last.failed-first.failed)/dt)
		}
	}
	d.Chart = makeChart(ss)
	return "overview", "overview", pageData{Title: "Overview", Data: d}, nil
}

// makeChart plots the pending count and the delivery rate of the samples
// as two polylines in a 600x160 box.
func makeChart(ss []sample) chart {
	ch := chart{Width: 600, Height: 160, Samples: len(ss)}
	if len(ss) < 2 {
		return ch
	}
	ch.HasData = true
	span := ss[len(ss)-1].at.Sub(ss[0].at)
	ch.Span = roughDuration(span)
	rates := make([]float64, len(ss))
	maxP, maxR := 1, 0.0
	for i, s := range ss {
		maxP = max(maxP, s.pending)
		if i > 0 {
			if dt := s.at.Sub(ss[i-1].at).Seconds(); dt > 0 && s.delivered >= ss[i-1].delivered {
				rates[i] = float64(s.delivered-ss[i-1].delivered) / dt
			}
		}
		maxR = math.Max(maxR, rates[i])
	}
	if maxR == 0 {
		maxR = 1
	}
	x := func(i int) float64 {
		if span <= 0 {
			return 0
		}
		return float64(ch.Width) * ss[i].at.Sub(ss[0].at).Seconds() / span.Seconds()
	}
	h := float64(ch.Height - 4)
	var p, q strings.Builder
	for i, s := range ss {
		fmt.Fprintf(&p, "%.1f,%.1f ", x(i), 2+h-h*float64(s.pending)/float64(maxP))
		fmt.Fprintf(&q, "%.1f,%.1f ", x(i), 2+h-h*rates[i]/maxR)
	}
	ch.PendingPoints = strings.TrimSpace(p.String())
	ch.RatePoints = strings.TrimSpace(q.String())
	ch.MaxPending = maxP
	ch.MaxRate = fmt.Sprintf("%.1f/s", maxR)
	ch.LatestPending = ss[len(ss)-1].pending
	ch.LatestRateText = fmt.Sprintf("%.1f/s", rates[len(rates)-1])
	return ch
}

// ---- events and dead letters

// eventRow is one event in a list, every field safe to show.
type eventRow struct {
	ID, IDText  string // ID for links, IDText to show
	Key         string
	Destination string
	Topic       string
	Endpoint    string // a delivery's, or a destination event's resolved endpoint
	Created     string
	Attempts    int
	Next        string
	LastStatus  int
	LastError   string
	DeadReason  string
	DeadAt      string
}

func rowOf(ev outbox.Event) eventRow {
	return eventRow{
		ID: ev.ID, IDText: text(ev.ID), Key: text(ev.Key), Destination: text(ev.Destination),
		Topic: text(ev.Topic), Endpoint: text(ev.Endpoint),
		Created: fmtTime(ev.CreatedAt), Attempts: ev.Attempts, Next: fmtTime(ev.NextAttemptAt),
		LastStatus: ev.LastStatus, LastError: text(ev.LastError),
		DeadReason: text(ev.DeadReason), DeadAt: fmtTime(ev.DeadAt),
	}
}

type listFilter struct {
	State       string
	Topic       string
	Destination string
	Key         string
	From, To    string
	After       string
}

type listData struct {
	Filter    listFilter
	Rows      []eventRow
	NextURL   string
	FirstURL  string
	IsFirst   bool
	Replay    replayView
	StateDead bool
	Unrouted  bool
}

type replayView struct {
	Running  bool
	Any      bool
	What     string
	Started  string
	Finished string
	N        int
	Err      string
}

// parseTime reads a time field: RFC 3339, or the "2006-01-02T15:04" of a
// datetime-local input (taken as UTC).
func parseTime(field, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, badRequest{fmt.Sprintf("%s: %q is not a time (want e.g. 2026-01-02T15:04 in UTC, or RFC 3339)", field, text(v))}
}

func (c *Console) list(r *http.Request, state outbox.State) (listData, error) {
	q := r.URL.Query()
	f := listFilter{
		State: q.Get("state"), Topic: q.Get("topic"), Destination: q.Get("destination"), Key: q.Get("key"),
		From: q.Get("from"), To: q.Get("to"), After: q.Get("after"),
	}
	unrouted := false
	switch f.State {
	case "", "pending":
		f.State = "pending"
	case "dead":
		state = outbox.StateDead
	case "unrouted":
		if state != outbox.StateDead { // the dead page lists dead letters only
			state, unrouted = 0, true
		}
	default:
		return listData{}, badRequest{fmt.Sprintf("state: %q is not pending, dead or unrouted", text(f.State))}
	}
	if state == outbox.StateDead {
		f.State = "dead"
	}
	if f.Topic != "" {
		if err := outbox.ValidateTopic(f.Topic); err != nil {
			return listData{}, badRequest{fmt.Sprintf("topic: %q %v", text(f.Topic), err)}
		}
	}
	from, err := parseTime("from", f.From)
	if err != nil {
		return listData{}, err
	}
	to, err := parseTime("to", f.To)
	if err != nil {
		return listData{}, err
	}
	evs, next, err := c.b.List(r.Context(), outbox.ListOptions{
		State: state, Unrouted: unrouted, After: f.After, Limit: pageSize, Topic: f.Topic,
		Destination: f.Destination, KeyPrefix: f.Key, CreatedFrom: from, CreatedTo: to,
	})
	if err != nil {
		return listData{}, err
	}
	d := listData{Filter: f, Rows: make([]eventRow, len(evs)), IsFirst: f.After == "", StateDead: state == outbox.StateDead,
		Unrouted: unrouted}
	for i, ev := range evs {
		d.Rows[i] = rowOf(ev)
	}
	d.Filter.Destination, d.Filter.Key, d.Filter.After, d.Filter.Topic = text(f.Destination), text(f.Key), text(f.After), text(f.Topic)
	v := url.Values{}
	for k, s := range map[string]string{"state": f.State, "topic": f.Topic, "destination": f.Destination, "key": f.Key, "from": f.From, "to": f.To} {
		if s != "" {
			v.Set(k, s)
		}
	}
	path := c.base + "/events"
	if state == outbox.StateDead && r.URL.Path == c.base+"/dead" {
		path = c.base + "/dead"
	}
	d.FirstURL = path + "?" + v.Encode()
	if next != "" {
		v.Set("after", next)
		d.NextURL = path + "?" + v.Encode()
	}
	return d, nil
}

func (c *Console) events(r *http.Request) (string, string, pageData, error) {
	d, err := c.list(r, outbox.StatePending)
	if err != nil {
		return "", "", pageData{}, err
	}
	return "events", "events", pageData{Title: "Events", Data: d}, nil
}

func (c *Console) dead(r *http.Request) (string, string, pageData, error) {
	d, err := c.list(r, outbox.StateDead)
	if err != nil {
		return "", "", pageData{}, err
	}
	c.mu.Lock()
	j := c.replay
	c.mu.Unlock()
	d.Replay = replayView{
		Running: j.running, Any: !j.started.IsZero(), What: text(j.what), Started: fmtTime(j.started),
		Finished: fmtTime(j.finished), N: j.n, Err: text(j.err),
	}
	return "dead", "dead", pageData{Title: "Dead letters", Data: d}, nil
}

// ---- one event

type eventData struct {
	ID, IDText     string
	State          string
	Dead, Pending  bool
	Known          bool // pending or dead: the whole event is kept
	Key            string
	Destination    string
	Topic          string
	Endpoint       string
	Method         string
	Created        string
	DeliverAt      string
	Attempts       int
	Deliveries     int
	NextAttempt    string
	LastStatus     int
	LastError      string
	DeadReason     string
	DeadAt         string
	Version        uint64
	Headers        []pair
	Payload        preview
	DeliveryStates []deliveryView
	Unrouted       bool // a topic event no endpoint subscribes to (yet)
	Timeline       []attemptView
	History        []historyView
	HistoryMissing bool
}

// deliveryView is one delivery of a topic event on its page.
type deliveryView struct {
	Endpoint, EndpointText string // Endpoint for forms, EndpointText to show
	State                  string
	Dead, Pending          bool
	Attempts               int
	NextAttempt            string
	Last                   string
	DeadAt, DeadReason     string
}

type attemptView struct {
	Seq      uint64
	Delivery int
	Endpoint string
	Started  string
	Duration string
	Action   string
	OK       bool
	Status   int
	Error    string
	Headers  []pair
	Body     preview
}

type historyView struct {
	LSN    uint64
	Time   string
	Op     string
	What   string
	Reason string
}

func (c *Console) event(r *http.Request) (string, string, pageData, error) {
	id := r.URL.Query().Get("id")
	if id == "" {
		return "", "", pageData{}, badRequest{"id: missing: open an event from the events page"}
	}
	ctx := r.Context()
	ev, err := c.b.Get(ctx, id)
	if err != nil {
		return "", "", pageData{}, err
	}
	d := eventData{
		ID: id, IDText: text(id), State: ev.State.String(),
		Dead: ev.State == outbox.StateDead, Pending: ev.State == outbox.StatePending,
		Key: text(ev.Key), Destination: text(ev.Destination), Topic: text(ev.Topic), Endpoint: text(ev.Endpoint), Method: text(ev.Method),
		Created: fmtTime(ev.CreatedAt), DeliverAt: fmtTime(ev.DeliverAt), Attempts: ev.Attempts,
		Deliveries: ev.Deliveries, NextAttempt: fmtTime(ev.NextAttemptAt), LastStatus: ev.LastStatus,
		LastError: text(ev.LastError), DeadReason: text(ev.DeadReason), DeadAt: fmtTime(ev.DeadAt),
		Version: ev.Version, Headers: pairs(ev.Headers), Payload: makePreview(ev.Payload, previewBytes),
	}
	d.Known = d.Dead || d.Pending
	d.DeliveryStates = deliveryViews(ev.DeliveryStates)
	d.Unrouted = ev.Topic != "" && len(ev.DeliveryStates) == 0 && d.Pending
	if d.Unrouted {
		d.State = "unrouted"
	}
	as, err := c.b.Attempts(ctx, id)
	if err != nil && !errors.Is(err, outbox.ErrNotFound) {
		return "", "", pageData{}, err
	}
	for _, a := range slices.Backward(as) { // newest first
		d.Timeline = append(d.Timeline, attemptView{
			Seq: a.Seq, Delivery: a.Delivery, Endpoint: text(a.Endpoint), Started: fmtTime(a.StartedAt), Duration: roughDuration(a.Duration),
			Action: a.Action.String(), OK: a.Action == outbox.ActionSuccess, Status: a.Status, Error: text(a.Error),
			Headers: pairs(a.Header), Body: makePreview(a.Body, previewBytes),
		})
	}
	hist, ok, err := c.eventHistory(ctx, &ev)
	if err != nil {
		return "", "", pageData{}, err
	}
	d.HistoryMissing = !ok
	d.History = describeHistory(hist)
	return "event", "events", pageData{Title: "Event " + text(id), Data: d}, nil
}

// history returns the event's changelog entries when the Backend can tell
// them (ok false when it cannot).
func (c *Console) history(ctx context.Context, id string) ([]outbox.ChangelogEntry, bool, error) {
	switch b := c.b.(type) {
	case Historian:
		es, err := b.History(ctx, id)
		return es, true, err
	case *outbox.Outbox:
		es, err := b.Changelog().History(id)
		return es, true, err
	}
	return nil, false, nil
}

// describeHistory says what each changelog entry did to the event, newest
// first.
func describeHistory(entries []outbox.ChangelogEntry) []historyView {
	out := make([]historyView, 0, len(entries))
	prevs := map[string]*outbox.Event{} // by entry ID: a topic event's deliveries each have their own
	for _, en := range entries {
		var what string
		ev, ok := en.Event()
		prev := prevs[en.ID]
		switch en.Op {
		case outbox.OpEnqueue:
			what = fmt.Sprintf("enqueued: %s to %s, %d-byte payload", ev.Method, ev.Destination, len(ev.Payload))
			if ev.Topic != "" && ev.Endpoint == "" {
				what = fmt.Sprintf("enqueued, %d-byte payload; no endpoint subscribes to %s", len(ev.Payload), ev.Topic)
			}
		case outbox.OpUpdate:
			what = fmt.Sprintf("updated in place (upsert): %d-byte payload", len(ev.Payload))
		case outbox.OpReschedule:
			outcome := "status " + strconv.Itoa(ev.LastStatus)
			if ev.LastError != "" {
				outcome = ev.LastError
			}
			if prev != nil && ev.Attempts == prev.Attempts {
				what = fmt.Sprintf("delivery %d parked (not yet): %s; next check %s", ev.Deliveries, outcome, fmtTime(ev.NextAttemptAt))
			} else {
				what = fmt.Sprintf("attempt %d failed: %s; next attempt %s", ev.Attempts, outcome, fmtTime(ev.NextAttemptAt))
			}
		case outbox.OpDead:
			what = "became a dead letter: " + ev.DeadReason
		case outbox.OpReplay:
			what = "replayed: back to pending, attempts reset"
		case outbox.OpDelete:
			what = "delivered or deleted"
		case outbox.OpDrop:
			what = "dropped"
		case outbox.OpSupersede:
			what = "superseded by a newer event with the same key"
		default:
			what = en.Op.String()
		}
		if d, ok := deliveryOf(en); ok {
			what = d + ": " + what
		}
		out = append(out, historyView{LSN: en.LSN, Time: fmtTime(en.Time), Op: en.Op.String(), What: text(what), Reason: text(en.Reason)})
		if ok {
			prevs[en.ID] = &ev
		}
	}
	slices.Reverse(out)
	return out
}

// ---- endpoints and partitions

type endpointView struct {
	Name           string
	NameText       string
	Disabled       bool
	DisabledReason string
	DisabledAt     string
	Throttled      bool
	ThrottledUntil string
	Breaker        string
	BreakerUntil   string
	BreakerOpen    bool
	Limit          string
	Rate           string
	InFlight       string
	Latency        string
	FailureStreak  int
	LastStatus     int
}

// endpointsData is one page of the endpoints page.
type endpointsData struct {
	Rows              []endpointView
	NextURL, FirstURL string
	IsFirst           bool
}

// maxAfter bounds the after= cursor of the endpoints page: no endpoint
// name is longer.
const maxAfter = 1024

func (c *Console) endpoints(r *http.Request) (string, string, pageData, error) {
	after := r.URL.Query().Get("after")
	if len(after) > maxAfter || !utf8.ValidString(after) {
		return "", "", pageData{}, badRequest{fmt.Sprintf("after: must be an endpoint name (UTF-8, at most %d bytes)", maxAfter)}
	}
	eps, next, err := c.b.EndpointsPage(r.Context(), after, pageSize)
	if err != nil {
		return "", "", pageData{}, err
	}
	d := endpointsData{Rows: c.endpointRows(eps), FirstURL: c.base + "/endpoints", IsFirst: after == ""}
	if next != "" {
		d.NextURL = c.base + "/endpoints?" + url.Values{"after": {next}}.Encode()
	}
	return "endpoints", "endpoints", pageData{Title: "Endpoints", Data: d}, nil
}

// endpointRows shows the endpoints' states.
func (c *Console) endpointRows(eps []outbox.EndpointState) []endpointView {
	now := c.cfg.Now()
	rows := make([]endpointView, len(eps))
	for i, ep := range eps {
		v := endpointView{
			Name: ep.Name, NameText: text(ep.Name), Disabled: ep.Disabled, DisabledReason: text(ep.DisabledReason),
			DisabledAt: fmtTime(ep.DisabledAt), Breaker: ep.Breaker.String(), BreakerOpen: ep.Breaker != outbox.BreakerClosed,
			Limit: "none", Rate: fmt.Sprintf("%.1f/s", ep.Rate), FailureStreak: ep.FailureStreak, LastStatus: ep.LastStatus,
			InFlight: fmt.Sprintf("%d of %d", ep.InFlight, ep.InFlightLimit), Latency: "–",
		}
		if ep.LatencyP99 > 0 {
			v.Latency = ep.LatencyP50.Round(time.Millisecond/10).String() + " / " + ep.LatencyP99.Round(time.Millisecond/10).String()
		}
		if ep.ThrottledUntil.After(now) {
			v.Throttled, v.ThrottledUntil = true, fmtTime(ep.ThrottledUntil)+" ("+ago(now, ep.ThrottledUntil)+")"
		}
		if v.BreakerOpen && !ep.BreakerUntil.IsZero() {
			v.BreakerUntil = fmtTime(ep.BreakerUntil)
		}
		if ep.RateLimit.PerSecond > 0 {
			v.Limit = ep.RateLimit.String()
		}
		rows[i] = v
	}
	return rows
}

type partitionView struct {
	Partition
	Owner, Error, State, Restore string
}

func (c *Console) partitions(r *http.Request) (string, string, pageData, error) {
	ps := c.cfg.Partitions.Partitions()
	rows := make([]partitionView, len(ps))
	for i, p := range ps {
		rows[i] = partitionView{Partition: p, Owner: text(p.Owner), Error: text(p.Error), State: text(p.State), Restore: text(p.Restore)}
	}
	return "partitions", "partitions", pageData{Title: "Partitions", Data: rows}, nil
}

// deliveryViews shows the deliveries of a topic event, every text safe.
func deliveryViews(ds []outbox.DeliveryStatus) []deliveryView {
	out := make([]deliveryView, len(ds))
	for i, d := range ds {
		v := deliveryView{
			Endpoint: d.Endpoint, EndpointText: text(d.Endpoint), State: d.State.String(),
			Dead: d.State == outbox.StateDead, Pending: d.State == outbox.StatePending, Attempts: d.Attempts,
			DeadAt: fmtTime(d.DeadAt), DeadReason: text(d.DeadReason),
		}
		if v.Pending {
			v.NextAttempt = fmtTime(d.NextAttemptAt)
		}
		switch {
		case d.LastError != "":
			v.Last = text(d.LastError)
		case d.LastStatus != 0:
			v.Last = "status " + strconv.Itoa(d.LastStatus)
		}
		out[i] = v
	}
	return out
}
