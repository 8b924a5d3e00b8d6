package union_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
	"github.com/outboxd/outbox/outbox/union"
)

// topicEndpoints are the endpoints every store of newTopicView subscribes
// to every topic.
var topicEndpoints = []string{"billing", "crm", "mail"}

// newTopicView opens n started outboxes, each subscribing topicEndpoints to
// every topic, delivering through s, and returns a View over them (the
// first is the primary).
func newTopicView(t *testing.T, n int, s *sink) (*union.View, []*outbox.Outbox) {
	t.Helper()
	var subs []outbox.Subscription
	for _, ep := range topicEndpoints {
		subs = append(subs, outbox.Subscription{Endpoint: ep, Topics: []string{"*"}})
	}
	all := make([]*outbox.Outbox, n)
	for i := range all {
		o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
			Sink: s, Subscriptions: subs, Interval: 20 * time.Millisecond, NoSync: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, o) })
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
		all[i] = o
	}
	others := &stores{list: all[1:]}
	return union.New(all[0], others.get), all
}

// listDeliveries pages through v.List and returns "id>endpoint" for every
// event listed, in order.
func listDeliveries(t *testing.T, v *union.View, opt outbox.ListOptions) []string {
	t.Helper()
	return listPages(t, v, opt, func(ev outbox.Event) string { return ev.ID + ">" + ev.Endpoint })
}

// The deliveries of topic events, which share their event's ID, are listed
// each once over the stores, in order, whatever the page size; a filter by
// topic reaches every store.
func TestListPagesEveryDeliveryOnce(t *testing.T) {
	v, all := newTopicView(t, 3, newSink())
	ctx := context.Background()
	var want, wantPaid []string
	for i := range 12 {
		id := fmt.Sprintf("ev-%02d", i)
		topic := "order.paid"
		if i%3 == 0 {
			topic = "order.refunded"
		}
		if _, err := all[i%len(all)].Enqueue(ctx, outbox.Event{ID: id, Topic: topic}); err != nil {
			t.Fatal(err)
		}
		for _, ep := range topicEndpoints {
			want = append(want, id+">"+ep)
			if topic == "order.paid" {
				wantPaid = append(wantPaid, id+">"+ep)
			}
		}
		if i == 5 {
			// A destination event whose ID sorts between the deliveries of
			// ev-05 and ev-06 would not: "ev-05" < "ev-05\x1f..." < "ev-05a".
			if _, err := all[1].Enqueue(ctx, outbox.Event{ID: "ev-05a", Destination: "billing"}); err != nil {
				t.Fatal(err)
			}
			want = append(want, "ev-05a>billing")
		}
	}
	for _, limit := range []int{1, 2, 3, 4, 7, 100} {
		if got := listDeliveries(t, v, outbox.ListOptions{Limit: limit}); !slices.Equal(got, want) {
			t.Errorf("limit %d: got %v\nwant %v", limit, got, want)
		}
		if got := listDeliveries(t, v, outbox.ListOptions{Limit: limit, Topic: "order.paid"}); !slices.Equal(got, wantPaid) {
			t.Errorf("order.paid with limit %d: got %v\nwant %v", limit, got, wantPaid)
		}
	}
}

