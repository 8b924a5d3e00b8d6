package outbox_test

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// fanOut opens and starts an outbox delivering through httpsink to one
// endpoint per receiver (named by the map's keys, each at its receiver's
// URL), with subs; edit may change the configuration first.
func fanOut(t *testing.T, receivers map[string]*testkit.Receiver, subs []outbox.Subscription, edit func(*outbox.Config)) *outbox.Outbox {
	t.Helper()
	var eps []httpsink.Endpoint
	for name, rc := range receivers {
		eps = append(eps, httpsink.Endpoint{Name: name, URL: rc.URL + "/" + name, AllowPrivate: true})
	}
	return startWithHTTPSink(t, eps, func(cfg *outbox.Config) {
		cfg.Subscriptions = subs
		if edit != nil {
			edit(cfg)
		}
	})
}

// answerSeq answers the nth request of an ID with statuses[n], and the
// last status to every later one.
func answerSeq(statuses ...int) testkit.Answer {
	return func(_ *http.Request, _ string, n int) testkit.Reply {
		return testkit.Reply{Status: statuses[min(n, len(statuses)-1)]}
	}
}

// deliveryStates returns "endpoint=state" for each delivery of the event.
func deliveryStates(t *testing.T, o *outbox.Outbox, id string) []string {
	t.Helper()
	ev, err := o.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ev.DeliveryStates {
		out = append(out, d.Endpoint+"="+d.State.String())
	}
	return out
}

