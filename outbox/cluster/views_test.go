package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/cluster"
)

// post sends a JSON body with the token to m.
func post(t *testing.T, m *member, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, m.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return send(t, req)
}

// listed reads the IDs of a listing answer.
func listedIDs(t *testing.T, r reply) []string {
	t.Helper()
	var out []string
	evs, _ := r.json["events"].([]any)
	for _, e := range evs {
		out = append(out, e.(map[string]any)["id"].(string))
	}
	return out
}

// memberCounts reads "members" of a group answer: each member's count
// under name, by member ID, and the IDs of those that did not answer.
func memberCounts(r reply, name string) (map[string]float64, []string) {
	counts := map[string]float64{}
	var down []string
	ms, _ := r.json["members"].([]any)
	for _, m := range ms {
		mv := m.(map[string]any)
		if mv["answered"] != true {
			down = append(down, mv["member"].(string))
			continue
		}
		n, _ := mv[name].(float64)
		counts[mv["member"].(string)] = n
	}
	return counts, down
}

// A paged listing through one member returns the events of every member
// exactly once, in ID order, whatever member holds each.
func TestListingPagesAcrossMembers(t *testing.T) {
	g := newGroup(t, 3, 10*time.Second)
	const n = 3000
	batches := make([][]outbox.Event, 3)
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("ev-%05d", i)
		batches[i%3] = append(batches[i%3], outbox.Event{ID: want[i], Key: "k", Destination: "orders", Payload: []byte(`{}`)})
	}
	for i, m := range g.members {
		if _, err := m.o.Enqueue(context.Background(), batches[i]...); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	pages := 0
	for after := ""; ; pages++ {
		r := do(t, g.members[1], "GET", "/v1/events?limit=100&after="+url.QueryEscape(after))
		if r.status != 200 || r.json["complete"] != true || r.json["scope"] != "cluster" {
			t.Fatalf("page after %q: %d %s", after, r.status, r.body)
		}
		got = append(got, listedIDs(t, r)...)
		if after = r.json["next"].(string); after == "" {
			break
		}
		if pages > n {
			t.Fatal("the listing does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d events in %d pages, want each of the %d once in order; first differences: %v", len(got), pages, n, firstDiff(got, want))
	}
	t.Logf("%d events in %d pages of 100", len(got), pages)
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %s, want %s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// The listing keeps its filters on every member; scope=local lists this
// member's own events; a member that does not answer leaves the listing
// incomplete and is named; a forwarded listing is the member's own.
func TestListingFiltersScopesAndMissingMembers(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, a, "a-1", "k")
	enqueue(t, b, "b-1", "k")
	enqueue(t, c, "c-1", "k")
	enqueue(t, b, "b-dead", "dead")
	enqueue(t, c, "c-dead", "dead")
	for _, m := range []*member{b, c} {
		if _, err := m.o.Enqueue(context.Background(), outbox.Event{ID: m.id + "-refund", Destination: "refunds", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, time.Minute, "the dead letters", func() bool { return b.o.Stats().Dead == 1 && c.o.Stats().Dead == 1 })

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a-1", "b-1", "b-refund", "c-1", "c-refund"}},
		{"?scope=cluster&destination=refunds", []string{"b-refund", "c-refund"}},
		{"?state=dead", []string{"b-dead", "c-dead"}},
		{"?limit=2", []string{"a-1", "b-1"}},
		{"?limit=2&after=b-1", []string{"b-refund", "c-1"}},
	} {
		r := do(t, a, "GET", "/v1/events"+tc.query)
		if got := listedIDs(t, r); r.status != 200 || !slices.Equal(got, tc.want) || r.json["complete"] != true {
			t.Errorf("listing%s: %d %v, want %v (%s)", tc.query, r.status, got, tc.want, r.body)
		}
	}
	r := do(t, b, "GET", "/v1/events?scope=local")
	if got := listedIDs(t, r); r.status != 200 || !slices.Equal(got, []string{"b-1", "b-refund"}) || r.json["members"] != nil {
		t.Errorf("listing with scope=local on b: %d %s", r.status, r.body)
	}
	r = do(t, b, "GET", "/v1/events?scope=cluster", cluster.ForwardedHeader, a.srv.URL)
	if got := listedIDs(t, r); r.status != 200 || !slices.Equal(got, []string{"b-1", "b-refund"}) {
		t.Errorf("a forwarded listing on b: %d %s, want b's own", r.status, r.body)
	}
	for _, q := range []string{"?scope=galaxy", "?state=gone", "?color=red"} {
		if r := do(t, a, "GET", "/v1/events"+q); r.status != 400 {
			t.Errorf("listing%s: %d %s, want 400", q, r.status, r.body)
		}
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL}}
	r = do(t, c, "GET", "/v1/events")
	_, down := memberCounts(r, "")
	if got := listedIDs(t, r); r.status != 200 || r.json["complete"] != false || len(got) != 5 || !slices.Equal(down, []string{"gone"}) {
		t.Errorf("listing with a member down: %d %s", r.status, r.body)
	}
}

// A dead replay through one member replays the dead letters of every
// member, within the limit over all of them, and names a member that
// could not be asked; scope=local replays the member's own.
func TestDeadReplayReachesEveryMember(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	for i := range 2 {
		enqueue(t, b, fmt.Sprintf("b-dead-%d", i), "dead")
	}
	for i := range 3 {
		enqueue(t, c, fmt.Sprintf("c-dead-%d", i), "dead")
	}
	// A replayed dead letter is attempted again and is dead again.
	allDead := func() {
		t.Helper()
		testkit.WaitFor(t, time.Minute, "every dead letter dead", func() bool {
			return b.o.Stats().Dead == 2 && c.o.Stats().Dead == 3 && b.o.Stats().InFlight+c.o.Stats().InFlight == 0
		})
	}
	allDead()
	r := post(t, a, "/v1/dead/replay", "")
	counts, down := memberCounts(r, "replayed")
	if r.status != 202 || r.json["replayed"] != 5.0 || r.json["complete"] != true || len(down) > 0 ||
		counts["a"] != 0 || counts["b"] != 2 || counts["c"] != 3 {
		t.Fatalf("dead replay through a: %d %s", r.status, r.body)
	}
	allDead()
	if r := post(t, a, "/v1/dead/replay", `{"limit": 3, "rate": 1000}`); r.status != 202 || r.json["replayed"] != 3.0 {
		t.Errorf("dead replay with limit 3: %d %s", r.status, r.body)
	}
	allDead()
	if r := post(t, b, "/v1/dead/replay?scope=local", `{"key_prefix": "de"}`); r.status != 202 || r.json["replayed"] != 2.0 || r.json["members"] != nil {
		t.Errorf("dead replay with scope=local on b: %d %s", r.status, r.body)
	}
	allDead()
	before := b.seen.Load() + c.seen.Load()
	if r := post(t, a, "/v1/dead/replay", `{"limit": -1}`); r.status != 400 || b.seen.Load()+c.seen.Load() != before {
		t.Errorf("a refused filter: %d %s, %d requests reached other members", r.status, r.body, b.seen.Load()+c.seen.Load()-before)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL}}
	r = post(t, a, "/v1/dead/replay", "{}")
	_, down = memberCounts(r, "replayed")
	if r.status != 502 || r.json["replayed"] != 5.0 || !strings.Contains(r.body, closed.URL) || !slices.Equal(down, []string{"gone"}) {
		t.Errorf("dead replay with a member down: %d %s", r.status, r.body)
	}
}

