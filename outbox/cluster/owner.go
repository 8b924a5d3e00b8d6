package cluster

import (
	"context"
	"net/http"
	"slices"
)

// owner answers an event request with the answer of the member that owns
// the event's partition, when the request names the partition (the ID, or
// for GET /v1/events/{id} the key= parameter) and that member is another
// one: one request to one member. done reports whether it answered; it
// does not when the partition or its owner is not known, or when the
// owner does not hold the event (the partition may have moved since the
// assignment was read) or could not be asked: then asked is the owner's
// answer, if it was asked, and the other members are to be asked.
func (h *Handler) owner(w http.ResponseWriter, r *http.Request) (done bool, asked *answer) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	peers, err := h.cfg.Peers(ctx)
	cancel()
	if err != nil {
		return false, nil
	}
	part, ok := h.partitionOf(r, peers)
	if !ok {
		return false, nil
	}
	at := slices.IndexFunc(peers, func(p Peer) bool { return slices.Contains(p.Partitions, part) })
	if at < 0 || h.isSelf(peers[at]) || peers[at].URL == "" {
		return false, nil // this instance's, or no member's now
	}
	a := &answer{peer: peers[at]}
	h.ask(r.Context(), r, a, r.URL.EscapedPath(), r.URL.RawQuery)
	if !holds(a) {
		return false, a
	}
	h.counts.answered.Add(1)
	write(w, a, a.peer.URL)
	return true, nil
}

// notAsked returns peers without the member asked already (none when
// asked is nil).
func notAsked(peers []Peer, asked *answer) []Peer {
	if asked == nil {
		return peers
	}
	return slices.DeleteFunc(peers, func(p Peer) bool { return p.ID == asked.peer.ID && p.URL == asked.peer.URL })
}

// partitionOf returns the partition r's event is in, when the ID names it
// or, for GET /v1/events/{id}, when key= is given and the members'
// assignments tell how many partitions there are.
func (h *Handler) partitionOf(r *http.Request, peers []Peer) (int, bool) {
	if p, ok := h.cfg.PartitionOf(r.PathValue("id")); ok {
		return p, true
	}
	key, given := r.URL.Query()["key"]
	if !given || r.Method != http.MethodGet || len(key) != 1 {
		return 0, false
	}
	// Every partition is assigned in a stable group: the members'
	// partitions are all there are. Were the count wrong, the member
	// asked would not hold the event, and everyone would be asked.
	n := 0
	for _, p := range peers {
		n += len(p.Partitions)
	}
	if n == 0 {
		return 0, false
	}
	return h.cfg.PartitionOfKey(key[0], n)
}

// isSelf reports whether p is this instance.
func (h *Handler) isSelf(p Peer) bool { return p.Self || p.URL == h.cfg.Self }
