//go:build fault

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// answer is what the receiver does with one delivery.
type answer uint8

const (
	answerOK          answer = iota // 200: delivered
	answerNotYet                    // 404: parked by the default policy
	answerThrottle                  // 429 with Retry-After: 1
	answerFail                      // 500: retried
	answerUnavailable               // 503: retried
	answerHang                      // no answer until the sender gives up (a timeout)
	answerReset                     // the connection is reset (RST) without an answer
	answerGone                      // 410: the endpoint is disabled by the default policy
	answerDead                      // 422: dead-lettered by the default policy
	numAnswers
)

func (a answer) String() string {
	return [...]string{"200", "404", "429", "500", "503", "timeout", "reset", "410", "422"}[a]
}

// delivery is one 200 the receiver answered.
type delivery struct {
	Gen int // which outboxd run sent it (from the endpoint URL)
	At  time.Time
}

// receiver is the loopback endpoint outboxd delivers to. Each outboxd run
// gets its own URL (/gen/N), so that every delivery is attributed to the run
// that sent it, even when it is read after that run was killed. It records
// every 200 it answers per event ID, and checks that the payload is the one
// enqueued under that ID.
type receiver struct {
	t    *testing.T
	srv  *http.Server
	base string
	done chan struct{}

	choose atomic.Pointer[func(id string) answer]

	mu         sync.Mutex
	deliveries map[string][]delivery
	answers    [numAnswers]int
	violations []string
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, base: "http://" + ln.Addr().String(), done: make(chan struct{}), deliveries: make(map[string][]delivery)}
	r.set(func(string) answer { return answerOK })
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		r.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		r.srv.Close()
		<-r.done
	})
	return r
}

// url is the endpoint URL for outboxd run gen.
func (r *receiver) url(gen int) string { return fmt.Sprintf("%s/gen/%d", r.base, gen) }

// set changes how the receiver answers from now on.
func (r *receiver) set(f func(id string) answer) { r.choose.Store(&f) }

func (r *receiver) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 100 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	gen, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/gen/"))
	if err != nil {
		r.violate("delivery to unexpected path %q", req.URL.Path)
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	id := req.Header.Get("webhook-id")
	body, err := io.ReadAll(io.LimitReader(req.Body, 4<<20))
	if err != nil {
		return // the sender went away
	}
	if id == "" || req.Header.Get("Idempotency-Key") != id {
		r.violate("delivery with webhook-id %q and Idempotency-Key %q", id, req.Header.Get("Idempotency-Key"))
	}
	var p struct{ ID string }
	if err := json.Unmarshal(body, &p); err != nil || p.ID != id {
		r.violate("event %s delivered with payload %.80q, which is not its own", id, body)
	}
	a := (*r.choose.Load())(id)
	r.mu.Lock()
	r.answers[a]++
	r.mu.Unlock()
	switch a {
	case answerOK:
		r.mu.Lock()
		r.deliveries[id] = append(r.deliveries[id], delivery{Gen: gen, At: time.Now()})
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	case answerNotYet:
		w.WriteHeader(http.StatusNotFound)
	case answerThrottle:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	case answerFail:
		w.WriteHeader(http.StatusInternalServerError)
	case answerUnavailable:
		w.WriteHeader(http.StatusServiceUnavailable)
	case answerHang:
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		select {
		case <-req.Context().Done():
		case <-t.C:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	case answerGone:
		w.WriteHeader(http.StatusGone)
	case answerDead:
		w.WriteHeader(http.StatusUnprocessableEntity)
	case answerReset:
		rc := http.NewResponseController(w)
		conn, _, err := rc.Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST
		}
		conn.Close()
	}
}

// okCount is the number of 200s answered so far.
func (r *receiver) okCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[answerOK]
}

// delivered returns a copy of the 200s per event ID.
func (r *receiver) delivered() map[string][]delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]delivery, len(r.deliveries))
	for id, ds := range r.deliveries {
		out[id] = append([]delivery(nil), ds...)
	}
	return out
}

// hasAll reports whether every ID in ids was answered 200 at least once.
func (r *receiver) hasAll(ids map[string]bool) (missing int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range ids {
		if len(r.deliveries[id]) == 0 {
			missing++
		}
	}
	return missing
}