// Over one store, the View's cursor is the store's own: paging through
// either gives the same pages and cursors.
func TestListCursorIsTheStores(t *testing.T) {
	v, all := newTopicView(t, 1, newSink())
	ctx := context.Background()
	for i := range 4 {
		if _, err := all[0].Enqueue(ctx, outbox.Event{ID: fmt.Sprintf("ev-%d", i), Topic: "order.paid"}); err != nil {
			t.Fatal(err)
		}
	}
	after := ""
	for page := 0; ; page++ {
		evs, next, err := all[0].List(ctx, outbox.ListOptions{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		vevs, vnext, err := v.List(ctx, outbox.ListOptions{After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if vnext != next || len(vevs) != len(evs) {
			t.Fatalf("page %d after %q: the View's next %q and %d events, the store's %q and %d", page, after, vnext, len(vevs), next, len(evs))
		}
		if next == "" {
			return
		}
		after = next
	}
}

// Unrouted events are listed and counted over every store.
func TestUnroutedOverEveryStore(t *testing.T) {
	v, all, _ := newView(t, 3) // these stores have no subscriptions
	ctx := context.Background()
	for i, o := range all {
		if _, err := o.Enqueue(ctx, outbox.Event{ID: fmt.Sprintf("lost-%d", i), Topic: "user.deleted"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := listDeliveries(t, v, outbox.ListOptions{Unrouted: true, Limit: 2}); !slices.Equal(got, []string{"lost-0>", "lost-1>", "lost-2>"}) {
		t.Errorf("unrouted: %v, want the 3 events without an endpoint", got)
	}
	if s := v.Stats(); s.Unrouted != 3 || s.Pending != 0 {
		t.Errorf("stats: %d unrouted, %d pending; want 3 and 0", s.Unrouted, s.Pending)
	}
}

// A delivery in a partition's store is shown, replayed and deleted through
// the View; an unknown one is ErrNotFound, a pending one ErrNotDead.
func TestDeliveryActionsReachTheStoreThatHoldsIt(t *testing.T) {
	s := newSink()
	s.set(func(d *outbox.Delivery) outbox.Result {
		if d.Endpoint == "crm" {
			return outbox.Result{Action: outbox.ActionDead, Status: 400}
		}
		return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
	})
	v, all := newTopicView(t, 3, s)
	ctx := context.Background()
	if _, err := all[2].Enqueue(ctx, outbox.Event{ID: "pay-1", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "crm's delivery dead", func() bool { return v.Stats().Dead == 1 })
	ev, err := v.Get(ctx, "pay-1")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]outbox.State{}
	for _, d := range ev.DeliveryStates {
		states[d.Endpoint] = d.State
	}
	if ev.Topic != "order.paid" || states["crm"] != outbox.StateDead || states["billing"] != outbox.StatePending || len(states) != 3 {
		t.Fatalf("Get through the View: topic %q, deliveries %v", ev.Topic, states)
	}
	if err := v.ReplayDelivery(ctx, "pay-1", "billing"); !errors.Is(err, outbox.ErrNotDead) {
		t.Errorf("replay of a pending delivery: %v, want ErrNotDead", err)
	}
	if err := v.ReplayDelivery(ctx, "pay-1", "nowhere"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("replay of an unknown delivery: %v, want ErrNotFound", err)
	}
	if err := v.DeleteDelivery(ctx, "nope", "crm"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("delete of an unknown event's delivery: %v, want ErrNotFound", err)
	}
	s.set(func(*outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
	})
	if err := v.ReplayDelivery(ctx, "pay-1", "crm"); err != nil {
		t.Fatalf("replay of the dead delivery: %v", err)
	}
	if err := v.DeleteDelivery(ctx, "pay-1", "mail"); err != nil {
		t.Fatalf("delete of a pending delivery: %v", err)
	}
	ev, err = all[2].Get(ctx, "pay-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ev.DeliveryStates {
		want := outbox.StatePending
		if d.Endpoint == "mail" {
			want = outbox.StateDeleted
		}
		if d.State != want {
			t.Errorf("in its store, the delivery to %s is %v, want %v", d.Endpoint, d.State, want)
		}
	}
}

// The HTTP API over a View shows a topic event held by a partition's store
// with its deliveries, lists them, and deletes one of them.
func TestHTTPAPIServesTopicEventsOfEveryStore(t *testing.T) {
	v, all := newTopicView(t, 2, newSink())
	if _, err := all[1].Enqueue(context.Background(), outbox.Event{ID: "pay-1", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapitest.Handler(t, httpapi.New(v, httpapi.Config{})))
	defer srv.Close()
	do := func(method, path string) (int, map[string]any) {
		t.Helper()
		return callAPI(t, srv, method, path, "")
	}
	code, m := do("GET", "/v1/events/pay-1")
	if ds, _ := m["deliveries"].([]any); code != http.StatusOK || m["topic"] != "order.paid" || len(ds) != len(topicEndpoints) {
		t.Fatalf("GET of a topic event in a partition store: %d %v", code, m)
	}
	code, m = do("GET", "/v1/events?topic=order.paid&limit=2")
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 2 || m["next"] == "" {
		t.Fatalf("first page of order.paid: %d %v, want 2 deliveries and a next cursor", code, m)
	}
	code, m = do("GET", "/v1/events?topic=order.paid&limit=2&after="+url.QueryEscape(m["next"].(string)))
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 1 || evs[0].(map[string]any)["endpoint"] != "mail" || m["next"] != "" {
		t.Fatalf("second page of order.paid: %d %v, want mail's delivery and the end", code, m)
	}
	if code, m := do("DELETE", "/v1/events/pay-1?endpoint=crm"); code != http.StatusNoContent {
		t.Fatalf("DELETE of crm's delivery: %d %v", code, m)
	}
	if code, m := do("POST", "/v1/events/pay-1/replay?endpoint=billing"); code != http.StatusConflict {
		t.Errorf("replay of a pending delivery: %d %v, want 409", code, m)
	}
	if code, m := do("GET", "/v1/stats"); code != http.StatusOK || m["pending"] != 2.0 {
		t.Errorf("stats: %d %v, want 2 pending deliveries left", code, m)
	}
}
