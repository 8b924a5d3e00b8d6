package cluster

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// Scopes of GET /v1/stats and GET /v1/endpoints.
const (
	// ScopeLocal (the default) answers for this instance's stores.
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
}

// scope reads the scope parameter; ok is false (and the 400 answered) when
// it is neither local nor cluster.
func scope(w http.ResponseWriter, r *http.Request) (string, bool) {
	s := r.URL.Query().Get("scope")
	switch s {
	case "", ScopeLocal:
		return ScopeLocal, true
	case ScopeCluster:
		return s, true
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": "scope: must be local or cluster, got " + strconv.Quote(s)})
	return "", false
}

// gather answers the local request and, for scope=cluster, asks every
// other member for path; the members come in the group's order, this
// instance among them. done is true when the answer was given already (the
// local one, a refusal, or a 503 when the members cannot be learned).
func (h *Handler) gather(w http.ResponseWriter, r *http.Request, path string) (members []*answer, done bool) {
	local := h.serveLocal(r)
	if local.status != http.StatusOK {
		write(w, local, "")
		return nil, true
	}
	sc, ok := scope(w, r)
	if !ok {
		return nil, true
	}
	if sc == ScopeLocal {
		write(w, local, "")
		return nil, true
	}
	ctx := r.Context()
	all, err := h.cfg.Peers(ctx)
	if err != nil {
		h.counts.noMembers.Add(1)
		h.cfg.Logger.Warn("cluster: cannot learn the members of the group", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the members of the group cannot be learned now: " + err.Error()})
		return nil, true
	}
	var others []Peer
	selfAt := -1
	for _, p := range all {
		if p.Self || p.URL == h.cfg.Self {
			if selfAt < 0 {
				selfAt = len(others)
				local.peer = p
				local.peer.Self = true
			}
			continue
		}
		others = append(others, p)
	}
	answers := h.forward(r, others, path, "", nil)
	if selfAt < 0 {
		selfAt = 0 // not (yet) listed by the coordinator: it answers all the same
	}
	return slices.Insert(answers, selfAt, local), false
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
	answers, done := h.gather(w, r, "/v1/stats")
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
// state merged over every member that answered.
func (h *Handler) endpoints(w http.ResponseWriter, r *http.Request) {
	answers, done := h.gather(w, r, "/v1/endpoints")
	if done {
		return
	}
	out := mergeEndpoints(answers)
	h.countView(out.Complete)
	writeJSON(w, http.StatusOK, out)
}

// clusterEndpoints is the answer of GET /v1/endpoints?scope=cluster.
type clusterEndpoints struct {
	Endpoints []map[string]json.RawMessage `json:"endpoints"`
	Scope     string                       `json:"scope"`
	Complete  bool                         `json:"complete"`
	Members   []memberView                 `json:"members"`
}

// mergeEndpoints merges the members' endpoints answers.
func mergeEndpoints(answers []*answer) clusterEndpoints {
	byName := map[string]*mergedEndpoint{}
	out := clusterEndpoints{Scope: ScopeCluster, Complete: true, Endpoints: []map[string]json.RawMessage{}}
	for _, a := range answers {
		var body struct {
			Endpoints []json.RawMessage `json:"endpoints"`
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
		if !ok {
			out.Complete = false
		}
		out.Members = append(out.Members, view(a, ok, reason))
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.SortFunc(names, strings.Compare)
	for _, n := range names {
		out.Endpoints = append(out.Endpoints, byName[n].object())
	}
	return out
}