func (r *receiver) answerCounts() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for a := range numAnswers {
		if n := r.answers[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", a, n))
		}
	}
	return strings.Join(parts, ", ")
}

// ---- the loaded client ----

// loader posts batches of events with IDs of its own to outboxd's API at a
// steady rate, across kills and restarts, and keeps the ledger: which IDs
// were acknowledged (202), and which had an unknown fate (no answer, or an
// error answer: such an event may or may not be stored).
type loader struct {
	addr    string
	prefix  string
	rate    int // events per second
	batch   int // events per request
	payload int // padding bytes per payload
	workers int

	seq atomic.Int64

	mu      sync.Mutex
	acked   map[string]bool
	unknown map[string]bool
	refused map[int]int // status -> requests
	neterrs int
	lastErr string // the last error answer or transport error
}

func newLoader(addr, prefix string, rate, batch, payload int) *loader {
	return &loader{addr: addr, prefix: prefix, rate: rate, batch: batch, payload: payload, workers: 4,
		acked: make(map[string]bool), unknown: make(map[string]bool), refused: make(map[int]int)}
}

// run sends until ctx is done; it returns when every worker has stopped.
// A request already sent is not cancelled by ctx (only bounded by the
// client's timeout): its answer decides whether its events were
// acknowledged, so that stopping the load adds no unknown fates.
func (l *loader) run(ctx context.Context) {
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: l.workers}}
	defer client.CloseIdleConnections()
	every := time.Duration(float64(time.Second) * float64(l.batch*l.workers) / float64(l.rate))
	var wg sync.WaitGroup
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				l.send(context.Background(), client)
			}
		}()
	}
	wg.Wait()
}

// send posts one batch (to the address current at the time).
func (l *loader) send(ctx context.Context, client *http.Client) {
	ids := make([]string, l.batch)
	var body bytes.Buffer
	body.WriteByte('[')
	pad := strings.Repeat("x", l.payload)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%07d", l.prefix, l.seq.Add(1))
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"id":%q,"destination":"recv","payload":{"id":%q,"pad":%q}}`, ids[i], ids[i], pad)
	}
	body.WriteByte(']')
	l.mu.Lock()
	addr := l.addr
	l.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/events", &body)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		l.mu.Lock()
		l.neterrs++
		l.lastErr = err.Error()
		for _, id := range ids {
			l.unknown[id] = true
		}
		l.mu.Unlock()
		return
	}
	defer resp.Body.Close()
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct{ IDs []string }
	derr := json.Unmarshal(raw, &out)
	l.mu.Lock()
	defer l.mu.Unlock()
	if resp.StatusCode != http.StatusAccepted || rerr != nil || derr != nil {
		l.refused[resp.StatusCode]++
		l.lastErr = fmt.Sprintf("%d %.200s", resp.StatusCode, bytes.TrimSpace(raw))
		for _, id := range ids {
			l.unknown[id] = true
		}
		return
	}
	for i, id := range ids {
		if i < len(out.IDs) && out.IDs[i] == id {
			l.acked[id] = true
		} else {
			l.unknown[id] = true
		}
	}
}

// refusedTotal is the number of requests answered with an error.
func (l *loader) refusedTotal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.refused {
		n += c
	}
	return n
}

// ackedTotal is the number of acknowledged events.
func (l *loader) ackedTotal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// lastRefusal is the last error answer (status and body) or transport error.
func (l *loader) lastRefusal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// ledger returns copies of the acknowledged and unknown IDs.
func (l *loader) ledger() (acked, unknown map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acked = make(map[string]bool, len(l.acked))
	for id := range l.acked {
		acked[id] = true
	}
	unknown = make(map[string]bool, len(l.unknown))
	for id := range l.unknown {
		unknown[id] = true
	}
	return acked, unknown
}

func (l *loader) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d acknowledged, %d with unknown fate (%d requests without an answer, error answers %v)",
		len(l.acked), len(l.unknown), l.neterrs, l.refused)
	if l.lastErr != "" {
		s += fmt.Sprintf(", last error %q", l.lastErr)
	}
	return s
}
