package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
)

// maxOpBody bounds the body of POST /v1/dead/replay and POST
// /v1/endpoints/{name}/retry that is read to be sent to every member (a
// filter, a rate: a few hundred bytes).
const maxOpBody = 64 << 10

// defaultRate is the pace of a replay or retry that names none, in events
// per second (outbox.DefaultReplayRate).
const defaultRate = 100

// readOp reads an operation's body; ok is false (and the error answered)
// when it is too large to be read.
func readOp(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOpBody))
	if err == nil {
		return b, true
	}
	if errors.As(err, new(*http.MaxBytesError)) {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body is over the limit of " +
			strconv.Itoa(maxOpBody) + " bytes; nothing was done"})
		return nil, false
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reading the request body: " + err.Error() + "; nothing was done"})
	return nil, false
}

// withBody returns r, without scope=, with body as its body.
func withBody(r *http.Request, body []byte) *http.Request {
	r2 := withoutParams(r, "scope")
	if r2 == r {
		r2 = r.WithContext(r.Context())
	}
	r2.Body, r2.ContentLength, r2.GetBody = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
	return r2
}

// withField returns the JSON object body (empty: {}) with field set to v,
// and false when body is not an object (the local API refuses it).
func withField(body []byte, field string, v any) ([]byte, bool) {
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 && (!isObject(body) || json.Unmarshal(body, &obj) != nil) {
		return body, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return body, false
	}
	obj[field] = b
	out, err := json.Marshal(obj)
	return out, err == nil
}

// field reads a number field of a JSON object body; 0 when it has none.
func field(body []byte, name string) float64 {
	var obj map[string]json.RawMessage
	var v float64
	if json.Unmarshal(body, &obj) == nil {
		_ = json.Unmarshal(obj[name], &v)
	}
	return v
}

