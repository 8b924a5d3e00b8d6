package cluster

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// enable serves POST /v1/endpoints/{name}/enable for the whole group: an
// endpoint's state is kept in every store that delivers to it, on every
// member, so the endpoint is enabled on each member that knows it. The
// answer is the endpoint's state merged over them; 404 when no member
// knows it; 502 or 504 naming the members that could not be asked (the
// others enabled it: enabling again is harmless).
func (h *Handler) enable(w http.ResponseWriter, r *http.Request) {
	local := h.serveLocal(r)
	if local.status != http.StatusOK && local.status != http.StatusNotFound {
		write(w, local, "") // a refused token, a disabled store: nothing forwarded
		return
	}
	name := r.PathValue("name")
	peers, err := h.others(r.Context())
	if err != nil {
		h.cfg.Logger.Warn("cluster: cannot learn the members of the group", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "endpoint " + strconv.Quote(name) +
			" cannot be enabled on every member: the members of the group cannot be learned now (" + err.Error() + "); send the request again"})
		return
	}
	answers := append([]*answer{local}, h.forward(r, peers, r.URL.EscapedPath(), "", nil)...)
	if down, timeouts := failures(answers, 0, false); len(down) > 0 {
		h.writeUnreachable(w, r, down, timeouts, "endpoint "+strconv.Quote(name)+" was enabled on the members that answered; ",
			" could not be asked: send the request again (enabling twice is harmless)")
		return
	}
	var merged *mergedEndpoint
	for _, a := range answers {
		var e endpoint
		var obj map[string]json.RawMessage
		if a.status != http.StatusOK || !isObject(a.body) || json.Unmarshal(a.body, &e) != nil || json.Unmarshal(a.body, &obj) != nil {
			continue
		}
		if merged == nil {
			merged = &mergedEndpoint{obj: obj, e: e, statusStreak: e.FailureStreak}
		} else {
			merged.add(e, obj)
		}
	}
	if merged == nil {
		if a := pick(answers[1:]); a != nil {
			write(w, a, a.peer.URL) // a member's own refusal
			return
		}
		write(w, local, "")
		return
	}
	writeJSON(w, http.StatusOK, merged.object())
}
