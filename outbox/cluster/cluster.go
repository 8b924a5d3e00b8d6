package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ForwardedHeader marks a request one member forwarded to another; its
// value is the forwarding member's advertised URL. A request that carries
// it is answered from the local stores only, never forwarded again.
const ForwardedHeader = "Outbox-Forwarded-By"

// ServedByHeader names, on an answer another member gave, that member's
// advertised URL.
const ServedByHeader = "Outbox-Served-By"

// MovingHeader, on a 404 one member gives another, says that the member
// holds partitions that are not serving yet (restoring, or handing over):
// the event may be in one of them.
const MovingHeader = "Outbox-Partitions-Moving"

// DefaultTimeout is the default of Config.Timeout.
const DefaultTimeout = 5 * time.Second

// maxAnswer bounds the body of a forwarded answer that is read.
const maxAnswer = 16 << 20

// Peer is one member of the group.
type Peer struct {
	// ID is the member's ID in the group.
	ID string
	// URL is the base URL of its HTTP API ("http://10.0.0.7:8080"), ""
	// when it announces none.
	URL string
	// Partitions are the partitions assigned to it, sorted.
	Partitions []int
	// Self reports whether the member is this instance.
	Self bool
}

// Config configures a Handler. Every field documents its default.
type Config struct {
	// Peers returns the members of the group now, this instance among them
	// (Self). A *kafka.Group's Members gives them. Default: none, the
	// instance is alone.
	Peers func(ctx context.Context) ([]Peer, error)
	// Self is this instance's advertised URL, the value of the
	// ForwardedHeader it sends. Default "outboxd".
	Self string
	// PartitionOf returns the partition an event ID names, when it names
	// one (an ID derived from a record's topic, partition and offset), so
	// that an unreachable member that owns it is named as the owner.
	// Default: none does.
	PartitionOf func(id string) (int, bool)
	// PartitionOfKey returns the partition, of partitions, that an event
	// with key lands in (the ingest topic's partitioner), for GET
	// /v1/events/{id}?key=; false when the key cannot be a record's key.
	// Default: none: the key tells nothing.
	PartitionOfKey func(key string, partitions int) (int, bool)
	// Moving reports whether this instance holds partitions whose stores
	// are not serving yet (restoring, handing over), or is between two
	// generations of the group: an event it does not find may be in one
	// of them. Default: never.
	Moving func() bool
	// Stale answers GET /v1/events/{id} and GET /v1/events/{id}/attempts
	// from this member's copies of partitions it does not serve (a
	// *kafka.Group's StaleCopies), with StaleHeader and StaleOffsetHeader
	// set on a 200, and 404 when no copy holds the event. It is asked only
	// after the local API answered 404, and its answer is used only when no
	// member serves the event while partitions move. Default: none, such
	// reads are answered 503 then.
	Stale http.Handler
	// Timeout bounds one forwarded request. Default DefaultTimeout (5s).
	Timeout time.Duration
	// Transport carries the forwarded requests. Default: a transport of
	// the Handler's own (a clone of http.DefaultTransport that goes to the
	// members directly, never through a proxy named by the environment,
	// which would see the token), whose idle connections Close closes.
	Transport http.RoundTripper
	// Logger receives what goes wrong while forwarding (never a request's
	// headers). Default: discard.
	Logger *slog.Logger
}

// Handler serves the HTTP API of one member of a group: it passes every
// request to the local handler, and answers the event routes, the listing
// of events, the dead replay, the retry and enable of an endpoint, the
// stats and the endpoints for the whole group (see the package
// documentation).
// Create it with New; Close releases its connections.
type Handler struct {
	counts counters
	local  http.Handler
	cfg    Config
	client *http.Client
	own    *http.Transport // nil when cfg.Transport was given
	mux    *http.ServeMux
	// staleReads serves forwarded requests that accept a stale answer.
	staleReads *http.ServeMux
}

