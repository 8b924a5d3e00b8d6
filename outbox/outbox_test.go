package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// receiver is a loopback receiver that records what it receives, by
// Idempotency-Key, and answers with the status its decide function returns
// (200 without one) and the body "answer <status text>".
type receiver struct{ *testkit.Receiver }

func newReceiver(t testing.TB, decide func(r *http.Request, id string, n int) (int, http.Header)) receiver {
	t.Helper()
	return receiver{testkit.NewReceiver(t, "Idempotency-Key", func(r *http.Request, id string, n int) testkit.Reply {
		status, hdr := http.StatusOK, http.Header(nil)
		if decide != nil {
			status, hdr = decide(r, id, n)
		}
		return testkit.Reply{Status: status, Header: hdr, Body: "answer " + http.StatusText(status)}
	})}
}

// successes is the number of 2xx answers to id.
func (rc receiver) successes(id string) int {
	n := 0
	for _, s := range rc.Statuses(id) {
		if s/100 == 2 {
			n++
		}
	}
	return n
}

// delivered is the number of 2xx answers.
func (rc receiver) delivered() int { return rc.Successes() }

// requests returns the statuses answered to id, in order.
func (rc receiver) requests(id string) []int { return rc.Statuses(id) }

func TestConfigErrorsNameTheField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.db")
	sink := sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess}
	})
	cases := []struct {
		field string
		cfg   outbox.Config
	}{
		{"Sink", outbox.Config{}},
		{"Interval", outbox.Config{Sink: sink, Interval: -time.Second}},
		{"Concurrency", outbox.Config{Sink: sink, Concurrency: -1}},
		{"MaxPerEndpoint", outbox.Config{Sink: sink, Concurrency: 4, MaxPerEndpoint: 8}},
		{"BackoffMax", outbox.Config{Sink: sink, BackoffInitial: time.Minute, BackoffMax: time.Second}},
		{"BackoffMultiplier", outbox.Config{Sink: sink, BackoffMultiplier: 0.5}},
		{"MaxIDBytes", outbox.Config{Sink: sink, MaxIDBytes: 1 << 20}},
		{"NoKeyIndex", outbox.Config{Sink: sink, Ordered: true, NoKeyIndex: true}},
		{"LockTimeout", outbox.Config{Sink: sink, LockTimeout: -time.Second}},
		{"InitialMmapSize", outbox.Config{Sink: sink, InitialMmapSize: -1}},
		{"MaxCommitBatch", outbox.Config{Sink: sink, MaxCommitBatch: -1}},
	}
	for _, c := range cases {
		_, err := outbox.Open(path, c.cfg)
		var ce *outbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: got %v, want a *ConfigError naming %s", c.field, err, c.field)
		}
		if !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("%s: %v does not match ErrInvalidConfig", c.field, err)
		}
		// Validate refuses what Open refuses, with the same error, before
		// any file is opened.
		if verr := c.cfg.Validate(); verr == nil || err == nil || verr.Error() != err.Error() || !errors.Is(verr, outbox.ErrInvalidConfig) {
			t.Errorf("%s: Validate returned %v, Open %v; want the same *ConfigError", c.field, verr, err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Config created %s (stat: %v)", path, err)
	}
	if err := (outbox.Config{Sink: sink, CommitInterval: -time.Second, ChangelogRetention: -time.Second, ChangelogMaxEntries: -1}).Validate(); err != nil {
		t.Errorf("the documented negative values (never wait, no limit) are refused: %v", err)
	}
}

