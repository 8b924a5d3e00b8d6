package httpapi_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// newTopicEnv starts an outbox delivering to the receivers by endpoint
// name, each subscribed to the topics given for it, and serves its API.
func newTopicEnv(t *testing.T, rcvs map[string]*testkit.Receiver, topics map[string][]string) *env {
	t.Helper()
	var eps []httpsink.Endpoint
	var subs []outbox.Subscription
	for _, name := range slices.Sorted(maps.Keys(rcvs)) {
		eps = append(eps, httpsink.Endpoint{Name: name, URL: rcvs[name].URL, AllowPrivate: true})
		if ts := topics[name]; len(ts) > 0 {
			subs = append(subs, outbox.Subscription{Endpoint: name, Topics: ts})
		}
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink:           sink,
		Subscriptions:  subs,
		Interval:       20 * time.Millisecond,
		ParkInterval:   50 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
		NoSync:         true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, o, sink, httpapi.Config{})
}

// statusReceiver answers each request with the status fn picks from the
// number of earlier requests with the same webhook-id.
func statusReceiver(t *testing.T, fn func(n int) int) *testkit.Receiver {
	t.Helper()
	return testkit.NewReceiver(t, "webhook-id", func(_ *http.Request, _ string, n int) testkit.Reply {
		return testkit.Reply{Status: fn(n)}
	})
}

// deliveries returns the "deliveries" of a GET /v1/events/{id} answer by
// endpoint.
func deliveries(t *testing.T, m map[string]any) map[string]map[string]any {
	t.Helper()
	raw, _ := m["deliveries"].([]any)
	out := map[string]map[string]any{}
	for _, d := range raw {
		dm := d.(map[string]any)
		out[dm["endpoint"].(string)] = dm
	}
	return out
}

// deliveryState returns the state of the delivery of id to endpoint, as
// GET /v1/events/{id} shows it ("" when it shows none).
func (e *env) deliveryState(t *testing.T, id, endpoint string) string {
	t.Helper()
	code, m := e.get(t, "/v1/events/"+url.PathEscape(id))
	if code != http.StatusOK {
		t.Fatalf("GET event %s: %d %v", id, code, m)
	}
	s, _ := deliveries(t, m)[endpoint]["state"].(string)
	return s
}

