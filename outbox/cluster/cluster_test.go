package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/cluster"
	"github.com/outboxd/outbox/outbox/httpapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const token = "s3cret-token"

// deadSink keeps every event pending (503, retried in an hour), but makes
// the events whose key is "dead" dead letters at their first attempt, and
// disables the endpoint of those whose key is "gone" (410).
type deadSink struct {
	healed *atomic.Bool // when set and true, "gone" no longer disables
}

func (s deadSink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	switch {
	case d.Key == "dead":
		return outbox.Result{Action: outbox.ActionDead, Status: 422}
	case d.Key == "gone" && (s.healed == nil || !s.healed.Load()):
		return outbox.Result{Action: outbox.ActionDisable, Status: 410}
	}
	return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
}

// member is one instance of a test group: an outbox on a file, its API
// behind a cluster.Handler, served on loopback.
type member struct {
	id     string
	o      *outbox.Outbox
	srv    *httptest.Server
	seen   atomic.Int64 // requests that reached the member
	moving atomic.Bool  // the member reports partitions on the move
	copy   atomic.Pointer[staleCopy]
	h      *cluster.Handler
	// notYet, when set, answers the next read of the member's own API in
	// its place once (the member's partition is not serving yet).
	notYet atomic.Pointer[http.HandlerFunc]
}

// group is a test group whose members all know each other; down members
// stay listed but do not answer.
type group struct {
	healed  atomic.Bool // the receiver behind "gone" is back
	members []*member
	extra   []cluster.Peer // listed members that are not served here
	parts   map[string][]int
}

func newGroup(t testing.TB, n int, timeout time.Duration) *group {
	t.Helper()
	g := &group{parts: map[string][]int{}}
	for i := range n {
		m := &member{id: string(rune('a' + i))}
		o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{Sink: deadSink{healed: &g.healed}, Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
		m.o = o
		m.srv = httptest.NewUnstartedServer(nil)
		g.members = append(g.members, m)
	}
	for _, m := range g.members {
		self := "http://" + m.srv.Listener.Addr().String()
		api := httpapi.New(m.o, httpapi.Config{Token: token})
		local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f := m.notYet.Swap(nil); f != nil {
				(*f)(w, r)
				return
			}
			api.ServeHTTP(w, r)
		})
		h := cluster.New(local, cluster.Config{
			Self:    self,
			Timeout: timeout,
			Peers: func(context.Context) ([]cluster.Peer, error) {
				var out []cluster.Peer
				for _, p := range g.members {
					u := "http://" + p.srv.Listener.Addr().String()
					out = append(out, cluster.Peer{ID: p.id, URL: u, Self: p == m, Partitions: g.parts[p.id]})
				}
				return append(out, g.extra...), nil
			},
			Moving: m.moving.Load,
			Stale:  staleHandler(m),
			PartitionOf: func(id string) (int, bool) {
				if rest, ok := strings.CutPrefix(id, "part7-"); ok && rest != "" {
					return 7, true
				}
				return 0, false
			},
			PartitionOfKey: kafka.KeyPartition,
		})
		m.h = h
		counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.seen.Add(1)
			h.ServeHTTP(w, r)
		})
		// Every answer is checked against the OpenAPI document (but in
		// benchmarks, which measure the handler alone).
		m.srv.Config.Handler = counted
		if _, bench := t.(*testing.B); !bench {
			m.srv.Config.Handler = openapitest.Handler(t, counted)
		}
		m.srv.Start()
	}
	t.Cleanup(func() {
		for _, m := range g.members {
			m.srv.Close()
			m.h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := m.o.Stop(ctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
			cancel()
		}
	})
	return g
}

// reply is an answer as a client sees it.
type reply struct {
	status int
	header http.Header
	body   string
	json   map[string]any
}

func do(t *testing.T, m *member, method, path string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, m.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return send(t, req)
}

// send sends req and reads its answer.
func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rp := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &rp.json)
	return rp
}

