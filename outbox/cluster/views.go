package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// Scopes of the views and operations that answer for the whole group (see
// the package documentation for each one's default).
const (
	// ScopeLocal answers for this instance's stores.
	ScopeLocal = "local"
	// ScopeCluster answers for every member of the group.
	ScopeCluster = "cluster"
)

// memberView is one member's part in a cluster-scope answer.
type memberView struct {
	// Member and API are the member's ID and advertised URL.
	Member string `json:"member"`
	API    string `json:"api"`
	// Self marks the member that answered the request.
	Self bool `json:"self,omitempty"`
	// Answered reports whether the member's answer is counted; Error says
	// why not.
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	// Stats is the member's own GET /v1/stats answer (stats only).
	Stats json.RawMessage `json:"stats,omitempty"`
	// Replayed and Retried are the member's counts (dead replay, retry).
	Replayed *int `json:"replayed,omitempty"`
	Retried  *int `json:"retried,omitempty"`
}

// scope reads the scope parameter, def when it is not given (or empty);
// ok is false (and the 400 answered) when it is neither local nor cluster.
func scope(w http.ResponseWriter, r *http.Request, def string) (string, bool) {
	switch s := r.URL.Query().Get("scope"); s {
	case "":
		return def, true
	case ScopeLocal, ScopeCluster:
		return s, true
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "scope: must be local or cluster, got " + strconv.Quote(s)})
		return "", false
	}
}

// withoutParams returns r without the query parameters names (r itself
// when it has none of them), for the local API, which refuses parameters
// it does not know on some routes.
func withoutParams(r *http.Request, names ...string) *http.Request {
	q := r.URL.Query()
	found := false
	for _, n := range names {
		if _, ok := q[n]; ok {
			found = true
			q.Del(n)
		}
	}
	if !found {
		return r
	}
	r2 := r.WithContext(r.Context())
	u := *r.URL
	u.RawQuery = q.Encode()
	r2.URL = &u
	return r2
}

// gather answers the local request and, for the group (scope=cluster, or
// def when no scope is given), asks every other member for path; the members come in the group's order, this
// instance among them. done is true when the answer was given already (the
// local one, a refusal, or a 503 when the members cannot be learned).
func (h *Handler) gather(w http.ResponseWriter, r *http.Request, def, path, query string) (members []*answer, done bool) {
	local := h.serveLocal(withoutParams(r, "scope"))
	if local.status != http.StatusOK {
		write(w, local, "")
		return nil, true
	}
	sc, ok := scope(w, r, def)
	if !ok {
		return nil, true
	}
	if sc == ScopeLocal {
		write(w, local, "")
		return nil, true
	}
	others, self, selfAt, err := h.members(r.Context())
	if err != nil {
		h.noMembers(w, "", err)
		return nil, true
	}
	local.peer = self
	answers := h.forward(r, others, path, query, nil)
	return slices.Insert(answers, selfAt, local), false
}

// members returns the members other than this instance, in the group's
// order, this instance (as the group lists it) and where it comes among
// them.
func (h *Handler) members(ctx context.Context) (others []Peer, self Peer, selfAt int, err error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	all, err := h.cfg.Peers(ctx)
	cancel()
	if err != nil {
		return nil, Peer{}, 0, err
	}
	self, selfAt = Peer{URL: h.cfg.Self}, -1
	for _, p := range all {
		if h.isSelf(p) {
			if selfAt < 0 {
				self, selfAt = p, len(others)
			}
			continue
		}
		others = append(others, p)
	}
	self.Self = true
	// Not (yet) listed by the coordinator: it answers all the same.
	return others, self, max(selfAt, 0), nil
}

// noMembers answers 503: the members cannot be learned; done says what
// was done already on this instance ("" when nothing was).
func (h *Handler) noMembers(w http.ResponseWriter, done string, err error) {
	h.counts.noMembers.Add(1)
	h.cfg.Logger.Warn("cluster: cannot learn the members of the group", "err", err)
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": done +
		"the members of the group cannot be learned now: " + err.Error()})
}

// view describes a's member; ok reports whether its answer counts.
func view(a *answer, ok bool, reason string) memberView {
	v := memberView{Member: a.peer.ID, API: a.peer.URL, Self: a.peer.Self, Answered: ok}
	if !ok {
		v.Error = reason
	}
	return v
}