// One event on order.paid with three subscribed endpoints (200; 404 then
// 200; 410): the first receives it once, the second after its park, the
// third disables its endpoint, and GET /v1/events/{id} shows all three,
// each with its own state; the attempts say which delivery they belong to.
func TestTopicEventShowsEveryDelivery(t *testing.T) {
	ok := statusReceiver(t, func(int) int { return http.StatusOK })
	later := statusReceiver(t, func(n int) int {
		if n == 0 {
			return http.StatusNotFound
		}
		return http.StatusOK
	})
	gone := statusReceiver(t, func(int) int { return http.StatusGone })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"ok": ok, "later": later, "gone": gone},
		map[string][]string{"ok": {"order.paid"}, "later": {"order.*"}, "gone": {"*"}})

	code, m := e.post(t, "/v1/events", map[string]any{"id": "pay-1", "topic": "order.paid", "payload": map[string]any{"total": 42}})
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	if got := ids(t, m); !slices.Equal(got, []string{"pay-1"}) {
		t.Fatalf("ids %v, want [pay-1]: one event, whatever its deliveries", got)
	}
	testkit.WaitFor(t, 30*time.Second, "ok and later delivered, gone's endpoint disabled", func() bool {
		eps, err := e.o.Endpoints(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		disabled := slices.ContainsFunc(eps, func(s outbox.EndpointState) bool { return s.Name == "gone" && s.Disabled })
		return disabled && e.deliveryState(t, "pay-1", "ok") == "delivered" && e.deliveryState(t, "pay-1", "later") == "delivered"
	})
	if n := ok.Attempts("pay-1"); n != 1 {
		t.Errorf("ok received the event %d times, want once", n)
	}
	if got := later.Statuses("pay-1"); !slices.Equal(got, []int{404, 200}) {
		t.Errorf("later answered %v, want 404 then 200", got)
	}
	for _, rc := range []*testkit.Receiver{ok, later, gone} {
		for _, r := range rc.Requests() {
			if r.Header.Get("webhook-id") != "pay-1" || r.Header.Get("Idempotency-Key") != "pay-1" {
				t.Errorf("a delivery carries webhook-id %q and Idempotency-Key %q, want the event ID",
					r.Header.Get("webhook-id"), r.Header.Get("Idempotency-Key"))
			}
		}
	}

	code, m = e.get(t, "/v1/events/pay-1")
	if code != http.StatusOK || m["topic"] != "order.paid" || m["state"] != "pending" {
		t.Fatalf("GET: %d %v, want the topic event, pending while gone's delivery waits", code, m)
	}
	ds := deliveries(t, m)
	if len(ds) != 3 {
		t.Fatalf("deliveries %v, want one per subscribed endpoint", m["deliveries"])
	}
	if d := ds["gone"]; d["state"] != "pending" || d["next_attempt_at"] == nil {
		t.Errorf("gone's delivery %v, want pending, waiting for its endpoint to be enabled again", d)
	}
	if d := ds["later"]; d["state"] != "delivered" || d["next_attempt_at"] != nil {
		t.Errorf("later's delivery %v, want delivered", d)
	}

	code, m = e.get(t, "/v1/events/pay-1/attempts")
	if code != http.StatusOK {
		t.Fatalf("GET attempts: %d %v", code, m)
	}
	byEndpoint := map[string][]string{}
	for _, a := range m["attempts"].([]any) {
		am := a.(map[string]any)
		ep, _ := am["endpoint"].(string)
		byEndpoint[ep] = append(byEndpoint[ep], am["outcome"].(string))
	}
	want := map[string][]string{"ok": {"success"}, "later": {"park", "success"}, "gone": {"disable"}}
	for ep, outcomes := range want {
		if !slices.Equal(byEndpoint[ep], outcomes) {
			t.Errorf("attempts of %s: %v, want %v (all: %v)", ep, byEndpoint[ep], outcomes, byEndpoint)
		}
	}
	code, m = e.get(t, "/v1/events/pay-1/attempts?endpoint=later")
	if as, _ := m["attempts"].([]any); code != http.StatusOK || len(as) != 2 {
		t.Errorf("attempts of later only: %d %v, want its 2", code, m)
	}

	// Listed, the pending delivery is one event with its endpoint.
	code, m = e.get(t, "/v1/events?topic=order.paid")
	evs, _ := m["events"].([]any)
	if code != http.StatusOK || len(evs) != 1 {
		t.Fatalf("GET /v1/events?topic=order.paid: %d %v, want gone's pending delivery", code, m)
	}
	if ev := evs[0].(map[string]any); ev["id"] != "pay-1" || ev["endpoint"] != "gone" || ev["topic"] != "order.paid" {
		t.Errorf("listed %v, want pay-1's delivery to gone", ev)
	}
	if code, m := e.get(t, "/v1/events?topic=invoice.paid"); code != http.StatusOK || len(m["events"].([]any)) != 0 {
		t.Errorf("GET /v1/events?topic=invoice.paid: %d %v, want none", code, m)
	}
}