func enqueue(t testing.TB, m *member, id, key string) {
	t.Helper()
	if _, err := m.o.Enqueue(context.Background(), outbox.Event{ID: id, Key: key, Destination: "orders", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

// Every member answers for an event held by another as the holder does;
// a dead letter is replayed, and an event deleted, through a member that
// does not hold it.
func TestAnyMemberAnswersForAnyEvent(t *testing.T) {
	g := newGroup(t, 3, 5*time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, b, "ev-1", "k")
	enqueue(t, c, "ev-dead", "dead")
	testkit.WaitFor(t, time.Minute, "ev-dead dead", func() bool {
		ev, err := c.o.Get(context.Background(), "ev-dead")
		return err == nil && ev.State == outbox.StateDead
	})
	// After its first attempt ev-1 waits an hour: it does not change
	// while the members are asked about it.
	testkit.WaitFor(t, time.Minute, "ev-1 attempted", func() bool {
		ev, err := b.o.Get(context.Background(), "ev-1")
		return err == nil && ev.Attempts == 1
	})

	own := do(t, b, "GET", "/v1/events/ev-1")
	if own.status != 200 || own.json["id"] != "ev-1" {
		t.Fatalf("the holder answers %d %s", own.status, own.body)
	}
	for _, m := range []*member{a, c} {
		got := do(t, m, "GET", "/v1/events/ev-1")
		if got.status != 200 || got.body != own.body {
			t.Errorf("member %s: %d %s, want the holder's answer %s", m.id, got.status, got.body, own.body)
		}
		if got.header.Get(cluster.ServedByHeader) != b.srv.URL {
			t.Errorf("member %s: served by %q, want %s", m.id, got.header.Get(cluster.ServedByHeader), b.srv.URL)
		}
		if at := do(t, m, "GET", "/v1/events/ev-1/attempts"); at.status != 200 {
			t.Errorf("member %s: attempts %d %s", m.id, at.status, at.body)
		}
	}
	if own.header.Get(cluster.ServedByHeader) != "" {
		t.Errorf("a local answer names a member: %q", own.header.Get(cluster.ServedByHeader))
	}

	if r := do(t, a, "POST", "/v1/events/ev-1/replay"); r.status != 409 {
		t.Errorf("replay of a pending event through a non-owner: %d %s, want the owner's 409", r.status, r.body)
	}
	if r := do(t, a, "POST", "/v1/events/ev-dead/replay"); r.status != 202 || r.json["state"] != "pending" {
		t.Errorf("replay of a dead letter through a non-owner: %d %s", r.status, r.body)
	}
	if r := do(t, a, "DELETE", "/v1/events/ev-1"); r.status != 204 {
		t.Errorf("delete through a non-owner: %d %s", r.status, r.body)
	}
	if ev, err := b.o.Get(context.Background(), "ev-1"); err != nil || ev.State != outbox.StateDeleted {
		t.Errorf("after the delete, the holder has %+v, %v", ev.State, err)
	}
	if r := do(t, c, "GET", "/v1/events/nowhere"); r.status != 404 {
		t.Errorf("an event no member holds: %d %s", r.status, r.body)
	}
	// While partitions move, an event found nowhere may be in one being
	// restored: not a 404, but a 503 to retry, whether the member asked
	// or another one has partitions on the move.
	for _, m := range []*member{c, b} {
		m.moving.Store(true)
		if r := do(t, c, "GET", "/v1/events/nowhere"); r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "moving") {
			t.Errorf("an event found nowhere while %s's partitions move: %d %s", m.id, r.status, r.body)
		}
		m.moving.Store(false)
	}
	if r := do(t, c, "GET", "/v1/events/ev-dead"); r.status != 200 {
		t.Errorf("an event found while partitions move: %d %s", r.status, r.body)
	}
	// a had the GET and the attempts of ev-1, two replays and the delete
	// answered by other members; c asked for "nowhere" three times.
	if got := a.h.Counts(); got.Answered != 5 || got.NotFound != 0 {
		t.Errorf("a's counts %+v, want 5 answered by another member", got)
	}
	if got := c.h.Counts(); got.NotFound != 1 || got.Moving != 2 {
		t.Errorf("c's counts %+v, want 1 not found and 2 while partitions moved", got)
	}
}

// Nothing is forwarded without the token; the token goes along to the
// holder; a forwarded request is never forwarded again.
func TestForwardingKeepsTheTokenAndNeverLoops(t *testing.T) {
	g := newGroup(t, 3, 5*time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, b, "ev-1", "k")
	before := b.seen.Load() + c.seen.Load()
	if r := do(t, a, "GET", "/v1/events/ev-1", "Authorization", ""); r.status != 401 {
		t.Errorf("without the token: %d %s", r.status, r.body)
	}
	if r := do(t, a, "GET", "/v1/events/ev-1", "Authorization", "Bearer wrong"); r.status != 401 {
		t.Errorf("with a wrong token: %d %s", r.status, r.body)
	}
	if n := b.seen.Load() + c.seen.Load() - before; n != 0 {
		t.Errorf("%d requests reached other members for a refused token", n)
	}
	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 200 {
		t.Errorf("with the token: %d %s", r.status, r.body)
	}
	before = b.seen.Load() + c.seen.Load()
	if r := do(t, a, "GET", "/v1/events/ev-1", cluster.ForwardedHeader, "http://elsewhere"); r.status != 404 {
		t.Errorf("a forwarded request for an event held elsewhere: %d %s, want the local 404", r.status, r.body)
	}
	if n := b.seen.Load() + c.seen.Load() - before; n != 0 {
		t.Errorf("a forwarded request was forwarded again, to %d members", n)
	}
}

// A member that cannot be asked is named, with its address (and as the
// owner when the ID tells its partition): 502 when it refuses the
// connection, 504 when it does not answer in time.
func TestUnreachableMembersAreNamed(t *testing.T) {
	g := newGroup(t, 2, 300*time.Millisecond)
	a := g.members[0]
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // nothing listens there any more
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL, Partitions: []int{7}}}
	g.parts["b"] = []int{1}
	r := do(t, a, "GET", "/v1/events/part7-x")
	if r.status != 502 || !strings.Contains(r.body, closed.URL) || !strings.Contains(r.body, "its owner, member gone") {
		t.Errorf("an unreachable owner: %d %s, want 502 naming its owner and address", r.status, r.body)
	}
	if strings.Contains(r.body, token) {
		t.Errorf("the answer holds the token: %s", r.body)
	}

	stall := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a member that does not answer in time
		case <-r.Context().Done():
		case <-stall:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(stall) })
	g.extra = []cluster.Peer{{ID: "slow", URL: slow.URL}}
	r = do(t, a, "DELETE", "/v1/events/anything")
	if r.status != 504 || !strings.Contains(r.body, slow.URL) {
		t.Errorf("a member that does not answer: %d %s, want 504 naming it", r.status, r.body)
	}
	g.extra = []cluster.Peer{{ID: "old"}}
	if r := do(t, a, "GET", "/v1/events/x"); r.status != 502 || !strings.Contains(r.body, "announces no API address") {
		t.Errorf("a member without an address: %d %s", r.status, r.body)
	}
	g.extra = []cluster.Peer{{ID: "odd", URL: "file:///etc/passwd"}}
	if r := do(t, a, "GET", "/v1/events/x"); r.status != 502 || !strings.Contains(r.body, "not an http://") {
		t.Errorf("a member with an address that is not http(s): %d %s", r.status, r.body)
	}
	if got := a.h.Counts(); got.Unreachable != 4 {
		t.Errorf("a's counts %+v, want 4 unreachable", got)
	}
}