// A retry of an endpoint through one member makes its pending events due
// on every member, and says how many; an endpoint no member knows is a
// 404.
func TestRetryReachesEveryMember(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	enqueue(t, a, "a-1", "k")
	enqueue(t, b, "b-1", "k")
	enqueue(t, b, "b-2", "k")
	// Each attempt is answered 503 with Retry-After: 1h, which throttles
	// the endpoint in the member's store for an hour: the events wait.
	attempted := func(onA, onB uint64) {
		t.Helper()
		testkit.WaitFor(t, time.Minute, "the events attempted", func() bool {
			return a.o.Stats().FailedTotal == onA && b.o.Stats().FailedTotal == onB && a.o.Stats().InFlight+b.o.Stats().InFlight == 0
		})
	}
	attempted(1, 2)
	// At 3/s over three members, b's second event is due a second after
	// its first, whose 503 throttles the endpoint again: it waits.
	r := post(t, c, "/v1/endpoints/orders/retry", `{"rate": 3}`)
	counts, down := memberCounts(r, "retried")
	if r.status != 202 || r.json["retried"] != 3.0 || len(down) > 0 || counts["a"] != 1 || counts["b"] != 2 || counts["c"] != 0 {
		t.Fatalf("retry through c: %d %s", r.status, r.body)
	}
	attempted(2, 3)
	if r := post(t, b, "/v1/endpoints/orders/retry?scope=local", ""); r.status != 202 || r.json["retried"] != 2.0 || r.json["members"] != nil {
		t.Errorf("retry with scope=local on b: %d %s", r.status, r.body)
	}
	if r := post(t, c, "/v1/endpoints/nobody/retry", ""); r.status != 404 {
		t.Errorf("retry of an endpoint no member knows: %d %s", r.status, r.body)
	}
	if r := post(t, c, "/v1/endpoints/orders/retry", `{"rate": -1}`); r.status != 400 {
		t.Errorf("retry at a negative rate: %d %s", r.status, r.body)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	g.extra = []cluster.Peer{{ID: "gone", URL: closed.URL}}
	r = post(t, c, "/v1/endpoints/orders/retry", "")
	_, down = memberCounts(r, "retried")
	if r.status != 502 || r.json["retried"] == nil || !strings.Contains(r.body, closed.URL) || !slices.Equal(down, []string{"gone"}) {
		t.Errorf("retry with a member down: %d %s", r.status, r.body)
	}
}

// A GET for an event whose ID or key names its partition goes to the
// partition's owner alone: one forwarded request; when the owner does
// not hold it (the partition moved), every member is asked.
func TestGetGoesToTheOwnerInOneRequest(t *testing.T) {
	g := newGroup(t, 3, 5*time.Second)
	a, b, c := g.members[0], g.members[1], g.members[2]
	g.parts = map[string][]int{"a": {0, 1}, "b": {2, 3}, "c": {4, 5}}
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("customer-%d", i)
		if p, ok := kafka.KeyPartition(k, 6); ok && (p == 2 || p == 3) {
			key = k
		}
	}
	if _, err := b.o.Enqueue(context.Background(), outbox.Event{ID: "order-1", Key: key, Destination: "orders", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (status int, forwarded uint64, reachedC int64) {
		t.Helper()
		f, seen := a.h.Counts().Forwarded, c.seen.Load()
		r := do(t, a, "GET", path)
		if r.status == 200 && r.header.Get(cluster.ServedByHeader) != b.srv.URL {
			t.Errorf("GET %s: served by %q, want b", path, r.header.Get(cluster.ServedByHeader))
		}
		return r.status, a.h.Counts().Forwarded - f, c.seen.Load() - seen
	}
	if st, n, toC := get("/v1/events/order-1?key=" + url.QueryEscape(key)); st != 200 || n != 1 || toC != 0 {
		t.Errorf("GET with the key: %d, %d forwarded requests, %d reached c; want 200 through one request to b", st, n, toC)
	}
	if st, n, _ := get("/v1/events/order-1"); st != 200 || n != 2 {
		t.Errorf("GET without the key: %d, %d forwarded requests; want 200 through both others", st, n)
	}

	// An ID that names partition 7.
	g.parts = map[string][]int{"a": {0}, "b": {7}, "c": {1}}
	enqueue(t, b, "part7-x", "k")
	if st, n, toC := get("/v1/events/part7-x"); st != 200 || n != 1 || toC != 0 {
		t.Errorf("GET of an ID naming its partition: %d, %d forwarded requests, %d reached c; want one to b", st, n, toC)
	}
	// Partition 7 said to be b's, but c holds the event: the others are
	// asked, b not twice.
	enqueue(t, c, "part7-y", "k")
	before := a.h.Counts().Forwarded
	r := do(t, a, "GET", "/v1/events/part7-y")
	if r.status != 200 || r.header.Get(cluster.ServedByHeader) != c.srv.URL {
		t.Errorf("GET of an event its partition's owner does not hold: %d %s", r.status, r.body)
	}
	if n := a.h.Counts().Forwarded - before; n != 2 {
		t.Errorf("GET of an event its partition's owner does not hold: %d forwarded requests, want 2 (b, then c)", n)
	}
	if got := a.h.Counts(); got.Answered != 4 {
		t.Errorf("a's counts %+v, want 4 answered by another member", got)
	}
}

// A retry of an endpoint disabled on one member is that member's 409, as
// on one machine: enable it instead.
func TestRetryPassesOnAMembersRefusal(t *testing.T) {
	g := newGroup(t, 3, time.Second)
	a, c := g.members[0], g.members[2]
	enqueue(t, a, "a-1", "k")
	enqueue(t, c, "c-1", "gone")
	testkit.WaitFor(t, time.Minute, "orders disabled on c", func() bool {
		eps, err := c.o.Endpoints(context.Background())
		return err == nil && len(eps) == 1 && eps[0].Disabled
	})
	r := post(t, a, "/v1/endpoints/orders/retry", "")
	if r.status != 409 || r.header.Get(cluster.ServedByHeader) != c.srv.URL || !strings.Contains(r.body, "enable") {
		t.Errorf("retry through a of an endpoint disabled on c: %d %s (served by %q)", r.status, r.body, r.header.Get(cluster.ServedByHeader))
	}
}
