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

// forwardedRead answers a forwarded read: the local API's answer, unless
// it is a 404 and a stale copy here holds the event.
func (h *Handler) forwardedRead(w http.ResponseWriter, r *http.Request) {
	a := h.serveLocal(r)
	if a.status == http.StatusNotFound {
		if s := h.staleLocal(r); s != nil {
			a = s
		}
	}
	write(w, a, "")
}

// staleLocal returns this member's stale answer to r, or nil.
func (h *Handler) staleLocal(r *http.Request) *answer {
	if h.cfg.Stale == nil {
		return nil
	}
	rc := newRecorder()
	h.cfg.Stale.ServeHTTP(rc, r)
	a := &answer{peer: Peer{URL: h.cfg.Self, Self: true}, status: rc.status, header: rc.header, body: rc.body.Bytes()}
	if !isStale(a) {
		return nil
	}
	return a
}

// serveStale answers a read of an event that no member serves while
// partitions move, from the freshest stale copy (the highest offset) of
// this member or of peers, and reports whether it did. Writes are never
// answered from a copy: they wait for the owner.
func (h *Handler) serveStale(w http.ResponseWriter, r *http.Request, peers []Peer) bool {
	if r.Method != http.MethodGet || h.cfg.Stale == nil {
		return false
	}
	best := h.staleLocal(r)
	fr := r.Clone(r.Context())
	fr.Header.Set(AcceptStaleHeader, "true")
	for _, a := range h.forward(fr, peers, r.URL.EscapedPath(), r.URL.RawQuery, nil) {
		if isStale(a) && (best == nil || staleOffset(a) > staleOffset(best)) {
			best = a
		}
	}
	if best == nil {
		return false
	}
	h.counts.stale.Add(1)
	servedBy := ""
	if !best.peer.Self {
		servedBy = best.peer.URL
	}
	write(w, best, servedBy)
	return true
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