// The stats sum those of every member and say which answered, unless
// scope=local; with scope=cluster the endpoints are merged.
func TestClusterScopeSumsStatsAndMergesEndpoints(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, a, "a-1", "k")
	enqueue(t, b, "b-1", "k")
	enqueue(t, b, "b-2", "k")
	enqueue(t, c, "c-1", "dead")
	// No endpoint subscribes to any topic here: a topic event is kept unrouted.
	if _, err := b.o.Enqueue(context.Background(), outbox.Event{ID: "b-topic", Topic: "order.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "c-1 dead", func() bool { return c.o.Stats().Dead == 1 })

	r := do(t, a, "GET", "/v1/stats?scope=cluster")
	if r.status != 200 || r.json["pending"] != 3.0 || r.json["dead"] != 1.0 || r.json["unrouted"] != 1.0 || r.json["complete"] != true || r.json["scope"] != "cluster" {
		t.Fatalf("cluster stats: %d %s", r.status, r.body)
	}
	ms, _ := r.json["members"].([]any)
	if len(ms) != 3 {
		t.Fatalf("members: %s", r.body)
	}
	for i, m := range ms {
		mv := m.(map[string]any)
		if mv["answered"] != true || mv["member"] != g.members[i].id || (mv["self"] == true) != (i == 0) {
			t.Errorf("member %d: %v", i, mv)
		}
	}
	if r := do(t, a, "GET", "/v1/stats"); r.status != 200 || r.json["pending"] != 3.0 || r.json["scope"] != "cluster" {
		t.Errorf("stats without a scope: %d %s, want the group's", r.status, r.body)
	}
	if r := do(t, a, "GET", "/v1/stats?scope=local"); r.status != 200 || r.json["pending"] != 1.0 || r.json["members"] != nil {
		t.Errorf("stats?scope=local: %d %s, want a's own", r.status, r.body)
	}
	if r := do(t, a, "GET", "/v1/stats?scope=galaxy"); r.status != 400 || !strings.Contains(r.body, "scope") {
		t.Errorf("a bad scope: %d %s", r.status, r.body)
	}

	e := do(t, b, "GET", "/v1/endpoints?scope=cluster")
	eps, _ := e.json["endpoints"].([]any)
	if e.status != 200 || len(eps) != 1 || eps[0].(map[string]any)["name"] != "orders" || e.json["complete"] != true {
		t.Errorf("cluster endpoints: %d %s", e.status, e.body)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL}}
	r = do(t, c, "GET", "/v1/stats?scope=cluster")
	ms, _ = r.json["members"].([]any)
	if r.status != 200 || r.json["complete"] != false || r.json["pending"] != 3.0 || len(ms) != 4 {
		t.Fatalf("cluster stats with a member down: %d %s", r.status, r.body)
	}
	if last := ms[3].(map[string]any); last["answered"] != false || last["error"] == "" || last["api"] != closed.URL {
		t.Errorf("the member down: %v", last)
	}
	if r := do(t, c, "GET", "/v1/stats?scope=cluster", "Authorization", ""); r.status != 401 {
		t.Errorf("cluster stats without the token: %d", r.status)
	}
	if got := c.h.Counts(); got.ClusterViews != 1 || got.Incomplete != 1 {
		t.Errorf("c's counts %+v, want one incomplete cluster view", got)
	}
}