// stats serves GET /v1/stats: with scope=cluster, the counts summed over
// every member that answered (the oldest pending age is the largest), and
// each member's own answer.
func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	answers, done := h.gather(w, r, ScopeCluster, "/v1/stats", "")
	if done {
		return
	}
	out := sumStats(answers)
	h.countView(out.Complete)
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) countView(complete bool) {
	h.counts.views.Add(1)
	if !complete {
		h.counts.incomplete.Add(1)
	}
}

// clusterStats is the answer of GET /v1/stats?scope=cluster.
type clusterStats struct {
	httpapi.StatsBody
	Scope    string       `json:"scope"`
	Complete bool         `json:"complete"`
	Members  []memberView `json:"members"`
}

// isObject reports whether b is a JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// sumStats sums the members' stats answers.
func sumStats(answers []*answer) clusterStats {
	out := clusterStats{Scope: ScopeCluster, Complete: true}
	for _, a := range answers {
		var c httpapi.StatsBody
		ok := !a.failed() && a.status == http.StatusOK && isObject(a.body) && json.Unmarshal(a.body, &c) == nil
		reason := a.reason()
		if !a.failed() && !ok {
			reason = "answered " + strconv.Itoa(a.status) + " without stats"
		}
		v := view(a, ok, reason)
		if ok {
			v.Stats = json.RawMessage(bytes.TrimSpace(a.body))
			out.Add(c)
		} else {
			out.Complete = false
		}
		out.Members = append(out.Members, v)
	}
	return out
}

// endpoint is the part of an endpoint's state the merge reads; the rest
// of the first member's object is kept as it is.
type endpoint struct {
	Name           string  `json:"name"`
	Disabled       bool    `json:"disabled"`
	DisabledReason string  `json:"disabled_reason"`
	ThrottledUntil string  `json:"throttled_until"`
	FailureStreak  int     `json:"failure_streak"`
	LastStatus     int     `json:"last_status"`
	Rate           float64 `json:"rate"`
	InFlight       int     `json:"in_flight"`
	InFlightLimit  int     `json:"in_flight_limit"`
	LatencyP50     float64 `json:"latency_p50_ms"`
	LatencyP99     float64 `json:"latency_p99_ms"`
	Breaker        struct {
		State string `json:"state"`
		Until string `json:"until"`
	} `json:"breaker"`
}

// mergedEndpoint is one endpoint over the members.
type mergedEndpoint struct {
	obj          map[string]json.RawMessage
	e            endpoint
	statusStreak int
	breaker      json.RawMessage
}

// add merges the same endpoint's state on another member, as the view
// over one instance's stores merges them: disabled anywhere is disabled,
// the latest throttle and the most open breaker stand for all, the rates
// and failure streaks add up, the last status is that of the longest
// streak.
func (m *mergedEndpoint) add(e endpoint, obj map[string]json.RawMessage) {
	if e.Disabled && !m.e.Disabled {
		m.e.Disabled, m.e.DisabledReason = true, e.DisabledReason
	}
	if later(e.ThrottledUntil, m.e.ThrottledUntil) {
		m.e.ThrottledUntil = e.ThrottledUntil
	}
	if openness(e.Breaker.State) > openness(m.e.Breaker.State) ||
		e.Breaker.State == m.e.Breaker.State && later(e.Breaker.Until, m.e.Breaker.Until) {
		m.e.Breaker, m.breaker = e.Breaker, obj["breaker"]
	}
	m.e.Rate += e.Rate
	m.e.InFlight += e.InFlight
	m.e.InFlightLimit += e.InFlightLimit
	m.e.LatencyP50, m.e.LatencyP99 = max(m.e.LatencyP50, e.LatencyP50), max(m.e.LatencyP99, e.LatencyP99)
	if e.LastStatus != 0 && (m.e.LastStatus == 0 || e.FailureStreak > m.statusStreak) {
		m.e.LastStatus, m.statusStreak = e.LastStatus, e.FailureStreak
	}
	m.e.FailureStreak += e.FailureStreak
}