func TestEnqueueValidation(t *testing.T) {
	o, _ := open(t, testConfig(newWebSink()))
	ctx := context.Background()
	good := outbox.Event{Destination: "http://127.0.0.1:1/x", Payload: []byte("{}")}
	cases := []struct {
		field string
		ev    outbox.Event
	}{
		{"destination", outbox.Event{}},
		{"destination", outbox.Event{Destination: "not a url"}},
		{"id", outbox.Event{ID: strings.Repeat("x", 201), Destination: good.Destination}},
		{"id", outbox.Event{ID: "a\nb", Destination: good.Destination}},
		{"id", outbox.Event{ID: "a\u0085b", Destination: good.Destination}},
		{"key", outbox.Event{Key: "a\x7fb", Destination: good.Destination}},
		{"destination", outbox.Event{Destination: "orders\xff"}},
		{"method", outbox.Event{Destination: good.Destination, Method: "PO ST"}},
		{"headers", outbox.Event{Destination: good.Destination, Headers: map[string]string{"Bad Name": "v"}}},
		{"headers", outbox.Event{Destination: good.Destination, Headers: map[string]string{"X-Ok": "a\r\nInjected: 1"}}},
		{"payload", outbox.Event{Destination: good.Destination, Payload: make([]byte, 1<<20+1)}},
	}
	for _, c := range cases {
		_, err := o.Enqueue(ctx, good, c.ev)
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || ve.Index != 1 || !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("%s: got %v, want a ValidationError for event 1 field %s", c.field, err, c.field)
		}
	}
	if s := o.Stats(); s.Pending != 0 || s.EnqueuedTotal != 0 {
		t.Fatalf("a refused call stored events: %+v", s)
	}
}