// A dead delivery is replayed alone, and a pending one deleted alone: the
// event's other deliveries are untouched, and a bad or misspelt parameter
// is refused without acting on the whole event.
func TestReplayAndDeleteOneDelivery(t *testing.T) {
	fine := statusReceiver(t, func(int) int { return http.StatusOK })
	refusing := statusReceiver(t, func(int) int { return http.StatusBadRequest })
	slow := statusReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"fine": fine, "refusing": refusing, "slow": slow},
		map[string][]string{"fine": {"order.*"}, "refusing": {"order.*"}, "slow": {"order.*"}})
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "ord-1", "topic": "order.created"}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "fine delivered and refusing dead", func() bool {
		return e.deliveryState(t, "ord-1", "fine") == "delivered" && e.deliveryState(t, "ord-1", "refusing") == "dead"
	})

	for _, c := range []struct {
		name, method, path string
		status             int
		msg                string
	}{
		{"replay of a pending delivery", "POST", "/v1/events/ord-1/replay?endpoint=slow", 409, `the delivery of event "ord-1" to endpoint "slow" is not dead`},
		{"replay of an unknown delivery", "POST", "/v1/events/ord-1/replay?endpoint=nowhere", 404, `delivery of event "ord-1" to endpoint "nowhere" not found`},
		{"delete of an unknown delivery", "DELETE", "/v1/events/ord-1?endpoint=nowhere", 404, `pending or dead delivery of event "ord-1" to endpoint "nowhere" not found`},
		{"empty endpoint", "DELETE", "/v1/events/ord-1?endpoint=", 400, "endpoint: must not be empty"},
		{"misspelt endpoint", "DELETE", "/v1/events/ord-1?endpont=slow", 400, `unknown query parameter "endpont"`},
		{"two endpoints", "POST", "/v1/events/ord-1/replay?endpoint=slow&endpoint=refusing", 400, "endpoint: given more than once"},
		{"control character", "DELETE", "/v1/events/ord-1?endpoint=%1F", 400, "endpoint: must be valid UTF-8 without control characters"},
		{"attempts, misspelt", "GET", "/v1/events/ord-1/attempts?endpont=slow", 400, `unknown query parameter "endpont"`},
	} {
		code, m := e.do(t, c.method, c.path, "", nil)
		if code != c.status || !strings.Contains(fmt.Sprint(m["error"]), c.msg) {
			t.Errorf("%s: %d %v, want %d with %q", c.name, code, m, c.status, c.msg)
		}
	}
	for ep, want := range map[string]string{"fine": "delivered", "refusing": "dead", "slow": "pending"} {
		if got := e.deliveryState(t, "ord-1", ep); got != want {
			t.Errorf("after the refused calls, %s's delivery is %s, want %s", ep, got, want)
		}
	}

	refusing.SetAnswer(func(*http.Request, string, int) testkit.Reply { return testkit.Reply{Status: http.StatusOK} })
	code, m := e.post(t, "/v1/events/ord-1/replay?endpoint=refusing", nil)
	if code != http.StatusAccepted || m["id"] != "ord-1" || m["endpoint"] != "refusing" || m["state"] != "pending" {
		t.Fatalf("replay of the dead delivery: %d %v", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "the replayed delivery delivered", func() bool {
		return e.deliveryState(t, "ord-1", "refusing") == "delivered"
	})
	if n := fine.Attempts("ord-1"); n != 1 {
		t.Errorf("fine received the event %d times, want once: the replay is refusing's alone", n)
	}

	if code, m := e.do(t, http.MethodDelete, "/v1/events/ord-1?endpoint=slow", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete of slow's delivery: %d %v", code, m)
	}
	code, m = e.get(t, "/v1/events/ord-1")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %v", code, m)
	}
	ds := deliveries(t, m)
	if ds["slow"]["state"] != "deleted" || ds["fine"]["state"] != "delivered" || ds["refusing"]["state"] != "delivered" {
		t.Errorf("deliveries after the delete %v, want slow deleted and the others delivered", m["deliveries"])
	}
	if s := e.o.Stats(); s.Pending != 0 || s.Dead != 0 {
		t.Errorf("stats after all: %d pending, %d dead, want none", s.Pending, s.Dead)
	}
}