// object returns the merged endpoint as JSON.
func (m *mergedEndpoint) object() map[string]json.RawMessage {
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		m.obj[k] = b
	}
	set("disabled", m.e.Disabled)
	if m.e.DisabledReason != "" {
		set("disabled_reason", m.e.DisabledReason)
	}
	if m.e.ThrottledUntil != "" {
		set("throttled_until", m.e.ThrottledUntil)
	}
	set("failure_streak", m.e.FailureStreak)
	set("last_status", m.e.LastStatus)
	set("rate", math.Round(m.e.Rate*100)/100)
	set("in_flight", m.e.InFlight)
	set("in_flight_limit", m.e.InFlightLimit)
	set("latency_p50_ms", m.e.LatencyP50)
	set("latency_p99_ms", m.e.LatencyP99)
	if m.breaker != nil {
		m.obj["breaker"] = m.breaker
	}
	return m.obj
}

func openness(state string) int {
	switch state {
	case "open":
		return 2
	case "half-open":
		return 1
	}
	return 0
}

// later reports whether RFC 3339 time a is after b ("" is no time).
func later(a, b string) bool {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	if errA != nil {
		return false
	}
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errB != nil || ta.After(tb)
}

// endpoints serves GET /v1/endpoints: with scope=cluster, each endpoint's
// state merged over every member that answered. Every member is asked for
// the same page (limit and after); see mergeEndpoints.
func (h *Handler) endpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := url.Values{}
	for _, name := range []string{"limit", "after"} {
		if v, ok := q[name]; ok {
			page[name] = v
		}
	}
	answers, done := h.gather(w, r, ScopeLocal, "/v1/endpoints", page.Encode())
	if done {
		return
	}
	out := mergeEndpoints(answers, limitOf(q.Get("limit")))
	h.countView(out.Complete)
	writeJSON(w, http.StatusOK, out)
}

// limitOf is the page size of a limit= the local answer accepted.
func limitOf(s string) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return httpapi.DefaultListLimit
}

// clusterEndpoints is the answer of GET /v1/endpoints?scope=cluster.
type clusterEndpoints struct {
	Endpoints []map[string]json.RawMessage `json:"endpoints"`
	Next      string                       `json:"next"`
	Scope     string                       `json:"scope"`
	Complete  bool                         `json:"complete"`
	Members   []memberView                 `json:"members"`
}

// mergeEndpoints merges the members' pages of endpoints, as package
// outbox/union merges its stores' pages: the names up to the lowest next
// cursor of a member that has more are certainly merged over every
// member, and at most limit of them are kept; next is the last one kept
// when there are more, else that lowest cursor, else "".
func mergeEndpoints(answers []*answer, limit int) clusterEndpoints {
	byName := map[string]*mergedEndpoint{}
	out := clusterEndpoints{Scope: ScopeCluster, Complete: true, Endpoints: []map[string]json.RawMessage{}}
	var (
		bound   string
		bounded bool
	)
	for _, a := range answers {
		var body struct {
			Endpoints []json.RawMessage `json:"endpoints"`
			Next      string            `json:"next"`
		}
		ok := !a.failed() && a.status == http.StatusOK && isObject(a.body) && json.Unmarshal(a.body, &body) == nil
		reason := a.reason()
		if !a.failed() && !ok {
			reason = "answered " + strconv.Itoa(a.status) + " without endpoints"
		}
		for _, raw := range body.Endpoints {
			var e endpoint
			var obj map[string]json.RawMessage
			if !ok || !isObject(raw) || json.Unmarshal(raw, &e) != nil || json.Unmarshal(raw, &obj) != nil || e.Name == "" {
				continue
			}
			if m, seen := byName[e.Name]; seen {
				m.add(e, obj)
			} else {
				byName[e.Name] = &mergedEndpoint{obj: obj, e: e, statusStreak: e.FailureStreak}
			}
		}
		if ok && body.Next != "" && (!bounded || body.Next < bound) {
			bound, bounded = body.Next, true
		}
		if !ok {
			out.Complete = false
		}
		out.Members = append(out.Members, view(a, ok, reason))
	}
	names := slices.Sorted(maps.Keys(byName))
	if bounded {
		names = names[:sort.Search(len(names), func(i int) bool { return names[i] > bound })]
	}
	switch {
	case len(names) > limit:
		names = names[:limit]
		out.Next = names[limit-1]
	case bounded:
		out.Next = bound
	}
	for _, n := range names {
		out.Endpoints = append(out.Endpoints, byName[n].object())
	}
	return out
}