// ValidText is the rule Enqueue applies to IDs, keys and destinations, which
// the HTTP decoder and the Kafka source apply before they enqueue.
func TestValidText(t *testing.T) {
	for s, want := range map[string]bool{
		"":               true,
		"orders":         true,
		"évènement-42":   true,
		"a b/c:d":        true,
		"tab\there":      false,
		"nul\x00":        false,
		"del\x7f":        false,
		"c1\u0085":       false,
		"broken\xffutf8": false,
		"half\xe2\x82":   false,
	} {
		if got := outbox.ValidText(s); got != want {
			t.Errorf("ValidText(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestDeliveredToReceiver(t *testing.T) {
	rc := newReceiver(t, nil)
	o := openStarted(t)
	ctx := context.Background()
	ids, err := o.Enqueue(ctx,
		outbox.Event{ID: "one", Destination: rc.URL + "/hook", Payload: []byte(`{"n":1}`)},
		outbox.Event{Destination: rc.URL + "/hook", Payload: []byte(`{"n":2}`), Headers: map[string]string{"X-Tenant": "t1"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != "one" || len(ids[1]) != 36 {
		t.Fatalf("ids = %q, want the given one and a generated UUID", ids)
	}
	testkit.WaitFor(t, settle, "both delivered", func() bool { return rc.delivered() == 2 })
	testkit.WaitFor(t, settle, "delete committed", func() bool { return o.Stats().Pending == 0 })
	for _, id := range ids {
		ev, err := o.Get(ctx, id)
		if err != nil || ev.State != outbox.StateDelivered {
			t.Fatalf("Get(%s) = %+v, %v; want delivered", id, ev, err)
		}
	}
	// Re-enqueueing a delivered ID within the dedup window is a duplicate.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "one", Destination: rc.URL + "/hook", Payload: []byte(`{"n":1}`)}); err != nil {
		t.Fatalf("re-enqueue of a delivered ID: %v", err)
	}
	s := o.Stats()
	if s.DuplicatesTotal != 1 || s.EnqueuedTotal != 2 || s.DeliveredTotal != 2 {
		t.Fatalf("stats = %+v", s)
	}
	if rc.successes("one") != 1 {
		t.Fatalf("event delivered %d times", rc.successes("one"))
	}
}

func TestEnqueueIdempotentAndConflict(t *testing.T) {
	o, _ := open(t, testConfig(newWebSink()))
	ctx := context.Background()
	ev := outbox.Event{ID: "e1", Destination: "http://127.0.0.1:1/a", Payload: []byte("x")}
	for range 2 {
		if _, err := o.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	ev2 := ev
	ev2.Payload = []byte("other")
	_, err := o.Enqueue(ctx, outbox.Event{ID: "e2", Destination: ev.Destination}, ev2)
	if !errors.Is(err, outbox.ErrConflict) {
		t.Fatalf("conflicting enqueue: %v, want ErrConflict", err)
	}
	if _, err := o.Get(ctx, "e2"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("the conflicting call stored e2: %v", err)
	}
	s := o.Stats()
	if s.Pending != 1 || s.EnqueuedTotal != 1 || s.DuplicatesTotal != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestAdminOperations(t *testing.T) {
	var dead atomic.Bool
	dead.Store(true)
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		if strings.HasSuffix(r.URL.Path, "/gone") {
			return http.StatusGone, nil
		}
		if dead.Load() {
			return http.StatusBadRequest, nil
		}
		return http.StatusOK, nil
	})
	o := openStarted(t)
	ctx := context.Background()
	var evs []outbox.Event
	for i := range 5 {
		evs = append(evs, outbox.Event{ID: "d" + string(rune('0'+i)), Key: "k" + string(rune('0'+i%2)), Destination: rc.URL + "/a"})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "dead letters", func() bool { return o.Stats().Dead == 5 })
	ev, err := o.Get(ctx, "d0")
	if err != nil || ev.State != outbox.StateDead || ev.LastStatus != 400 || !strings.Contains(ev.DeadReason, "400") || ev.DeadAt.IsZero() {
		t.Fatalf("Get dead = %+v, %v", ev, err)
	}
	page, next, err := o.List(ctx, outbox.ListOptions{State: outbox.StateDead, Limit: 2})
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("List page 1 = %d events, next %q, %v", len(page), next, err)
	}
	rest, next2, err := o.List(ctx, outbox.ListOptions{State: outbox.StateDead, After: next, Limit: 10})
	if err != nil || len(rest) != 3 || next2 != "" || rest[0].ID <= page[1].ID {
		t.Fatalf("List page 2 = %d events, next %q, %v", len(rest), next2, err)
	}
	if err := o.Replay(ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Replay unknown: %v", err)
	}
	if err := o.Delete(ctx, "d4"); err != nil {
		t.Fatal(err)
	}
	if ev, err := o.Get(ctx, "d4"); err != nil || ev.State != outbox.StateDeleted {
		t.Fatalf("Get dropped = %+v, %v", ev, err)
	}
	if err := o.Delete(ctx, "d4"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Delete twice: %v", err)
	}
	dead.Store(false)
	if err := o.Replay(ctx, "d0"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "replayed event delivered", func() bool { return rc.successes("d0") == 1 })
	// Left dead: d1 (k1), d2 (k0), d3 (k1).
	n, err := o.ReplayDead(ctx, outbox.ReplayFilter{KeyPrefix: "k1", Rate: 1000})
	if err != nil || n != 2 {
		t.Fatalf("ReplayDead(k1) = %d, %v; want 2", n, err)
	}
	n, err = o.ReplayDead(ctx, outbox.ReplayFilter{Rate: 1000})
	if err != nil || n != 1 {
		t.Fatalf("ReplayDead(all) = %d, %v; want 1", n, err)
	}
	testkit.WaitFor(t, settle, "all replayed delivered", func() bool { return rc.delivered() == 4 })
	if err := o.Replay(ctx, "d0"); !errors.Is(err, outbox.ErrNotFound) && !errors.Is(err, outbox.ErrNotDead) {
		t.Fatalf("Replay delivered: %v", err)
	}

	// A 410 disables the endpoint; its event stays pending with no attempt.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "g", Destination: rc.URL + "/gone"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "endpoint disabled", func() bool { return o.Stats().EndpointsDisabled == 1 })
	eps, err := o.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gone outbox.EndpointState
	for _, ep := range eps {
		if ep.Disabled {
			gone = ep
		}
	}
	if !strings.Contains(gone.DisabledReason, "410") {
		t.Fatalf("endpoints = %+v", eps)
	}
	if ev, err := o.Get(ctx, "g"); err != nil || ev.State != outbox.StatePending || ev.Attempts != 0 {
		t.Fatalf("event of disabled endpoint = %+v, %v", ev, err)
	}
	if err := o.EnableEndpoint(ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("EnableEndpoint unknown: %v", err)
	}
	before := len(rc.requests("g"))
	if err := o.EnableEndpoint(ctx, gone.Name); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "retried after enable", func() bool { return len(rc.requests("g")) > before })

	stop(t, o)
	if _, err := o.Enqueue(ctx, outbox.Event{Destination: rc.URL + "/a"}); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Enqueue after Stop: %v", err)
	}
	if _, err := o.Get(ctx, "d0"); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Get after Stop: %v", err)
	}
	if err := o.Start(); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Start after Stop: %v", err)
	}
	if o.Ready() {
		t.Fatal("Ready after Stop")
	}
}

