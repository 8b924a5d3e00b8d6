package testkit

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Request is what a [Receiver] saw of one request, and what it answered.
type Request struct {
	// ID is the value of the receiver's ID header ("" if absent).
	ID     string
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Status is the status answered; 0 while the answer is being decided.
	Status int
	// Acked is true for a 2xx answered while the sender still waited for
	// it: a delivery the sender can know succeeded.
	Acked bool
	// At is when the request arrived.
	At time.Time
}

// Reply is a receiver's answer to one request.
type Reply struct {
	Status int         // 0 means 204 No Content
	Header http.Header // added to the answer's headers
	Body   string
}

// Answer decides the reply to a request. id is the value of the receiver's
// ID header and n the number of earlier requests with that ID. The
// request's body can be read again. An Answer may block (to play a slow
// receiver) until the request's context ends.
type Answer func(r *http.Request, id string, n int) Reply

// Receiver is a real HTTP server on loopback standing for the receiver of
// deliveries: it answers each request with its Answer and records every
// request, by ID, with what it answered. It is safe for concurrent use, and
// closed at the test's cleanup.
type Receiver struct {
	*httptest.Server
	idHeader string

	mu     sync.Mutex
	answer Answer
	reqs   []*Request
	byID   map[string][]*Request
}

// NewReceiver starts a receiver that identifies requests by the header
// idHeader (such as "webhook-id" or "Idempotency-Key") and answers with
// answer (nil: 204 No Content to everything).
func NewReceiver(t testing.TB, idHeader string, answer Answer) *Receiver {
	t.Helper()
	rc := &Receiver{idHeader: idHeader, answer: answer, byID: map[string][]*Request{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

// NewReceiverOn is NewReceiver serving on l: a receiver that comes back on
// an address where connections were refused, say.
func NewReceiverOn(t testing.TB, l net.Listener, idHeader string, answer Answer) *Receiver {
	t.Helper()
	rc := &Receiver{idHeader: idHeader, answer: answer, byID: map[string][]*Request{}}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.Listener.Close()
	rc.Listener = l
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the sender went away
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	req := &Request{ID: r.Header.Get(rc.idHeader), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now()}
	rc.mu.Lock()
	n := len(rc.byID[req.ID])
	rc.reqs = append(rc.reqs, req)
	rc.byID[req.ID] = append(rc.byID[req.ID], req)
	answer := rc.answer
	rc.mu.Unlock()
	var reply Reply
	if answer != nil {
		reply = answer(r, req.ID, n)
	}
	if reply.Status == 0 {
		reply.Status = http.StatusNoContent
	}
	rc.mu.Lock()
	req.Status = reply.Status
	req.Acked = reply.Status/100 == 2 && r.Context().Err() == nil
	rc.mu.Unlock()
	for k, v := range reply.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(reply.Status)
	_, _ = io.WriteString(w, reply.Body)
}

// SetAnswer changes how the receiver answers from now on.
func (rc *Receiver) SetAnswer(answer Answer) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = answer
}

// Forget drops the requests recorded so far.
func (rc *Receiver) Forget() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs, rc.byID = nil, map[string][]*Request{}
}

// Requests returns copies of the requests received, in arrival order.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]Request, len(rc.reqs))
	for i, r := range rc.reqs {
		out[i] = *r
	}
	return out
}

// Attempts is the number of requests received with id, answered or not.
func (rc *Receiver) Attempts(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.byID[id])
}

// Statuses returns the statuses answered to the requests with id, in
// order.
func (rc *Receiver) Statuses(id string) []int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []int
	for _, r := range rc.byID[id] {
		if r.Status != 0 {
			out = append(out, r.Status)
		}
	}
	return out
}

// Acked is the number of requests with id acknowledged (see
// [Request.Acked]).
func (rc *Receiver) Acked(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, r := range rc.byID[id] {
		if r.Acked {
			n++
		}
	}
	return n
}

// Successes is the number of 2xx answers, to any ID.
func (rc *Receiver) Successes() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, r := range rc.reqs {
		if r.Status/100 == 2 {
			n++
		}
	}
	return n
}

// Missing returns the IDs of ids that no request acknowledged.
func (rc *Receiver) Missing(ids []string) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, id := range ids {
		acked := false
		for _, r := range rc.byID[id] {
			acked = acked || r.Acked
		}
		if !acked {
			out = append(out, id)
		}
	}
	return out
}

// MostWithin returns the most of times that fall within one window of
// length d: the peak rate, as a rate limit must bound it.
func MostWithin(times []time.Time, d time.Duration) int {
	times = slices.Clone(times)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, j := 0, 0; i < len(times); i++ {
		for times[i].Sub(times[j]) >= d {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}