// Enabling an endpoint through any member enables it on every member that
// disabled it; an endpoint no member knows is a 404.
func TestEnableReachesEveryMember(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, b, "b-1", "gone")
	enqueue(t, c, "c-1", "gone")
	disabled := func(m *member) bool {
		eps, err := m.o.Endpoints(context.Background())
		return err == nil && len(eps) == 1 && eps[0].Disabled
	}
	testkit.WaitFor(t, time.Minute, "orders disabled on b and c", func() bool { return disabled(b) && disabled(c) })
	if r := do(t, a, "GET", "/v1/endpoints?scope=cluster"); !strings.Contains(r.body, `"disabled":true`) {
		t.Errorf("cluster endpoints with orders disabled on b and c: %s", r.body)
	}
	g.healed.Store(true)
	r := do(t, a, "POST", "/v1/endpoints/orders/enable")
	if r.status != 200 || r.json["name"] != "orders" || r.json["disabled"] != false {
		t.Fatalf("enable through a: %d %s", r.status, r.body)
	}
	if disabled(b) || disabled(c) {
		t.Errorf("after the enable through a: disabled on b %v, on c %v", disabled(b), disabled(c))
	}
	if r := do(t, a, "POST", "/v1/endpoints/nobody/enable"); r.status != 404 {
		t.Errorf("enable of an endpoint no member knows: %d %s", r.status, r.body)
	}
	before := b.seen.Load()
	if r := do(t, a, "POST", "/v1/endpoints/orders/enable", "Authorization", ""); r.status != 401 || b.seen.Load() != before {
		t.Errorf("enable without the token: %d, %d requests reached b", r.status, b.seen.Load()-before)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL}}
	if r := do(t, a, "POST", "/v1/endpoints/orders/enable"); r.status != 502 || !strings.Contains(r.body, closed.URL) || !strings.Contains(r.body, "send the request again") {
		t.Errorf("enable with a member down: %d %s", r.status, r.body)
	}
}