// An event on a topic nobody subscribes to is kept and listed as unrouted
// (and counted), not among the pending events; once an endpoint subscribes
// it is delivered.
func TestUnroutedEventIsListedThenRouted(t *testing.T) {
	rc := statusReceiver(t, func(int) int { return http.StatusOK })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"audit": rc}, nil)
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "lonely", "topic": "user.deleted", "key": "u-7"}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	code, m := e.get(t, "/v1/events?state=unrouted")
	evs, _ := m["events"].([]any)
	if code != http.StatusOK || len(evs) != 1 {
		t.Fatalf("GET unrouted: %d %v, want the event", code, m)
	}
	if ev := evs[0].(map[string]any); ev["id"] != "lonely" || ev["topic"] != "user.deleted" || ev["endpoint"] != nil || ev["key"] != "u-7" ||
		ev["state"] != "unrouted" || ev["next_attempt_at"] == nil {
		t.Errorf("unrouted event %v, want lonely on user.deleted without an endpoint", ev)
	}
	if code, m := e.get(t, "/v1/events?state=unrouted&topic=user.created"); code != http.StatusOK || len(m["events"].([]any)) != 0 {
		t.Errorf("unrouted of another topic: %d %v, want none", code, m)
	}
	if code, m := e.get(t, "/v1/events"); code != http.StatusOK || len(m["events"].([]any)) != 0 {
		t.Errorf("pending: %d %v, want none: an unrouted event is not a pending delivery", code, m)
	}
	if code, m := e.get(t, "/v1/stats"); code != http.StatusOK || m["unrouted"] != 1.0 || m["pending"] != 0.0 {
		t.Errorf("stats: %d %v, want 1 unrouted and 0 pending", code, m)
	}
	if code, m := e.get(t, "/v1/events/lonely"); code != http.StatusOK || m["topic"] != "user.deleted" || m["deliveries"] != nil || m["state"] != "unrouted" {
		t.Errorf("GET the unrouted event: %d %v, want it, without deliveries", code, m)
	}

	if err := e.o.SetSubscriptions(t.Context(), []outbox.Subscription{{Endpoint: "audit", Topics: []string{"user.*"}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the event routed and delivered", func() bool { return rc.Acked("lonely") == 1 })
	if code, m := e.get(t, "/v1/events?state=unrouted"); code != http.StatusOK || len(m["events"].([]any)) != 0 {
		t.Errorf("GET unrouted after the subscription: %d %v, want none", code, m)
	}
	if got := e.eventState(t, "lonely"); got != "delivered" {
		t.Errorf("the routed event is %q, want delivered", got)
	}
	if got := e.deliveryState(t, "lonely", "audit"); got != "delivered" {
		t.Errorf("the delivery to audit is %q, want delivered", got)
	}
}

// Bad topics and a topic with a destination are refused with a 400 naming
// the field, and store nothing; the same ID as a topic event and as a
// destination event is a conflict.
func TestTopicBadInput(t *testing.T) {
	rc := statusReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"orders": rc}, map[string][]string{"orders": {"order.*"}})
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"topic and destination", "POST", "/v1/events", `{"topic":"order.paid","destination":"orders"}`, 400, "destination, topic: give one of the two, not both"},
		{"empty topic", "POST", "/v1/events", `{"topic":""}`, 400, `topic: "": must not be empty`},
		{"empty segment", "POST", "/v1/events", `{"topic":"order..paid"}`, 400, `topic: "order..paid": has an empty segment`},
		{"pattern as a topic", "POST", "/v1/events", `{"topic":"order.*"}`, 400, `topic: "order.*": character "*"`},
		{"space", "POST", "/v1/events", `{"topic":"order paid"}`, 400, `topic: "order paid": character " "`},
		{"too long", "POST", "/v1/events", `{"topic":"` + strings.Repeat("a", 201) + `"}`, 400, "topic: "},
		{"not a string", "POST", "/v1/events", `{"topic":7}`, 400, "topic: must be a string"},
		{"bad topic in batch", "POST", "/v1/events", `[{"topic":"order.paid"},{"topic":"order."}]`, 400, `events[1].topic: "order.": has an empty segment`},
		{"both in batch", "POST", "/v1/events", `[{"destination":"orders"},{"destination":"orders","topic":"a"}]`, 400, "events[1].destination, events[1].topic:"},
		{"neither", "POST", "/v1/events", `{"payload":1}`, 400, "destination: is required (a configured endpoint name or an absolute URL), unless the event has a topic"},
		{"bad topic filter", "GET", "/v1/events?topic=a..b", "", 400, `topic: "a..b": has an empty segment`},
		{"bad state", "GET", "/v1/events?state=routed", "", 400, "state: must be pending, dead or unrouted"},
		{"bad replay filter", "POST", "/v1/dead/replay", `{"topic":"*"}`, 400, `topic: "*": character "*"`},
	} {
		ct := ""
		if c.body != "" {
			ct = "application/json"
		}
		code, m := e.do(t, c.method, c.path, ct, []byte(c.body))
		if code != c.status || !strings.Contains(fmt.Sprint(m["error"]), c.msg) {
			t.Errorf("%s: %d %v, want %d with %q", c.name, code, m, c.status, c.msg)
		}
	}
	if s := e.o.Stats(); s.Pending != 0 || s.Unrouted != 0 || s.Dead != 0 {
		t.Fatalf("bad input stored something: %+v", s)
	}

	if code, m := e.post(t, "/v1/events", map[string]any{"id": "shared", "topic": "order.paid"}); code != http.StatusAccepted {
		t.Fatalf("POST topic event: %d %v", code, m)
	}
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "shared", "topic": "order.paid"}); code != http.StatusAccepted {
		t.Errorf("the same topic event again: %d %v, want 202 (idempotent)", code, m)
	}
	code, m := e.post(t, "/v1/events", map[string]any{"id": "shared", "destination": "orders"})
	if code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), `id: event "shared" already exists with other content`) {
		t.Errorf("a destination event under a topic event's ID: %d %v, want 409 naming the id", code, m)
	}
	if s := e.o.Stats(); s.Pending != 1 {
		t.Errorf("%d pending deliveries, want the one of the topic event", s.Pending)
	}
}