// TestEndpointAdminWaitsForACommittingDisable: once Stats counts an
// endpoint disabled, Endpoints lists it so and EnableEndpoint enables it for
// good, even while the commit of the disabling outcome is still on its way
// to the file. (Endpoints used to answer from the file alone, and
// EnableEndpoint found no endpoint, or had its enable overwritten by the
// disable committed after it.)
func TestEndpointAdminWaitsForACommittingDisable(t *testing.T) {
	gate, arrived := make(chan struct{}), make(chan struct{}, 1)
	rc := newReceiver(t, func(_ *http.Request, _ string, n int) (int, http.Header) {
		if n > 0 {
			return http.StatusOK, nil
		}
		arrived <- struct{}{}
		<-gate
		return http.StatusGone, nil
	})
	o := openStarted(t)
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "g", Destination: rc.URL + "/gone"}); err != nil {
		t.Fatal(err)
	}
	<-arrived

	// Hold the store's committer, then let the receiver answer 410: the
	// engine counts the endpoint disabled at once, its commit waits.
	held, release, holdDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := o.StoreForTest().UpsertKey(ctx, "hold", func(*store.Record) (*store.Record, error) {
			close(held)
			<-release
			return nil, errHold
		})
		holdDone <- err
	}()
	<-held
	close(gate)
	testkit.WaitFor(t, settle, "endpoint counted disabled", func() bool { return o.Stats().EndpointsDisabled == 1 })

	var listed []outbox.EndpointState
	var listErr, enableErr error
	adminDone := make(chan struct{})
	go func() {
		defer close(adminDone)
		if listed, listErr = o.Endpoints(ctx); listErr != nil || len(listed) != 1 {
			return
		}
		enableErr = o.EnableEndpoint(ctx, listed[0].Name)
	}()
	// Give a wrong early answer the chance to show; what is asserted does
	// not depend on how long this is.
	select {
	case <-adminDone:
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-holdDone; err != errHold {
		t.Fatalf("hold: %v", err)
	}
	<-adminDone
	if listErr != nil || len(listed) != 1 || !listed[0].Disabled || !strings.Contains(listed[0].DisabledReason, "410") {
		t.Fatalf("Endpoints while the disable was committing = %+v, %v; want the endpoint disabled by the 410", listed, listErr)
	}
	if enableErr != nil {
		t.Fatalf("EnableEndpoint while the disable was committing: %v", enableErr)
	}
	testkit.WaitFor(t, settle, "delivered after enable", func() bool { return rc.successes("g") == 1 })
	ep, ok, err := o.StoreForTest().Endpoint(listed[0].Name)
	if err != nil || !ok || ep.Disabled {
		t.Fatalf("stored endpoint after enable = %+v, %v, %v; want enabled", ep, ok, err)
	}
	if n := o.Stats().EndpointsDisabled; n != 0 {
		t.Fatalf("Stats counts %d endpoints disabled after enable", n)
	}
}

var errHold = errors.New("hold")

func TestStopBeforeStartAndTwice(t *testing.T) {
	o, path := open(t, testConfig(newWebSink()))
	if o.Ready() {
		t.Fatal("Ready before Start")
	}
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "x", Destination: "http://127.0.0.1:1/a"}); err != nil {
		t.Fatal(err)
	}
	stop(t, o)
	stop(t, o)
	// The file is closed: it can be opened again, and the event is there.
	o2, err := outbox.Open(path, testConfig(newWebSink()))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, o2)
	if ev, err := o2.Get(context.Background(), "x"); err != nil || ev.State != outbox.StatePending {
		t.Fatalf("after reopen: %+v, %v", ev, err)
	}
	if err := o2.Start(); err != nil {
		t.Fatal(err)
	}
	if err := o2.Start(); err != nil {
		t.Fatal(err)
	}
	if !o2.Ready() {
		t.Fatal("not Ready after Start")
	}
}

// A dead letter made by its first attempt shows that attempt.
func TestDeadOnFirstAttemptCountsIt(t *testing.T) {
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionDead, Status: 400}
	})
	o, _ := open(t, testConfig(sink))
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "bad", Destination: "receiver"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the dead letter", func() bool { return o.Stats().Dead == 1 })
	ev, err := o.Get(ctx, "bad")
	if err != nil || ev.State != outbox.StateDead || ev.Attempts != 1 {
		t.Fatalf("Get = %+v, %v; want dead after 1 attempt", ev, err)
	}
}