// count reads an operation's answer: the count under name of a 202.
func count(a *answer, name string) (int, bool) {
	if a.failed() || a.status != http.StatusAccepted || !isObject(a.body) {
		return 0, false
	}
	var obj map[string]json.RawMessage
	var n int
	if json.Unmarshal(a.body, &obj) != nil || json.Unmarshal(obj[name], &n) != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// opResult is the answer of a replay or a retry sent to every member.
type opResult struct {
	// Error and Unreachable are set when some members could not be asked.
	Error       string        `json:"error,omitempty"`
	Unreachable []unreachable `json:"unreachable,omitempty"`
	Replayed    *int          `json:"replayed,omitempty"`
	Retried     *int          `json:"retried,omitempty"`
	Scope       string        `json:"scope"`
	Complete    bool          `json:"complete"`
	Members     []memberView  `json:"members"`
}

// sumOp sums the counts under name of the members' answers; a member
// whose answer is not a 202 with it (nor a 404, for a retry: it does not
// know the endpoint) is named unreachable, with the number of them that
// timed out.
func sumOp(answers []*answer, name string) (res opResult, down []unreachable, timeouts int) {
	res = opResult{Scope: ScopeCluster, Complete: true}
	total := 0
	for _, a := range answers {
		n, ok := count(a, name)
		if name == "retried" && !a.failed() && a.status == http.StatusNotFound {
			ok = true
		}
		v := view(a, ok, a.reason())
		if ok {
			total += n
			v.setCount(name, n)
		} else {
			res.Complete = false
			down = append(down, unreachable{Member: a.peer.ID, API: a.peer.URL, Error: a.reason()})
			if a.timedOut() {
				timeouts++
			}
		}
		res.Members = append(res.Members, v)
	}
	res.setCount(name, total)
	return res, down, timeouts
}

func (res *opResult) setCount(name string, n int) {
	if name == "replayed" {
		res.Replayed = &n
	} else {
		res.Retried = &n
	}
}

func (v *memberView) setCount(name string, n int) {
	if name == "replayed" {
		v.Replayed = &n
	} else {
		v.Retried = &n
	}
}

// writeOp answers an operation sent to every member: 202 with the sum, or
// 502 (504 when every one of them timed out) naming the members that
// could not be asked, with the sum over the others.
func (h *Handler) writeOp(w http.ResponseWriter, r *http.Request, res opResult, down []unreachable, timeouts int, what, again string) {
	h.countView(res.Complete)
	if len(down) == 0 {
		writeJSON(w, http.StatusAccepted, res)
		return
	}
	status := http.StatusBadGateway
	if timeouts == len(down) {
		status = http.StatusGatewayTimeout
	}
	res.Error, res.Unreachable = what+" on the members that answered; "+names(down)+" could not be asked: "+again, down
	h.cfg.Logger.Warn("cluster: members did not answer a forwarded request", "method", r.Method, "path", r.URL.Path,
		"unreachable", len(down))
	writeJSON(w, status, res)
}

// replayDead serves POST /v1/dead/replay: for the whole group unless
// scope=local. The members replay in turn, this instance first, each at
// the filter's rate (so that the group replays at it) and with the limit
// less what the members before it replayed.
func (h *Handler) replayDead(w http.ResponseWriter, r *http.Request) {
	body, ok := readOp(w, r)
	if !ok {
		return
	}
	sc, ok := scope(w, r, ScopeCluster)
	if !ok {
		return
	}
	local := h.serveLocal(withBody(r, body))
	if sc == ScopeLocal || local.status != http.StatusAccepted {
		write(w, local, "")
		return
	}
	total, _ := count(local, "replayed")
	others, self, selfAt, err := h.members(r.Context())
	if err != nil {
		h.noMembers(w, "replayed "+strconv.Itoa(total)+" dead events on this instance, but ", err)
		return
	}
	local.peer = self
	limit := int(field(body, "limit"))
	var answers []*answer
	for _, p := range others {
		if limit > 0 && total >= limit {
			break
		}
		a := &answer{peer: p}
		answers = append(answers, a)
		b := body
		if limit > 0 {
			b, _ = withField(body, "limit", limit-total)
		}
		// Paced: a replay takes as long as its events at its rate, which
		// only the client bounds.
		h.sendOne(r.Context(), r, a, "/v1/dead/replay", b)
		n, _ := count(a, "replayed")
		total += n
	}
	res, down, timeouts := sumOp(slices.Insert(answers, min(selfAt, len(answers)), local), "replayed")
	h.writeOp(w, r, res, down, timeouts, "the dead events were replayed", "send the request again to replay theirs")
}

// retry serves POST /v1/endpoints/{name}/retry: for the whole group
// unless scope=local. Every member retries at once, each at an equal
// share of the rate, so that the group's pace is the rate.
func (h *Handler) retry(w http.ResponseWriter, r *http.Request) {
	body, ok := readOp(w, r)
	if !ok {
		return
	}
	sc, ok := scope(w, r, ScopeCluster)
	if !ok {
		return
	}
	if sc == ScopeLocal {
		write(w, h.serveLocal(withBody(r, body)), "")
		return
	}
	others, self, selfAt, err := h.members(r.Context())
	if err != nil {
		h.noMembers(w, "", err)
		return
	}
	shared := body // refused by the local API as it is when its rate is negative
	if rate := field(body, "rate"); rate >= 0 {
		if rate == 0 {
			rate = defaultRate
		}
		if b, ok := withField(body, "rate", rate/float64(len(others)+1)); ok {
			shared = b
		}
	}
	local := h.serveLocal(withBody(r, shared))
	local.peer = self
	switch local.status {
	case http.StatusAccepted, http.StatusNotFound, http.StatusConflict:
	default: // a bad body, a refused token: nothing is forwarded
		write(w, local, "")
		return
	}
	answers := slices.Insert(h.sendAll(r, others, r.URL.EscapedPath(), shared), selfAt, local)
	h.mergeRetry(w, r, answers, local)
}

// mergeRetry answers a retry from the members' answers: members that
// could not be asked are named (502, 504); else a member's own refusal
// (409: disabled there) is the answer; else the sum of those that know
// the endpoint, or local's 404 when none does.
func (h *Handler) mergeRetry(w http.ResponseWriter, r *http.Request, answers []*answer, local *answer) {
	known, failed := 0, 0
	for _, a := range answers {
		switch {
		case a.failed():
			failed++
		case a.status == http.StatusNotFound:
		case a.status == http.StatusAccepted:
			known++
		default:
			by := a.peer.URL // its own refusal
			if a.peer.Self {
				by = ""
			}
			write(w, a, by)
			return
		}
	}
	if known == 0 && failed == 0 {
		write(w, local, "") // nobody knows the endpoint: a 404
		return
	}
	res, down, timeouts := sumOp(answers, "retried")
	h.writeOp(w, r, res, down, timeouts, "the endpoint's pending events were made due", "send the request again (retrying twice is harmless)")
}

// sendOne sends r with body to a's member, bounded by ctx only.
func (h *Handler) sendOne(ctx context.Context, r *http.Request, a *answer, path string, body []byte) {
	if a.peer.URL == "" {
		a.err = errors.New("the member announces no API address")
		return
	}
	h.send(ctx, r, a, path, "", body)
}

// sendAll sends r with body to every peer at once, each within
// Config.Timeout, and returns their answers in the order of peers.
func (h *Handler) sendAll(r *http.Request, peers []Peer, path string, body []byte) []*answer {
	out := make([]*answer, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		out[i] = &answer{peer: p}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
			defer cancel()
			h.sendOne(ctx, r, out[i], path, body)
		})
	}
	wg.Wait()
	return out
}