// POST /v1/dead/replay with a topic replays only the dead deliveries of
// that topic's events.
func TestReplayDeadByTopic(t *testing.T) {
	rc := statusReceiver(t, func(int) int { return http.StatusBadRequest })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"hooks": rc}, map[string][]string{"hooks": {"*"}})
	for i, topic := range []string{"order.paid", "order.paid", "invoice.sent"} {
		if code, m := e.post(t, "/v1/events", map[string]any{"id": fmt.Sprintf("ev-%d", i), "topic": topic}); code != http.StatusAccepted {
			t.Fatalf("POST: %d %v", code, m)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "3 dead deliveries", func() bool { return e.o.Stats().Dead == 3 })
	code, m := e.get(t, "/v1/events?state=dead&topic=order.paid")
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 2 {
		t.Fatalf("dead of order.paid: %d %v, want 2", code, m)
	}
	rc.SetAnswer(func(*http.Request, string, int) testkit.Reply { return testkit.Reply{Status: http.StatusOK} })
	code, m = e.post(t, "/v1/dead/replay", map[string]any{"topic": "order.paid", "rate": 1000})
	if code != http.StatusAccepted || m["replayed"] != 2.0 {
		t.Fatalf("replay of order.paid: %d %v, want 2 replayed", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "the replayed deliveries delivered", func() bool {
		return len(rc.Missing([]string{"ev-0", "ev-1"})) == 0
	})
	if ev, err := e.o.Get(context.Background(), "ev-2"); err != nil || ev.State != outbox.StateDead {
		t.Errorf("invoice.sent's event: %v %v, want still dead", ev.State, err)
	}
}

// Without ?endpoint=, replay and delete act on every delivery of a topic
// event, and its ID stays reserved after the delete, as for any event.
func TestWholeTopicEventReplayAndDelete(t *testing.T) {
	a := statusReceiver(t, func(int) int { return http.StatusBadRequest })
	b := statusReceiver(t, func(int) int { return http.StatusBadRequest })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"a": a, "b": b}, map[string][]string{"a": {"order.*"}, "b": {"order.*"}})
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "both", "topic": "order.paid"}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "both deliveries dead", func() bool { return e.eventState(t, "both") == "dead" })
	for _, rc := range []*testkit.Receiver{a, b} {
		rc.SetAnswer(func(*http.Request, string, int) testkit.Reply { return testkit.Reply{Status: http.StatusNotFound} }) // park: stay pending
	}
	if code, m := e.post(t, "/v1/events/both/replay", nil); code != http.StatusAccepted || m["endpoint"] != nil {
		t.Fatalf("replay of the whole event: %d %v", code, m)
	}
	code, m := e.get(t, "/v1/events/both")
	if ds := deliveries(t, m); code != http.StatusOK || m["state"] != "pending" || ds["a"]["state"] != "pending" || ds["b"]["state"] != "pending" {
		t.Fatalf("after the replay: %d %v, want both deliveries pending", code, m)
	}
	if code, m := e.do(t, http.MethodDelete, "/v1/events/both", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete of the whole event: %d %v", code, m)
	}
	code, m = e.get(t, "/v1/events/both")
	if ds := deliveries(t, m); code != http.StatusOK || m["state"] != "deleted" || ds["a"]["state"] != "deleted" || ds["b"]["state"] != "deleted" {
		t.Errorf("after the delete: %d %v, want the event and both deliveries deleted", code, m)
	}
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "both", "topic": "order.paid"}); code != http.StatusConflict ||
		!strings.Contains(fmt.Sprint(m["error"]), "was deleted by an operator") {
		t.Errorf("the deleted event again: %d %v, want 409", code, m)
	}
}

// destination= with an endpoint's name lists its deliveries of topic
// events beside its own events: what is waiting for that endpoint.
func TestListByDestinationShowsAnEndpointsDeliveries(t *testing.T) {
	a := statusReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	b := statusReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"a": a, "b": b}, map[string][]string{"a": {"*"}, "b": {"*"}})
	for _, ev := range []map[string]any{{"id": "t-1", "topic": "order.paid"}, {"id": "d-1", "destination": "a"}, {"id": "d-2", "destination": "b"}} {
		if code, m := e.post(t, "/v1/events", ev); code != http.StatusAccepted {
			t.Fatalf("POST %v: %d %v", ev, code, m)
		}
	}
	code, m := e.get(t, "/v1/events?destination=a")
	var got []string
	for _, ev := range m["events"].([]any) {
		em := ev.(map[string]any)
		got = append(got, fmt.Sprint(em["id"], ">", em["endpoint"]))
	}
	if code != http.StatusOK || !slices.Equal(got, []string{"d-1>a", "t-1>a"}) {
		t.Errorf("GET /v1/events?destination=a: %d %v, want d-1 and t-1's delivery to a", code, got)
	}
}