// One event on order.paid with three subscribed endpoints: the first
// answers 200 and receives it once, the second answers 404 and then 200
// and receives it after its park, the third answers 410 and is disabled,
// while the other two are not held back. Get shows all three deliveries,
// each under the event's ID (webhook-id).
func TestFanOutThreeEndpointsEachOnItsOwn(t *testing.T) {
	ok := testkit.NewReceiver(t, "webhook-id", answerSeq(200))
	parked := testkit.NewReceiver(t, "webhook-id", answerSeq(404, 200))
	gone := testkit.NewReceiver(t, "webhook-id", answerSeq(410))
	o := fanOut(t, map[string]*testkit.Receiver{"billing": ok, "shipping": parked, "crm": gone},
		[]outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.paid"}},
			{Endpoint: "shipping", Topics: []string{"order.*"}},
			{Endpoint: "crm", Topics: []string{"*"}},
		}, nil)
	ctx := t.Context()
	ids, err := o.Enqueue(ctx, outbox.Event{Topic: "order.paid", Payload: []byte(`{"order":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := ids[0]
	want := []string{"billing=delivered", "crm=pending", "shipping=delivered"}
	testkit.WaitFor(t, settle, "billing and shipping delivered, crm disabled", func() bool {
		if !slices.Equal(deliveryStates(t, o, id), want) {
			return false
		}
		eps, err := o.Endpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range eps {
			if ep.Name == "crm" {
				return ep.Disabled
			}
		}
		return false
	})
	// crm's delivery waits for its endpoint: the event stays pending.
	if ev, err := o.Get(ctx, id); err != nil || ev.State != outbox.StatePending {
		t.Fatalf("event: %+v, %v", ev, err)
	}
	if n := ok.Attempts(id); n != 1 {
		t.Fatalf("billing received the event %d times", n)
	}
	if got := parked.Statuses(id); !slices.Equal(got, []int{404, 200}) {
		t.Fatalf("shipping answered %v", got)
	}
	if got := gone.Statuses(id); !slices.Equal(got, []int{410}) {
		t.Fatalf("crm answered %v", got)
	}
	ev, err := o.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Topic != "order.paid" || ev.Destination != "" || ev.Endpoint != "" || string(ev.Payload) != `{"order":7}` {
		t.Fatalf("event = %+v", ev)
	}
	as, err := o.Attempts(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, a := range as {
		seen = append(seen, fmt.Sprintf("%s:%d", a.Endpoint, a.Status))
	}
	slices.Sort(seen)
	if want := []string{"billing:200", "crm:410", "shipping:200", "shipping:404"}; !slices.Equal(seen, want) {
		t.Fatalf("attempts = %q, want %q", seen, want)
	}
	// Enabling crm delivers its pending delivery; the others are not sent again.
	gone.SetAnswer(answerSeq(200))
	if err := o.EnableEndpoint(ctx, "crm"); err != nil {
		t.Fatal(err)
	}
	waitState(t, o, id, outbox.StateDelivered)
	if ok.Attempts(id) != 1 || parked.Attempts(id) != 2 {
		t.Fatalf("re-sent to the delivered endpoints: %d, %d", ok.Attempts(id), parked.Attempts(id))
	}
}

// 10,000 events on a topic with five subscribers, one of them down: the
// other four receive every event, each once, while the fifth's deliveries
// wait behind its circuit breaker, all still pending, not dead and not
// hammering it.
func TestFanOutDownEndpointHoldsNoOneBack(t *testing.T) {
	const n = 10_000
	receivers := map[string]*testkit.Receiver{}
	var subs []outbox.Subscription
	for _, name := range []string{"a", "b", "c", "d"} {
		receivers[name] = testkit.NewReceiver(t, "webhook-id", nil)
		subs = append(subs, outbox.Subscription{Endpoint: name, Topics: []string{"order.paid"}})
	}
	var downHits atomic.Int64
	receivers["down"] = testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
		downHits.Add(1)
		return testkit.Reply{Status: 503}
	})
	subs = append(subs, outbox.Subscription{Endpoint: "down", Topics: []string{"order.*"}})
	o := fanOut(t, receivers, subs, func(c *outbox.Config) {
		c.BackoffInitial, c.BackoffMax = time.Second, time.Minute
		c.Breaker = outbox.Breaker{Threshold: 5, CoolDown: time.Minute}
	})
	ctx := t.Context()
	ids := make([]string, 0, n)
	for i := 0; i < n; i += 500 {
		evs := make([]outbox.Event, 500)
		for j := range evs {
			evs[j] = outbox.Event{Topic: "order.paid", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i+j))}
		}
		got, err := o.Enqueue(ctx, evs...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		rc := receivers[name]
		testkit.WaitFor(t, settle, name+" to receive every event", func() bool { return rc.Successes() >= n })
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		rc := receivers[name]
		for _, id := range ids {
			if k := rc.Acked(id); k != 1 {
				t.Fatalf("%s acknowledged %s %d times", name, id, k)
			}
		}
	}
	// The four's outcomes committed, the down endpoint's deliveries remain.
	testkit.WaitFor(t, settle, "only the down endpoint's deliveries pending", func() bool { return o.Stats().Pending == n })
	if st := o.Stats(); st.Dead != 0 {
		t.Fatalf("stats: %d dead", st.Dead)
	}
	eps, err := o.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.Name == "down" && ep.Breaker == outbox.BreakerClosed {
			t.Fatalf("the down endpoint's breaker is closed: %+v", ep)
		}
	}
	if hits := downHits.Load(); hits > n/10 {
		t.Fatalf("the down endpoint was tried %d times for %d events: its breaker did not hold them", hits, n)
	}
	pending, _, err := o.List(ctx, outbox.ListOptions{Limit: outbox.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range pending {
		if ev.Endpoint != "down" || ev.Topic != "order.paid" {
			t.Fatalf("a pending delivery of another endpoint: %+v", ev)
		}
	}
}

// Keyed events on a topic keep their order per endpoint: while one
// endpoint refuses the first event of a key, the other receives every event
// of that key, in order; then the first receives them in order too.
func TestFanOutKeyOrderPerEndpoint(t *testing.T) {
	fast := testkit.NewReceiver(t, "webhook-id", nil)
	var open atomic.Bool
	slow := testkit.NewReceiver(t, "webhook-id", func(*http.Request, string, int) testkit.Reply {
		if open.Load() {
			return testkit.Reply{Status: 200}
		}
		return testkit.Reply{Status: 503}
	})
	o := fanOut(t, map[string]*testkit.Receiver{"fast": fast, "slow": slow},
		[]outbox.Subscription{
			{Endpoint: "fast", Topics: []string{"room.*"}},
			{Endpoint: "slow", Topics: []string{"room.*"}},
		}, func(c *outbox.Config) {
			c.Ordered = true
			c.Breaker.Threshold = -1
		})
	ctx := t.Context()
	var want []string
	for i := range 30 {
		key := fmt.Sprintf("room-%d", i%3)
		ev := outbox.Event{ID: fmt.Sprintf("evt-%02d", i), Key: key, Topic: "room.updated", Payload: []byte(key)}
		if _, err := o.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID)
	}
	testkit.WaitFor(t, settle, "fast to receive every event", func() bool { return fast.Successes() == len(want) })
	if n := slow.Successes(); n != 0 {
		t.Fatalf("slow acknowledged %d events while refusing", n)
	}
	open.Store(true)
	testkit.WaitFor(t, settle, "slow to receive every event", func() bool { return slow.Successes() == len(want) })
	for name, rc := range map[string]*testkit.Receiver{"fast": fast, "slow": slow} {
		perKey := map[string][]string{}
		for _, r := range rc.Requests() {
			if r.Acked {
				perKey[string(r.Body)] = append(perKey[string(r.Body)], r.ID)
			}
		}
		for key, got := range perKey {
			var exp []string
			for i, id := range want {
				if fmt.Sprintf("room-%d", i%3) == key {
					exp = append(exp, id)
				}
			}
			if !slices.Equal(got, exp) {
				t.Fatalf("%s received key %s as %q, want %q", name, key, got, exp)
			}
		}
	}
}

// Bad input is refused with an error naming the field, and nothing is
// stored or changed.
func TestFanOutBadInput(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": rc},
		[]outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.*"}}}, nil)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		ev    outbox.Event
		field string
	}{
		{"topic and destination", outbox.Event{ID: "x1", Topic: "order.paid", Destination: "billing"}, "topic"},
		{"neither", outbox.Event{ID: "x2"}, "destination"},
		{"empty segment", outbox.Event{ID: "x3", Topic: "order..paid"}, "topic"},
		{"pattern as topic", outbox.Event{ID: "x4", Topic: "order.*"}, "topic"},
		{"space", outbox.Event{ID: "x5", Topic: "order paid"}, "topic"},
		{"too long", outbox.Event{ID: "x6", Topic: strings.Repeat("a", outbox.MaxTopicBytes+1)}, "topic"},
	} {
		_, err := o.Enqueue(ctx, outbox.Event{Topic: "order.ok"}, tc.ev)
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || ve.Index != 1 {
			t.Fatalf("%s: err = %v, want a validation error for event 1's %q", tc.name, err, tc.field)
		}
	}
	if st := o.Stats(); st.Pending+st.Unrouted+st.Dead != 0 || st.EnqueuedTotal != 0 {
		t.Fatalf("refused calls stored something: %+v", st)
	}
	if _, err := o.Upsert(ctx, "k", func(*outbox.Event) (outbox.Event, error) {
		return outbox.Event{Topic: "order.paid"}, nil
	}); !isField(err, "topic") {
		t.Fatalf("upsert of a topic event: %v", err)
	}

	before := o.Subscriptions()
	for _, tc := range []struct {
		name  string
		subs  []outbox.Subscription
		index int
		field string
	}{
		{"unknown endpoint", []outbox.Subscription{{Endpoint: "billing", Topics: []string{"a"}}, {Endpoint: "nobody", Topics: []string{"a"}}}, 1, "endpoint"},
		{"no endpoint", []outbox.Subscription{{Topics: []string{"a"}}}, 0, "endpoint"},
		{"no topics", []outbox.Subscription{{Endpoint: "billing"}}, 0, "topics"},
		{"empty pattern", []outbox.Subscription{{Endpoint: "billing", Topics: []string{""}}}, 0, "topics"},
		{"star inside", []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.*.paid"}}}, 0, "topics"},
		{"partial star", []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.pa*"}}}, 0, "topics"},
		{"bad header", []outbox.Subscription{{Endpoint: "billing", Topics: []string{"a"}, Headers: map[string]string{"X Bad": "1"}}}, 0, "headers"},
	} {
		err := o.SetSubscriptions(ctx, tc.subs)
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || ve.Index != tc.index {
			t.Fatalf("%s: err = %v, want subscription %d's %q", tc.name, err, tc.index, tc.field)
		}
		if !strings.Contains(err.Error(), "subscription") {
			t.Fatalf("%s: %q does not say it is about a subscription", tc.name, err)
		}
		if got := o.Subscriptions(); !slices.EqualFunc(got, before, sameSub) {
			t.Fatalf("%s: a refused call changed the subscriptions to %+v", tc.name, got)
		}
	}
	// At Open, a *ConfigError naming the subscription and its field.
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "billing", URL: rc.URL, AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cfg := testConfig(sink)
	cfg.Subscriptions = []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.**"}}}
	_, err = outbox.Open(t.TempDir()+"/x.db", cfg)
	var ce *outbox.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Subscriptions[0].topics" {
		t.Fatalf("Open with a bad subscription: %v", err)
	}
}

func isField(err error, field string) bool {
	var ve *outbox.ValidationError
	return errors.As(err, &ve) && ve.Field == field
}

func sameSub(a, b outbox.Subscription) bool {
	return a.Endpoint == b.Endpoint && slices.Equal(a.Topics, b.Topics) && maps.Equal(a.Headers, b.Headers)
}

// An event whose topic has no subscriber is kept unrouted: counted,
// listed, not delivered; a subscription set later routes it (and only the
// events it matches), and one that never gets a subscriber becomes a dead
// letter with the reason when its retention ends.
func TestFanOutUnroutedKeptRoutedAndExpired(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing}, nil, func(c *outbox.Config) {
		c.UnroutedRetention = time.Hour
	})
	ctx := t.Context()
	ids, err := o.Enqueue(ctx,
		outbox.Event{ID: "paid-1", Topic: "order.paid", Key: "o-1", Payload: []byte("1")},
		outbox.Event{ID: "refund-1", Topic: "order.refunded", Payload: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"paid-1", "refund-1"}) {
		t.Fatalf("ids = %q", ids)
	}
	if st := o.Stats(); st.Unrouted != 2 || st.Pending != 0 {
		t.Fatalf("stats: %d unrouted, %d pending", st.Unrouted, st.Pending)
	}
	un, _, err := o.List(ctx, outbox.ListOptions{Unrouted: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(un) != 2 || un[0].ID != "paid-1" || un[0].Topic != "order.paid" || un[0].Endpoint != "" {
		t.Fatalf("unrouted = %+v", un)
	}
	if pend, _, _ := o.List(ctx, outbox.ListOptions{}); len(pend) != 0 {
		t.Fatalf("unrouted events listed as pending: %+v", pend)
	}
	if ev, err := o.Get(ctx, "paid-1"); err != nil || ev.State != outbox.StatePending || ev.DeliveryStates != nil {
		t.Fatalf("Get of an unrouted event: %+v, %v", ev, err)
	}
	// Re-enqueued while unrouted: a duplicate.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "paid-1", Topic: "order.paid", Key: "o-1", Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.DuplicatesTotal != 1 || st.EnqueuedTotal != 2 {
		t.Fatalf("re-enqueue: %+v", st)
	}

	if err := o.SetSubscriptions(ctx, []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.paid"}}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "billing to receive the routed event", func() bool { return billing.Acked("paid-1") == 1 })
	waitState(t, o, "paid-1", outbox.StateDelivered)
	if got := deliveryStates(t, o, "paid-1"); !slices.Equal(got, []string{"billing=delivered"}) {
		t.Fatalf("deliveries = %q", got)
	}
	if st := o.Stats(); st.Unrouted != 1 {
		t.Fatalf("%d unrouted after routing one of two", st.Unrouted)
	}
	// Enqueued again now that billing subscribes: still a duplicate, no
	// second delivery.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "paid-1", Topic: "order.paid", Key: "o-1", Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.DuplicatesTotal != 2 || st.Pending != 0 {
		t.Fatalf("re-enqueue after routing: %+v", st)
	}
	if billing.Attempts("paid-1") != 1 {
		t.Fatal("a re-enqueue after routing delivered again")
	}
}

// Past its retention, an unrouted event becomes a dead letter with the
// reason; replayed after a subscription appeared, it is delivered.
func TestFanOutUnroutedExpires(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing}, nil, func(c *outbox.Config) {
		c.UnroutedRetention = 50 * time.Millisecond
	})
	ctx := t.Context()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "lost-1", Topic: "invoice.created"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, o, "lost-1", outbox.StateDead)
	ev, err := o.Get(ctx, "lost-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `unrouted: no endpoint subscribes to topic "invoice.created"`; ev.DeadReason != want {
		t.Fatalf("dead reason %q, want %q", ev.DeadReason, want)
	}
	if st := o.Stats(); st.Unrouted != 0 || st.Dead != 1 {
		t.Fatalf("stats after expiry: %+v", st)
	}
	dead, _, err := o.List(ctx, outbox.ListOptions{State: outbox.StateDead, Topic: "invoice.created"})
	if err != nil || len(dead) != 1 || dead[0].ID != "lost-1" {
		t.Fatalf("dead letters of the topic: %+v, %v", dead, err)
	}
	if err := o.SetSubscriptions(ctx, []outbox.Subscription{{Endpoint: "billing", Topics: []string{"invoice.*"}}}); err != nil {
		t.Fatal(err)
	}
	if err := o.Replay(ctx, "lost-1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the replayed event to reach billing", func() bool { return billing.Acked("lost-1") == 1 })
}

// With Config.Unrouted = UnroutedDrop an event nobody subscribes to is
// dropped, and counted.
func TestFanOutUnroutedDrop(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing},
		[]outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.paid"}}},
		func(c *outbox.Config) { c.Unrouted = outbox.UnroutedDrop })
	ctx := t.Context()
	ids, err := o.Enqueue(ctx, outbox.Event{ID: "a", Topic: "order.shipped"}, outbox.Event{ID: "b", Topic: "order.paid"})
	if err != nil || !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("enqueue: %q, %v", ids, err)
	}
	st := o.Stats()
	if st.UnroutedDroppedTotal != 1 || st.Unrouted != 0 || st.EnqueuedTotal != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if _, err := o.Get(ctx, "a"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("the dropped event: %v", err)
	}
	testkit.WaitFor(t, settle, "billing to receive b", func() bool { return billing.Acked("b") == 1 })
}

// A subscription's header filter narrows it to the events that carry
// those header values.
func TestFanOutHeaderFilter(t *testing.T) {
	eu := testkit.NewReceiver(t, "webhook-id", nil)
	all := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"eu": eu, "all": all}, []outbox.Subscription{
		{Endpoint: "eu", Topics: []string{"order.paid"}, Headers: map[string]string{"x-region": "eu"}},
		{Endpoint: "all", Topics: []string{"order.paid"}},
	}, nil)
	ctx := t.Context()
	if _, err := o.Enqueue(ctx,
		outbox.Event{ID: "e1", Topic: "order.paid", Headers: map[string]string{"X-Region": "eu"}},
		outbox.Event{ID: "u1", Topic: "order.paid", Headers: map[string]string{"X-Region": "us"}},
		outbox.Event{ID: "n1", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "all three at the unfiltered endpoint", func() bool { return all.Successes() == 3 })
	waitState(t, o, "e1", outbox.StateDelivered)
	if eu.Acked("e1") != 1 || eu.Attempts("u1") != 0 || eu.Attempts("n1") != 0 {
		t.Fatalf("eu received %+v", eu.Requests())
	}
}

// Deliveries are operated one by one (replay, delete) or per event, a
// deleted endpoint's pending deliveries become dead letters with the
// reason, and the event ID stays one dedup key across topic and
// single-destination events.
func TestFanOutPerDeliveryOperations(t *testing.T) {
	ok := testkit.NewReceiver(t, "webhook-id", nil)
	bad := testkit.NewReceiver(t, "webhook-id", answerSeq(400, 200))
	slow := testkit.NewReceiver(t, "webhook-id", answerSeq(503))
	o := fanOut(t, map[string]*testkit.Receiver{"ok": ok, "bad": bad, "slow": slow},
		[]outbox.Subscription{{Endpoint: "ok", Topics: []string{"*"}}, {Endpoint: "bad", Topics: []string{"*"}}, {Endpoint: "slow", Topics: []string{"*"}}},
		func(c *outbox.Config) { c.BackoffInitial, c.BackoffMax = time.Minute, time.Hour })
	ctx := t.Context()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e1", Topic: "user.created", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "ok to receive, bad to be dead and slow to be tried", func() bool {
		ev, err := o.Get(ctx, "e1")
		return err == nil && slices.Equal(deliveryStates(t, o, "e1"), []string{"bad=dead", "ok=delivered", "slow=pending"}) &&
			ev.State == outbox.StatePending && slow.Attempts("e1") > 0
	})
	// The event ID is one dedup key: the same event again is a duplicate,
	// other content or a destination instead of the topic a conflict.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e1", Topic: "user.created", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []outbox.Event{
		{ID: "e1", Topic: "user.created", Payload: []byte("other")},
		{ID: "e1", Destination: "ok", Payload: []byte("p")},
	} {
		if _, err := o.Enqueue(ctx, ev); !errors.Is(err, outbox.ErrConflict) {
			t.Fatalf("enqueue of %+v: %v, want ErrConflict", ev, err)
		}
	}
	if err := o.ReplayDelivery(ctx, "e1", "ok"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("replay of a delivered delivery: %v", err)
	}
	if err := o.ReplayDelivery(ctx, "e1", "slow"); !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("replay of a pending delivery: %v", err)
	}
	if err := o.ReplayDelivery(ctx, "e1", "bad"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "bad to deliver the replay", func() bool {
		return bad.Acked("e1") == 1 && deliveryStates(t, o, "e1")[0] == "bad=delivered"
	})
	// The endpoint goes away: its pending delivery is a dead letter.
	n, err := o.DeadLetterEndpoint(ctx, "slow", `endpoint "slow" deleted`)
	if err != nil || n != 1 {
		t.Fatalf("DeadLetterEndpoint: %d, %v", n, err)
	}
	ev, err := o.Get(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if ev.State != outbox.StateDead || len(ev.DeliveryStates) != 3 || ev.DeliveryStates[2].DeadReason != `endpoint "slow" deleted` {
		t.Fatalf("after DeadLetterEndpoint: %+v", ev)
	}
	if err := o.DeleteDelivery(ctx, "e1", "slow"); err != nil {
		t.Fatal(err)
	}
	if got := deliveryStates(t, o, "e1"); !slices.Equal(got, []string{"bad=delivered", "ok=delivered", "slow=deleted"}) {
		t.Fatalf("deliveries = %q", got)
	}
	if err := o.DeleteDelivery(ctx, "e1", "slow"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// Delete and Replay of the whole event.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e2", Topic: "user.deleted"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "slow to be tried with e2", func() bool { return slow.Attempts("e2") > 0 })
	if err := o.Delete(ctx, "e2"); err != nil {
		t.Fatal(err)
	}
	if ev, err := o.Get(ctx, "e2"); err != nil || ev.State == outbox.StatePending {
		t.Fatalf("e2 after Delete: %+v, %v", ev, err)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e2", Topic: "user.deleted"}); !errors.Is(err, outbox.ErrDeleted) {
		t.Fatalf("enqueue of a deleted topic event: %v", err)
	}
}

// Enqueue's counts are per event, whatever the number of deliveries: a
// call with an event dropped unrouted, an event fanned out to two endpoints
// and a single-destination one stores two events and counts the drop.
func TestFanOutCountsEvents(t *testing.T) {
	a := testkit.NewReceiver(t, "webhook-id", nil)
	b := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"a": a, "b": b},
		[]outbox.Subscription{{Endpoint: "a", Topics: []string{"x.*"}}, {Endpoint: "b", Topics: []string{"x.y"}}},
		func(c *outbox.Config) { c.Unrouted = outbox.UnroutedDrop })
	ctx := t.Context()
	evs := []outbox.Event{{ID: "dropped", Topic: "z"}, {ID: "fanned", Topic: "x.y"}, {ID: "single", Destination: "a"}}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.EnqueuedTotal != 2 || st.DuplicatesTotal != 0 || st.UnroutedDroppedTotal != 1 {
		t.Fatalf("first call: %+v", st)
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.EnqueuedTotal != 2 || st.DuplicatesTotal != 2 || st.UnroutedDroppedTotal != 2 {
		t.Fatalf("second call: %+v", st)
	}
}

// A topic event enqueued in an Update fans out when the transaction
// commits; EnqueueDead keeps a topic event as a dead letter under its ID.
func TestFanOutInUpdateAndDead(t *testing.T) {
	a := testkit.NewReceiver(t, "webhook-id", nil)
	b := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"a": a, "b": b},
		[]outbox.Subscription{{Endpoint: "a", Topics: []string{"*"}}, {Endpoint: "b", Topics: []string{"room.*"}}}, nil)
	ctx := t.Context()
	err := o.Update(ctx, func(tx *outbox.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte("rooms"))
		if err != nil {
			return err
		}
		if err := bk.Put([]byte("r1"), []byte("closed")); err != nil {
			return err
		}
		_, err = tx.Enqueue(outbox.Event{ID: "room-1-closed", Topic: "room.closed"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, o, "room-1-closed", outbox.StateDelivered)
	if a.Acked("room-1-closed") != 1 || b.Acked("room-1-closed") != 1 {
		t.Fatalf("deliveries: a %d, b %d", a.Acked("room-1-closed"), b.Acked("room-1-closed"))
	}
	id, err := o.EnqueueDead(ctx, outbox.Event{ID: "bad-1", Topic: "room.opened"}, "unmappable")
	if err != nil || id != "bad-1" {
		t.Fatalf("EnqueueDead: %q, %v", id, err)
	}
	ev, err := o.Get(ctx, "bad-1")
	if err != nil || ev.State != outbox.StateDead || ev.DeadReason != "unmappable" || ev.Topic != "room.opened" {
		t.Fatalf("dead topic event: %+v, %v", ev, err)
	}
	// Replayed, it is routed to the endpoints subscribed now.
	if err := o.Replay(ctx, "bad-1"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the replayed event at both endpoints", func() bool {
		return a.Acked("bad-1") == 1 && b.Acked("bad-1") == 1
	})
}