// New returns the Handler of a member whose own API (over its local
// stores, with the token check) is local.
func New(local http.Handler, cfg Config) *Handler {
	if cfg.Peers == nil {
		cfg.Peers = func(context.Context) ([]Peer, error) { return nil, nil }
	}
	if cfg.Self == "" {
		cfg.Self = "outboxd"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Moving == nil {
		cfg.Moving = func() bool { return false }
	}
	if cfg.PartitionOf == nil {
		cfg.PartitionOf = func(string) (int, bool) { return 0, false }
	}
	if cfg.PartitionOfKey == nil {
		cfg.PartitionOfKey = func(string, int) (int, bool) { return 0, false }
	}
	h := &Handler{local: local, cfg: cfg}
	rt := cfg.Transport
	if rt == nil {
		h.own = http.DefaultTransport.(*http.Transport).Clone()
		h.own.Proxy = nil
		h.own.MaxIdleConnsPerHost = 16
		rt = h.own
	}
	h.client = &http.Client{
		Transport: rt,
		// A member answers; it never redirects. Following one could take
		// the token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	h.mux = http.NewServeMux()
	for _, p := range []string{"GET /v1/events/{id}", "GET /v1/events/{id}/attempts", "POST /v1/events/{id}/replay", "DELETE /v1/events/{id}"} {
		h.mux.HandleFunc(p, h.event)
	}
	h.mux.HandleFunc("GET /v1/events", h.list)
	h.mux.HandleFunc("POST /v1/dead/replay", h.replayDead)
	h.mux.HandleFunc("POST /v1/endpoints/{name}/retry", h.retry)
	h.mux.HandleFunc("GET /v1/stats", h.stats)
	h.mux.HandleFunc("GET /v1/endpoints", h.endpoints)
	h.mux.HandleFunc("POST /v1/endpoints/{name}/enable", h.enable)
	h.mux.Handle("/", local)
	h.staleReads = h.staleMux()
	return h
}

// Counts are what a Handler did since it was created.
type Counts struct {
	// The event requests no local store could answer, asked of the other
	// members, by outcome: a member held the event and answered
	// (Answered); none held it (NotFound, 404); none held it while
	// partitions moved (Moving, 503); members that might hold it could
	// not be asked (Unreachable, 502 or 504); the members could not be
	// learned (NoMembers, 503); none held it while partitions moved, and
	// a stale copy answered (Stale).
	Answered, NotFound, Moving, Unreachable, NoMembers, Stale uint64
	// ClusterViews counts the answers for the whole group (stats,
	// endpoints, listings, dead replays, retries); Incomplete those in
	// which some member did not answer.
	ClusterViews, Incomplete uint64
	// Forwarded counts the requests sent to other members, for any route.
	Forwarded uint64
}

// counters are the atomic counts behind Counts.
type counters struct {
	answered, notFound, moving, unreachable, noMembers, stale, views, incomplete, forwarded atomic.Uint64
}

// Counts returns what the Handler did so far.
func (h *Handler) Counts() Counts {
	c := &h.counts
	return Counts{Answered: c.answered.Load(), NotFound: c.notFound.Load(), Moving: c.moving.Load(),
		Unreachable: c.unreachable.Load(), NoMembers: c.noMembers.Load(), Stale: c.stale.Load(),
		ClusterViews: c.views.Load(), Incomplete: c.incomplete.Load(), Forwarded: c.forwarded.Load()}
}

// Close closes the idle connections of the Handler's own transport.
func (h *Handler) Close() {
	if h.own != nil {
		h.own.CloseIdleConnections()
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(ForwardedHeader) != "" {
		// Never forwarded twice, whatever its scope. A member with
		// partitions on the move says so with its answer (it matters only
		// on a 404).
		if h.cfg.Moving() {
			w.Header().Set(MovingHeader, "true")
		}
		h.serveForwarded(w, withoutParams(r, "scope"))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// answer is one member's answer to a request (or why there is none).
type answer struct {
	peer   Peer
	status int
	header http.Header
	body   []byte
	err    error // the request failed: no status
}

// failed reports whether the member could not answer for its stores: no
// answer, an error of its own (5xx), or a refusal of the token, which
// every member should share.
func (a *answer) failed() bool {
	return a.err != nil || a.status >= 500 || a.status == http.StatusUnauthorized || a.status == http.StatusForbidden
}

// reason says why a failed member did not answer.
func (a *answer) reason() string {
	if a.err != nil {
		return a.err.Error()
	}
	msg := http.StatusText(a.status)
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(a.body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return fmt.Sprintf("answered %d: %s", a.status, msg)
}

// timedOut reports whether the member did not answer in time.
func (a *answer) timedOut() bool {
	var ne net.Error
	return errors.Is(a.err, context.DeadlineExceeded) || errors.As(a.err, &ne) && ne.Timeout()
}

// recorder keeps the local handler's answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (rc *recorder) Header() http.Header { return rc.header }

func (rc *recorder) WriteHeader(status int) {
	if rc.status == 0 {
		rc.status = status
	}
}

func (rc *recorder) Write(b []byte) (int, error) {
	rc.WriteHeader(http.StatusOK)
	return rc.body.Write(b)
}

// serveLocal runs the local handler and keeps its answer.
func (h *Handler) serveLocal(r *http.Request) *answer {
	rc := newRecorder()
	h.local.ServeHTTP(rc, r)
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	return &answer{peer: Peer{URL: h.cfg.Self, Self: true}, status: rc.status, header: rc.header, body: rc.body.Bytes()}
}

// write sends a kept answer to the client.
func write(w http.ResponseWriter, a *answer, servedBy string) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if servedBy != "" {
		w.Header().Set(ServedByHeader, servedBy)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// writeJSON answers with status and v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // a member's answer kept raw that does not encode
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error encoding the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// others returns the members other than this instance, or an error
// answered 503.
func (h *Handler) others(ctx context.Context) ([]Peer, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	peers, err := h.cfg.Peers(ctx)
	if err != nil {
		return nil, err
	}
	var out []Peer
	for _, p := range peers {
		if !h.isSelf(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// forward sends r (without its body) to every peer at once, as path with
// query, and returns their answers in the order of peers. The token
// (Authorization) and the trace context go along; the request is marked
// forwarded. When enough is given and an answer satisfies it, the requests
// still under way are cancelled (their answers are failures then).
func (h *Handler) forward(r *http.Request, peers []Peer, path, query string, enough func(*answer) bool) []*answer {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	out := make([]*answer, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		out[i] = &answer{peer: p}
		if p.URL == "" {
			out[i].err = errors.New("the member announces no API address")
			continue
		}
		wg.Add(1)
		go func(a *answer) {
			defer wg.Done()
			h.ask(ctx, r, a, path, query)
			if enough != nil && enough(a) {
				cancel()
			}
		}(out[i])
	}
	wg.Wait()
	return out
}

// ask makes one forwarded request, without a body, within Config.Timeout
// and fills a.
func (h *Handler) ask(ctx context.Context, r *http.Request, a *answer, path, query string) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	h.send(ctx, r, a, path, query, nil)
}

// send makes one forwarded request of r's method, with body (JSON) when it
// is not nil, and fills a.
func (h *Handler) send(ctx context.Context, r *http.Request, a *answer, path, query string, body []byte) {
	u := strings.TrimSuffix(a.peer.URL, "/") + path
	if query != "" {
		u += "?" + query
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, rd)
	if err != nil || req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.User != nil {
		// The token goes only to an http(s) address without credentials.
		a.err = errors.New("the member announces an API address that is not an http:// or https:// URL")
		return
	}
	for _, k := range []string{"Authorization", "Accept", "Traceparent", "Tracestate", AcceptStaleHeader} {
		if v := r.Header.Values(k); len(v) > 0 {
			req.Header[k] = slices.Clone(v)
		}
	}
	req.Header.Set(ForwardedHeader, h.cfg.Self)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	h.counts.forwarded.Add(1)
	resp, err := h.client.Do(req)
	if err != nil {
		a.err = unwrapURLError(err)
		return
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		a.err = fmt.Errorf("reading the answer: %w", unwrapURLError(err))
		return
	case len(got) > maxAnswer:
		a.err = fmt.Errorf("an answer of more than %d bytes", maxAnswer)
		return
	}
	a.status, a.header, a.body = resp.StatusCode, resp.Header, got
	for _, k := range []string{"Date", "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding"} {
		a.header.Del(k)
	}
}

// unwrapURLError drops the *url.Error around a transport error: its text
// repeats the method and the URL, which the answer names anyway.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// unreachable is a member that did not answer, as a 502 or 504 names it.
type unreachable struct {
	Member string `json:"member"`
	API    string `json:"api"`
	Owner  bool   `json:"owner,omitempty"`
	Error  string `json:"error"`
}

// event serves an event route: locally when a local store holds the event,
// else from the member that does. Whether partitions move is read before
// the local stores are asked too: one whose partition starts serving
// during the request is asked again (serveStale), instead of its first
// answer, a 404, being taken for the group's.
func (h *Handler) event(w http.ResponseWriter, r *http.Request) {
	movingBefore := h.cfg.Moving()
	local := h.serveLocal(r)
	if local.status != http.StatusNotFound {
		write(w, local, "")
		return
	}
	done, asked := h.owner(w, r)
	if done {
		return
	}
	id := r.PathValue("id")
	peers, err := h.others(r.Context())
	if err != nil {
		h.counts.noMembers.Add(1)
		h.cfg.Logger.Warn("cluster: cannot learn the members of the group", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "event " + strconv.Quote(id) +
			" is not held by this instance, and the members of the group cannot be learned now: " + err.Error()})
		return
	}
	// The member that holds the event answers for it: the others are not
	// waited for.
	answers := h.forward(r, notAsked(peers, asked), r.URL.EscapedPath(), r.URL.RawQuery, holds)
	if asked != nil {
		answers = append(answers, asked)
	}
	if a := pick(answers); a != nil {
		h.counts.answered.Add(1)
		write(w, a, a.peer.URL)
		return
	}
	part, hasPart := h.cfg.PartitionOf(id)
	down, timeouts := failures(answers, part, hasPart)
	if len(down) == 0 {
		if moving := movingBefore || h.cfg.Moving() || slices.ContainsFunc(answers, func(a *answer) bool { return a.header.Get(MovingHeader) != "" }); moving {
			if h.serveStale(w, r, peers) {
				return
			}
			h.counts.moving.Add(1)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "event " + strconv.Quote(id) +
				" is not held by any member now, but partitions are moving between members and it may be in one being restored: retry shortly"})
			return
		}
		h.counts.notFound.Add(1)
		write(w, local, "")
		return
	}
	h.counts.unreachable.Add(1)
	h.writeUnreachable(w, r, down, timeouts, "event "+strconv.Quote(id)+" is not held by the members that answered; ",
		" could not be asked: send the request to it")
}

// failures returns the members of answers that could not be asked, the
// owner of part marked when hasPart, and how many of them timed out.
func failures(answers []*answer, part int, hasPart bool) (down []unreachable, timeouts int) {
	for _, a := range answers {
		if !a.failed() {
			continue
		}
		u := unreachable{Member: a.peer.ID, API: a.peer.URL, Error: a.reason()}
		u.Owner = hasPart && slices.Contains(a.peer.Partitions, part)
		down = append(down, u)
		if a.timedOut() {
			timeouts++
		}
	}
	return down, timeouts
}

// writeUnreachable answers 502, or 504 when every member in down timed
// out, naming each member with its address between before and after.
func (h *Handler) writeUnreachable(w http.ResponseWriter, r *http.Request, down []unreachable, timeouts int, before, after string) {
	status := http.StatusBadGateway
	if timeouts == len(down) {
		status = http.StatusGatewayTimeout
	}
	h.cfg.Logger.Warn("cluster: members did not answer a forwarded request", "method", r.Method, "path", r.URL.Path,
		"unreachable", len(down))
	writeJSON(w, status, struct {
		Error       string        `json:"error"`
		Unreachable []unreachable `json:"unreachable"`
	}{before + names(down) + after, down})
}

// names names each member of down with its address and why it could not
// be asked.
func names(down []unreachable) string {
	var out []string
	for _, u := range down {
		what := "member " + u.Member
		if u.Owner {
			what = "its owner, member " + u.Member
		}
		out = append(out, fmt.Sprintf("%s at %s (%s)", what, cmpOr(u.API, "no address"), u.Error))
	}
	return strings.Join(out, "; ")
}

// holds reports whether a is the answer of a member that holds the event
// (not a stale copy of it).
func holds(a *answer) bool {
	return !a.failed() && a.status != http.StatusNotFound && a.header.Get(StaleHeader) == ""
}

// pick returns the answer of the member that holds the event: a success
// first, else another answer of the member's own (409: not dead), or nil.
func pick(answers []*answer) *answer {
	for _, a := range answers {
		if holds(a) && a.status < 300 {
			return a
		}
	}
	for _, a := range answers {
		if holds(a) {
			return a
		}
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
