package cluster

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// list serves GET /v1/events: for the whole group unless scope=local.
// Every member is asked for the same page (the same filters, limit and
// after) and the pages are merged in the order the API lists in; see
// mergeEvents.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("scope")
	answers, done := h.gather(w, r, ScopeCluster, "/v1/events", q.Encode())
	if done {
		return
	}
	out := mergeEvents(answers, limitOf(q.Get("limit")))
	h.countView(out.Complete)
	writeJSON(w, http.StatusOK, out)
}

// clusterEvents is the answer of GET /v1/events for the whole group: the
// listing's own fields, events as the members gave them.
type clusterEvents struct {
	Events   []json.RawMessage `json:"events"`
	Next     string            `json:"next"`
	Scope    string            `json:"scope"`
	Complete bool              `json:"complete"`
	Members  []memberView      `json:"members"`
}

// listed is one member's event with its place in the listing.
type listed struct {
	at  string
	raw json.RawMessage
}

// placeOf returns where the API lists an event, as the after= that
// resumes after it: its ID, or for a delivery of a topic event (and a
// topic event kept unrouted) the ID, the unit separator and the endpoint
// ("" when unrouted). Every member lists in this order and resumes from
// any such place, whichever member it came from.
func placeOf(raw json.RawMessage) (string, bool) {
	var e struct {
		ID       string `json:"id"`
		Topic    string `json:"topic"`
		Endpoint string `json:"endpoint"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &e) != nil || e.ID == "" {
		return "", false
	}
	if e.Topic == "" {
		return e.ID, true
	}
	return e.ID + "\x1f" + e.Endpoint, true
}

// mergeEvents merges the members' pages of events as package outbox/union
// merges its stores' pages: in listing order, an event listed by two
// members once (the first member's), only the events up to the lowest
// next cursor of a member that has more (that member may hold events just
// after it, which the next page brings), at most limit of them. next is
// the place of the last event kept when more were found, else that lowest
// cursor, else "" when no member has more: paging with it returns every
// event of the members that answered exactly once.
func mergeEvents(answers []*answer, limit int) clusterEvents {
	out := clusterEvents{Scope: ScopeCluster, Complete: true, Events: []json.RawMessage{}}
	var (
		all     []listed
		bound   string
		bounded bool
	)
	for _, a := range answers {
		var body struct {
			Events []json.RawMessage `json:"events"`
			Next   string            `json:"next"`
		}
		ok := !a.failed() && a.status == http.StatusOK && isObject(a.body) && json.Unmarshal(a.body, &body) == nil
		reason := a.reason()
		if !a.failed() && !ok {
			reason = "answered " + strconv.Itoa(a.status) + " without events"
		}
		out.Members = append(out.Members, view(a, ok, reason))
		if !ok {
			out.Complete = false
			continue
		}
		for _, raw := range body.Events {
			if at, ok := placeOf(raw); ok {
				all = append(all, listed{at, raw})
			}
		}
		if body.Next != "" && (!bounded || body.Next < bound) {
			bound, bounded = body.Next, true
		}
	}
	slices.SortStableFunc(all, func(a, b listed) int { return strings.Compare(a.at, b.at) })
	all = slices.CompactFunc(all, func(a, b listed) bool { return a.at == b.at })
	if bounded {
		all = all[:sort.Search(len(all), func(i int) bool { return all[i].at > bound })]
	}
	switch {
	case len(all) > limit:
		all = all[:limit]
		out.Next = all[limit-1].at
	case bounded:
		out.Next = bound
	}
	for _, e := range all {
		out.Events = append(out.Events, e.raw)
	}
	return out
}