// listingSink has configured endpoints.
type listingSink struct{ sinkFunc }

func (listingSink) EndpointNames() []string { return []string{"billing", "orders"} }

// The seeded campaign's scenario: an operator enables a configured
// endpoint that holds no state (it was never disabled, or its state went
// with a file restored from an older copy). It is enabled already: the call
// succeeds and its events are made due, where it used to answer that the
// endpoint does not exist. An endpoint nobody configured is still not found.
func TestCampaignEnableConfiguredEndpointWithoutState(t *testing.T) {
	var delivered atomic.Int32
	sink := listingSink{func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		delivered.Add(1)
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	}}
	o, _ := open(t, testConfig(sink))
	ctx := context.Background()
	if err := o.EnableEndpoint(ctx, "orders"); err != nil {
		t.Fatalf("EnableEndpoint of a configured endpoint without state: %v, want nil", err)
	}
	if err := o.EnableEndpoint(ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("EnableEndpoint of an endpoint nobody configured: %v, want ErrNotFound", err)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the delivery of the event", func() bool { return delivered.Load() == 1 && o.Stats().Pending == 0 })
}

// Endpoints lists the configured endpoints that have no state yet beside
// those that have one.
func TestEndpointsListsConfiguredOnes(t *testing.T) {
	sink := listingSink{func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionRetry, Status: 500}
	}}
	o, _ := open(t, testConfig(sink))
	ctx := context.Background()
	eps, err := o.Endpoints(ctx)
	if err != nil || len(eps) != 2 || eps[0].Name != "billing" || eps[1].Name != "orders" || eps[0].FailureStreak != 0 {
		t.Fatalf("Endpoints before any delivery = %+v, %v; want billing and orders with a zero state", eps, err)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "e", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "a failed attempt", func() bool { return o.Stats().FailedTotal >= 1 && o.Stats().InFlight == 0 })
	testkit.WaitFor(t, settle, "the failure streak", func() bool {
		eps, err = o.Endpoints(ctx)
		return err == nil && len(eps) == 2 && eps[1].FailureStreak >= 1
	})

	if eps[0].Name != "billing" || eps[1].Name != "orders" {
		t.Fatalf("Endpoints = %+v, want billing then orders", eps)
	}
}

// The seeded campaign's scenario: on an ordered outbox, an endpoint's
// events stopped being delivered for good once more followers of a key
// waited at the front of its due index than one punctuation examines: the
// key's head, parked by a 404 behind them, and every event after them were
// never read again. A punctuation now resumes where the last one stopped.
func TestCampaignOrderedFollowersDoNotStarveTheirEndpoint(t *testing.T) {
	var parking atomic.Bool
	parking.Store(true)
	var headAttempts atomic.Int32
	var order []string
	var mu sync.Mutex
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		if d.ID == "head" {
			headAttempts.Add(1)
			if parking.Load() {
				return outbox.Result{Action: outbox.ActionPark, Status: 404}
			}
		}
		if d.Key != "" {
			mu.Lock()
			order = append(order, d.ID)
			mu.Unlock()
		}
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	cfg := testConfig(sink)
	cfg.Ordered, cfg.ParkInterval, cfg.Concurrency = true, 200*time.Millisecond, 2
	o, _ := open(t, cfg)
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "head", Key: "x", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the head parked", func() bool { return headAttempts.Load() == 1 && o.Stats().InFlight == 0 })
	// Followers due before the head's next attempt, more than a
	// punctuation examines, and unkeyed events behind them.
	var evs []outbox.Event
	want := []string{"head"}
	for i := range 150 {
		id := fmt.Sprintf("f-%03d", i)
		evs = append(evs, outbox.Event{ID: id, Key: "x", Destination: "orders"})
		want = append(want, id)
	}
	for i := range 20 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("u-%02d", i), Destination: "orders"})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	parking.Store(false)
	testkit.WaitFor(t, settle, "every event delivered", func() bool { return o.Stats().Pending == 0 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Fatalf("key x delivered in the order %v…, want head, f-000, f-001, …", order[:min(5, len(order))])
	}
}