// The member that holds the event answers at once: a member that does not
// answer is not waited for (its request is cancelled).
func TestTheHolderIsNotHeldUpByASlowMember(t *testing.T) {
	g := newGroup(t, 2, 10*time.Minute)
	a, b := g.members[0], g.members[1]
	enqueue(t, b, "ev-1", "k")
	cancelled := make(chan struct{}, 1)
	var arrived atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Store(true)
		<-r.Context().Done() // answers nothing until the request is given up
		cancelled <- struct{}{}
	}))
	t.Cleanup(slow.Close)
	g.extra = []cluster.Peer{{ID: "slow", URL: slow.URL}}
	if r := do(t, a, "GET", "/v1/events/ev-1"); r.status != 200 || r.header.Get(cluster.ServedByHeader) != b.srv.URL {
		t.Fatalf("GET through a with a slow member: %d %s", r.status, r.body)
	}
	if !arrived.Load() {
		// b answered before the request to the slow member went out: it
		// was given up before it was sent.
		return
	}
	testkit.WaitFor(t, 30*time.Second, "the slow member's request cancelled", func() bool {
		select {
		case <-cancelled:
			return true
		default:
			return false
		}
	})
}

// scope=cluster pages the endpoints as one list: every member is asked for
// the same page and the answers are merged by name with the same cursor,
// every name once, in order, over members whose endpoints overlap.
func TestClusterScopePagesEndpoints(t *testing.T) {
	g := newGroup(t, 2, 10*time.Second)
	a, b := g.members[0], g.members[1]
	for _, m := range []struct {
		m        *member
		from, to int
	}{{a, 0, 180}, {b, 60, 250}} {
		var evs []outbox.Event
		for i := m.from; i < m.to; i++ {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("%s-%03d", m.m.id, i), Destination: fmt.Sprintf("ep-%03d", i)})
		}
		if _, err := m.m.o.Enqueue(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, time.Minute, "every endpoint's state", func() bool {
		return a.o.Stats().Endpoints == 180 && b.o.Stats().Endpoints == 190
	})
	var got []string
	pages := 0
	for after := ""; ; {
		r := do(t, b, "GET", "/v1/endpoints?scope=cluster&limit=100&after="+after)
		pages++
		if r.status != 200 || r.json["complete"] != true {
			t.Fatalf("page after %q: %d %s", after, r.status, r.body)
		}
		for _, e := range r.json["endpoints"].([]any) {
			e := e.(map[string]any)
			got = append(got, e["name"].(string))
			var i int
			fmt.Sscanf(e["name"].(string), "ep-%03d", &i)
			if want := 1.0 + float64(b2i(60 <= i && i < 180)); e["failure_streak"] != want {
				t.Errorf("%s: failure streak %v, want %v (summed over the members)", e["name"], e["failure_streak"], want)
			}
		}
		if after = r.json["next"].(string); after == "" {
			break
		}
	}
	want := make([]string, 250)
	for i := range want {
		want[i] = fmt.Sprintf("ep-%03d", i)
	}
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages of %v, want 3 pages of ep-000 to ep-249", pages, got)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
