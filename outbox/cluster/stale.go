package cluster

import (
	"net/http"
	"strconv"
)

// StaleHeader, set to "true", marks an answer to GET /v1/events/{id} or
// GET /v1/events/{id}/attempts given from a copy of the event's partition
// that no member serves at the time (Config.Stale): the event as the copy
// holds it, which may miss what its owner did after StaleOffsetHeader.
const StaleHeader = "Outbox-Stale"

// StaleOffsetHeader, with StaleHeader, is the changelog offset the copy
// reflects: it holds every record of the partition's changelog below it.
const StaleOffsetHeader = "Outbox-Stale-Offset"

// AcceptStaleHeader, on a forwarded GET of an event or its attempts, asks
// the member to answer from its stale copies (Config.Stale) when it does
// not serve the event.
const AcceptStaleHeader = "Outbox-Accept-Stale"

// staleMux routes the forwarded requests that accept a stale answer: the
// reads of an event to forwardedRead, anything else to the local API.
func (h *Handler) staleMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/events/{id}", h.forwardedRead)
	mux.HandleFunc("GET /v1/events/{id}/attempts", h.forwardedRead)
	mux.Handle("/", h.local)
	return mux
}

// serveForwarded answers a forwarded request from the local API, and a
// read that accepts a stale answer from a stale copy when the local API
// does not hold the event.
func (h *Handler) serveForwarded(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Stale != nil && r.Header.Get(AcceptStaleHeader) != "" {
		h.staleReads.ServeHTTP(w, r)
		return
	}
	h.local.ServeHTTP(w, r)
}

// forwardedRead answers a forwarded read as readNow does.
func (h *Handler) forwardedRead(w http.ResponseWriter, r *http.Request) {
	write(w, h.readNow(r), "")
}

// readNow answers a read of an event from this member: the local API's
// answer, unless it is a 404 and a stale copy here holds the event. A
// partition may start serving between the two, and its copy is then no
// longer read: the local API is asked again when no copy answered.
func (h *Handler) readNow(r *http.Request) *answer {
	a := h.serveLocal(r)
	if a.status != http.StatusNotFound || h.cfg.Stale == nil {
		return a
	}
	rc := newRecorder()
	h.cfg.Stale.ServeHTTP(rc, r)
	if s := (&answer{peer: a.peer, status: rc.status, header: rc.header, body: rc.body.Bytes()}); isStale(s) {
		return s
	}
	return h.serveLocal(r)
}

// serveStale answers a read of an event that no member served while
// partitions move, and reports whether it did. Each member, this one
// included, is asked again with AcceptStaleHeader: a member whose
// partition started serving meanwhile answers fresh, and that answer
// wins; otherwise the stale copy with the highest offset answers (this
// member's on a tie). Writes are never answered from a copy: they wait for
// the owner.
func (h *Handler) serveStale(w http.ResponseWriter, r *http.Request, peers []Peer) bool {
	if r.Method != http.MethodGet || h.cfg.Stale == nil {
		return false
	}
	fr := r.Clone(r.Context())
	fr.Header.Set(AcceptStaleHeader, "true")
	answers := append([]*answer{h.readNow(r)}, h.forward(fr, peers, r.URL.EscapedPath(), r.URL.RawQuery, holds)...)
	if a := pick(answers); a != nil {
		h.counts.answered.Add(1)
		write(w, a, servedBy(a))
		return true
	}
	var best *answer
	for _, a := range answers {
		if isStale(a) && (best == nil || staleOffset(a) > staleOffset(best)) {
			best = a
		}
	}
	if best == nil {
		return false
	}
	h.counts.stale.Add(1)
	write(w, best, servedBy(best))
	return true
}

// servedBy is the ServedByHeader of a member's answer: its URL, or none
// for this member's.
func servedBy(a *answer) string {
	if a.peer.Self {
		return ""
	}
	return a.peer.URL
}

// isStale reports whether a is a stale copy's answer holding the event.
func isStale(a *answer) bool {
	return !a.failed() && a.status == http.StatusOK && a.header.Get(StaleHeader) == "true"
}

// staleOffset is the offset a stale answer names, -1 when it names none.
func staleOffset(a *answer) int64 {
	off, err := strconv.ParseInt(a.header.Get(StaleOffsetHeader), 10, 64)
	if err != nil {
		return -1
	}
	return off
}
