package outbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// enqueueTopic enqueues n events on topic with IDs prefix-0000..., in
// chunks.
func enqueueTopic(t *testing.T, o *outbox.Outbox, prefix, topic string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i += 500 {
		var evs []outbox.Event
		for j := i; j < min(i+500, n); j++ {
			id := fmt.Sprintf("%s-%05d", prefix, j)
			ids = append(ids, id)
			evs = append(evs, outbox.Event{ID: id, Topic: topic, Payload: []byte(`{}`)})
		}
		if _, err := o.Enqueue(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// holdCommits runs a write transaction that waits until the returned
// function is called: the backfill cannot commit a batch meanwhile.
func holdCommits(t *testing.T, o *outbox.Outbox) (release func()) {
	t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- o.Update(context.Background(), func(*outbox.Tx) error {
			close(held)
			<-done
			return nil
		})
	}()
	<-held
	return func() {
		close(done)
		if err := <-errc; err != nil {
			t.Errorf("the holding transaction: %v", err)
		}
	}
}

// waitDeliveredOnce waits until rc acknowledged each of ids and checks that
// none was delivered twice.
func waitDeliveredOnce(t *testing.T, rc *testkit.Receiver, ids []string) {
	t.Helper()
	testkit.WaitFor(t, settle, fmt.Sprintf("%d events delivered", len(ids)), func() bool { return len(rc.Missing(ids)) == 0 })
	for _, id := range ids {
		if n := rc.Attempts(id); n != 1 {
			t.Fatalf("%s delivered %d times, want once", id, n)
		}
	}
}

// 5,000 events wait unrouted; SetSubscriptions returns while they are
// still unrouted (the commits are held, so the backfill cannot have routed
// any), then the backfill routes them all in the background and each is
// delivered once.
func TestBackfillRunsInTheBackground(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": rc}, nil, nil)
	ids := enqueueTopic(t, o, "ev", "order.paid", 5000)
	if st := o.Stats(); st.Unrouted != 5000 {
		t.Fatalf("%d unrouted, want 5000", st.Unrouted)
	}
	release := holdCommits(t, o)
	if err := o.SetSubscriptions(t.Context(), []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.*"}}}); err != nil {
		t.Fatal(err)
	}
	st := o.Stats()
	eb := o.EndpointBackfill("billing")
	release()
	if st.Unrouted != 5000 || !st.Backfill.Running || st.Backfill.Remaining != 5000 || !eb.Running {
		t.Fatalf("SetSubscriptions returned with %d unrouted, backfill %+v, billing's %+v; want all 5000 waiting, running", st.Unrouted, st.Backfill, eb)
	}
	waitDeliveredOnce(t, rc, ids)
	testkit.WaitFor(t, settle, "the backfill to end", func() bool { return !o.Stats().Backfill.Running })
	st = o.Stats()
	if st.Unrouted != 0 || st.Backfill.Routed != 5000 || st.Backfill.Deliveries != 5000 {
		t.Fatalf("after the backfill: %d unrouted, %+v", st.Unrouted, st.Backfill)
	}
	if eb := o.EndpointBackfill("billing"); eb.Running || eb.Deliveries != 5000 {
		t.Fatalf("billing's backfill: %+v", eb)
	}
}

// Stop during a backfill returns; the events it had not routed are still
// unrouted, and a reopen and Start routes them: every event is delivered
// once, none is lost.
func TestBackfillStopThenResume(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "billing", URL: rc.URL + "/billing", AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := outbox.Open(path, testConfig(sink))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ids := enqueueTopic(t, o, "ev", "order.paid", 5000)
	release := holdCommits(t, o)
	subs := []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.paid"}}}
	if err := o.SetSubscriptions(t.Context(), subs); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- o.Stop(context.Background()) }()
	testkit.WaitFor(t, settle, "Stop to begin", func() bool { return !o.Ready() })
	release()
	if err := <-stopped; err != nil {
		t.Fatalf("Stop during the backfill: %v", err)
	}

	cfg := testConfig(sink)
	cfg.Subscriptions = subs
	o, err = outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o) })
	if st := o.Stats(); st.Unrouted == 0 {
		t.Fatal("Stop let the backfill finish: nothing left to resume")
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	waitDeliveredOnce(t, rc, ids)
	testkit.WaitFor(t, settle, "no event unrouted", func() bool { return o.Stats().Unrouted == 0 })
}

// A change of subscriptions while the backfill runs makes it run again:
// the events only the second subscriptions match are routed too.
func TestBackfillRunsAgainOnChange(t *testing.T) {
	a := testkit.NewReceiver(t, "webhook-id", nil)
	b := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"a": a, "b": b}, nil, nil)
	// The events of b come first in the store, so that a run with the
	// first subscriptions only passes them over.
	bids := enqueueTopic(t, o, "0b", "b.made", 2000)
	aids := enqueueTopic(t, o, "1a", "a.made", 2000)
	release := holdCommits(t, o)
	first := []outbox.Subscription{{Endpoint: "a", Topics: []string{"a.*"}}}
	if err := o.SetSubscriptions(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if err := o.SetSubscriptions(t.Context(), append(first, outbox.Subscription{Endpoint: "b", Topics: []string{"b.*"}})); err != nil {
		t.Fatal(err)
	}
	release()
	waitDeliveredOnce(t, a, aids)
	waitDeliveredOnce(t, b, bids)
	testkit.WaitFor(t, settle, "the backfill to end", func() bool { return !o.Stats().Backfill.Running })
	if st := o.Stats(); st.Unrouted != 0 || st.Backfill.Routed != 4000 {
		t.Fatalf("after the backfill: %d unrouted, %+v", st.Unrouted, st.Backfill)
	}
}

// On an outbox opened but not started, SetSubscriptions routes nothing;
// Start does.
func TestBackfillWaitsForStart(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "billing", URL: rc.URL + "/billing", AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	o, _ := open(t, testConfig(sink))
	ids := enqueueTopic(t, o, "ev", "order.paid", 300)
	if err := o.SetSubscriptions(t.Context(), []outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.paid"}}}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Unrouted != 300 || st.Backfill.Running {
		t.Fatalf("not started: %d unrouted, %+v", st.Unrouted, st.Backfill)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	waitDeliveredOnce(t, rc, ids)
}
