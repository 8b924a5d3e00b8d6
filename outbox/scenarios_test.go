package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// The room-leave race: every member leaves a room at once, each through a
// read-modify-write of the room's pending state event. None is lost.
func TestUpsertConcurrentLeavesLoseNothing(t *testing.T) {
	o, _ := open(t, testConfig(newWebSink()))
	ctx := context.Background()
	dest := "http://127.0.0.1:1/rooms"
	var members []string
	for i := range 32 {
		members = append(members, fmt.Sprintf("user%02d", i))
	}
	first, err := o.Upsert(ctx, "room-1", func(cur *outbox.Event) (outbox.Event, error) {
		if cur != nil {
			t.Errorf("room-1 already has a pending event")
		}
		return outbox.Event{Destination: dest, Payload: []byte(strings.Join(members, ","))}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			_, err := o.Upsert(ctx, "room-1", func(cur *outbox.Event) (outbox.Event, error) {
				left := slices.DeleteFunc(strings.Split(string(cur.Payload), ","), func(s string) bool { return s == m || s == "" })
				ev := *cur
				ev.Payload = []byte(strings.Join(left, ","))
				return ev, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ev, err := o.Get(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Payload) != 0 {
		t.Fatalf("room still lists %q after everybody left", ev.Payload)
	}
	if ev.Version <= first.Version {
		t.Fatalf("version %d did not move past %d", ev.Version, first.Version)
	}
	if s := o.Stats(); s.Pending != 1 || s.EnqueuedTotal != 1 {
		t.Fatalf("coalescing kept %d pending events, enqueued %d", s.Pending, s.EnqueuedTotal)
	}
}

// A delivery of version n that succeeds after version n+1 was written does
// not delete n+1: n+1 is delivered in turn.
func TestStaleDeliveryDoesNotDeleteNewerVersion(t *testing.T) {
	inFirst := make(chan struct{})
	releaseFirst := make(chan struct{})
	var payloads []string
	var mu sync.Mutex
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		buf := make([]byte, 64)
		k, _ := r.Body.Read(buf)
		mu.Lock()
		payloads = append(payloads, string(buf[:k]))
		first := len(payloads) == 1
		mu.Unlock()
		if first {
			close(inFirst)
			<-releaseFirst
		}
		return http.StatusOK, nil
	})
	o := openStarted(t)
	ctx := context.Background()
	v1, err := o.Upsert(ctx, "room-2", func(*outbox.Event) (outbox.Event, error) {
		return outbox.Event{Destination: rc.URL + "/rooms", Payload: []byte("alice,bob")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-inFirst // version n is being delivered
	v2, err := o.Upsert(ctx, "room-2", func(cur *outbox.Event) (outbox.Event, error) {
		ev := *cur
		ev.Payload = []byte("alice")
		return ev, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v2.ID != v1.ID || v2.Version <= v1.Version {
		t.Fatalf("upsert of a pending key: %s v%d after %s v%d", v2.ID, v2.Version, v1.ID, v1.Version)
	}
	close(releaseFirst) // version n succeeds now
	testkit.WaitFor(t, settle, "version n+1 delivered", func() bool { return rc.delivered() == 2 })
	testkit.WaitFor(t, settle, "delete committed", func() bool { return o.Stats().Pending == 0 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(payloads) != "[alice,bob alice]" {
		t.Fatalf("receiver saw %q, want the old state then the new one", payloads)
	}
}

// With Ordered on, each key's events arrive in enqueue order while the head
// of one key is retried, and the other keys are not blocked by it.
func TestOrderedPerKey(t *testing.T) {
	const keys, per = 5, 20
	var mu sync.Mutex
	type request struct {
		id string
		ok bool
	}
	var requests []request // every request, in arrival order
	othersDone := 0
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if id == "k0/00" && othersDone < (keys-1)*per {
			requests = append(requests, request{id, false})
			return http.StatusInternalServerError, nil // the head of k0 fails until every other key is through
		}
		requests = append(requests, request{id, true})
		if !strings.HasPrefix(id, "k0/") {
			othersDone++
		}
		return http.StatusOK, nil
	})
	sink := newWebSink()
	defer sink.close()
	cfg := testConfig(sink)
	cfg.Ordered = true
	cfg.Concurrency = 16
	cfg.MaxAttempts = 1000
	o, _ := open(t, cfg)
	ctx := context.Background()
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	for seq := range per {
		var batch []outbox.Event
		for k := range keys {
			batch = append(batch, outbox.Event{ID: fmt.Sprintf("k%d/%02d", k, seq), Key: fmt.Sprintf("k%d", k), Destination: rc.URL + "/hook"})
		}
		if _, err := o.Enqueue(ctx, batch...); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, settle, "all delivered", func() bool { return rc.delivered() == keys*per })
	mu.Lock()
	defer mu.Unlock()
	next := map[string]int{} // key -> next expected seq
	for _, rq := range requests {
		key, seq, _ := strings.Cut(rq.id, "/")
		want := fmt.Sprintf("%02d", next[key])
		if seq != want {
			t.Fatalf("key %s: request for event %s before event %s was delivered (requests %v)", key, seq, want, requests)
		}
		if rq.ok {
			next[key]++
		}
	}
	if fails := len(rc.requests("k0/00")); fails < 2 {
		t.Fatalf("the head of k0 was tried %d times; the scenario needs it retried", fails)
	}
}

// Stop under load with a receiver that hangs returns by its deadline,
// loses nothing and spends no attempt on the cancelled deliveries.
func TestStopWithHangingReceiver(t *testing.T) {
	var hanging atomic.Int64
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		hanging.Add(1)
		<-r.Context().Done()
		return http.StatusOK, nil
	})
	sink := newWebSink()
	defer sink.close()
	cfg := testConfig(sink)
	cfg.Concurrency = 8
	cfg.InitialPerEndpoint = 8 // all eight workers hang from the start
	path := t.TempDir() + "/outbox.db"
	o, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Callers keep enqueueing until the outbox closes.
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				ids, err := o.Enqueue(ctx, outbox.Event{ID: fmt.Sprintf("w%d-%d", w, i), Destination: rc.URL + "/hook"})
				if errors.Is(err, outbox.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, ids...)
				mu.Unlock()
			}
		})
	}
	testkit.WaitFor(t, settle, "deliveries hanging", func() bool { return hanging.Load() >= 8 && o.Stats().InFlight == 8 })
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = o.Stop(sctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline's error after cancelling deliveries", err)
	}
	wg.Wait()
	if err := o.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Stop = %v, want the first one's result", err)
	}

	o2, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, o2)
	for _, id := range acked {
		ev, err := o2.Get(ctx, id)
		if err != nil || ev.State != outbox.StatePending || ev.Attempts != 0 {
			t.Fatalf("event %s after Stop: %+v, %v; want pending with no attempt spent", id, ev, err)
		}
	}
	if s := o2.Stats(); s.Pending != len(acked) {
		t.Fatalf("%d pending, %d acknowledged", s.Pending, len(acked))
	}
}

// A 429 with Retry-After: 120 holds every event of the endpoint for 120 s,
// also across a restart. Time is a fake clock.
func TestRetryAfterHoldsEndpoint(t *testing.T) {
	var throttled atomic.Bool
	rc := newReceiver(t, func(r *http.Request, id string, n int) (int, http.Header) {
		if throttled.CompareAndSwap(false, true) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"120"}}
		}
		return http.StatusOK, nil
	})
	sink := newWebSink()
	defer sink.close()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := newFakeClock(t0)
	var puncts atomic.Int64
	cfg := testConfig(sink)
	cfg.Clock = clock
	cfg.Interval = time.Second
	cfg.Concurrency = 1
	cfg.Hooks.OnPunctuation = func(time.Duration, int) { puncts.Add(1) }
	dir := t.TempDir()
	path := dir + "/outbox.db"
	o, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var evs []outbox.Event
	for i := range 5 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("t%d", i), Destination: rc.URL + "/hook"})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "endpoint throttled", func() bool { return o.Stats().EndpointsThrottled == 1 })
	requests := func() int {
		n := 0
		for _, ev := range evs {
			n += len(rc.requests(ev.ID))
		}
		return n
	}
	// tick advances the fake clock and waits for a punctuation at the new
	// time to complete.
	tick := func(o *outbox.Outbox, d time.Duration) {
		before := puncts.Load()
		clock.Advance(d)
		testkit.WaitFor(t, settle, "a punctuation", func() bool { return puncts.Load() > before })
	}
	for range 6 {
		tick(o, 10*time.Second)
	}
	if n := requests(); n != 1 {
		t.Fatalf("%d requests within 60 s of a Retry-After: 120", n)
	}
	stop(t, o)

	o2, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, o2)
	eps, err := o2.Endpoints(ctx)
	if err != nil || len(eps) != 1 || !eps[0].ThrottledUntil.Equal(t0.Add(120*time.Second)) {
		t.Fatalf("endpoints after restart = %+v, %v; want throttled until t0+120s", eps, err)
	}
	if err := o2.Start(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		tick(o2, 11*time.Second) // up to t0+115s
	}
	tick(o2, 4*time.Second) // t0+119s
	if n := requests(); n != 1 {
		t.Fatalf("%d requests within 119 s of a Retry-After: 120, across a restart", n)
	}
	tick(o2, 2*time.Second) // t0+121s
	testkit.WaitFor(t, settle, "all delivered after the hold", func() bool { return rc.delivered() == 5 })
}

// Deliveries in flight never exceed Concurrency overall nor MaxPerEndpoint
// for one endpoint, and a busy endpoint does not stop the others.
func TestConcurrencyLimits(t *testing.T) {
	var mu sync.Mutex
	cur := map[string]int{}
	peak := map[string]int{}
	total, peakTotal := 0, 0
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		mu.Lock()
		cur[d.Endpoint]++
		total++
		peak[d.Endpoint] = max(peak[d.Endpoint], cur[d.Endpoint])
		peakTotal = max(peakTotal, total)
		mu.Unlock()
		time.Sleep(time.Millisecond) // a receiver that takes a while to answer
		mu.Lock()
		cur[d.Endpoint]--
		total--
		mu.Unlock()
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	cfg := testConfig(sink)
	cfg.Concurrency = 8
	cfg.MaxPerEndpoint = 3
	o, _ := open(t, cfg)
	ctx := context.Background()
	var evs []outbox.Event
	for i := range 300 {
		evs = append(evs, outbox.Event{Destination: fmt.Sprintf("ep%d", i%4)})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "all delivered", func() bool { return o.Stats().DeliveredTotal == 300 })
	mu.Lock()
	defer mu.Unlock()
	if peakTotal > 8 {
		t.Fatalf("%d deliveries at once, Concurrency is 8", peakTotal)
	}
	for ep, n := range peak {
		if n > 3 {
			t.Fatalf("endpoint %s: %d deliveries at once, MaxPerEndpoint is 3", ep, n)
		}
	}
	if len(peak) != 4 {
		t.Fatalf("endpoints served: %v", peak)
	}
}

// The dedup window: a delivered ID is a duplicate while its tombstone lasts;
// the maintenance punctuation trims it after TombstoneRetention, and the ID
// can be used again.
func TestDedupWindowEndsAfterRetention(t *testing.T) {
	rc := newReceiver(t, nil)
	sink := newWebSink()
	defer sink.close()
	clock := newFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(sink)
	cfg.Clock = clock
	cfg.Interval = time.Second
	cfg.MaintenanceInterval = time.Minute
	cfg.TombstoneRetention = time.Hour
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev := outbox.Event{ID: "once", Destination: rc.URL + "/hook", Payload: []byte("1")}
	if _, err := o.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "delivered", func() bool { return rc.successes("once") == 1 && o.Stats().Pending == 0 })
	if _, err := o.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if s := o.Stats(); s.DuplicatesTotal != 1 || s.Pending != 0 {
		t.Fatalf("re-enqueue within the window: %+v", s)
	}
	// Past the retention, the next maintenance run trims the tombstone.
	clock.Advance(time.Hour + time.Minute)
	testkit.WaitFor(t, settle, "tombstone trimmed", func() bool {
		_, err := o.Get(ctx, "once")
		if errors.Is(err, outbox.ErrNotFound) {
			return true
		}
		clock.Advance(time.Minute)
		return false
	})

	if _, err := o.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "delivered again", func() bool { return rc.successes("once") == 2 })
	if s := o.Stats(); s.DuplicatesTotal != 1 || s.EnqueuedTotal != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// Without the key index keyed events are stored and delivered as any
// other, and Upsert, which needs the index, says so without calling fn.
func TestNoKeyIndexDeliversKeyedEventsAndRefusesUpsert(t *testing.T) {
	var got sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Idempotency-Key"), true)
	}))
	defer srv.Close()
	cfg := testConfig(newWebSink())
	cfg.NoKeyIndex = true
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids, err := o.Enqueue(ctx,
		outbox.Event{Key: "order-1", Destination: srv.URL + "/hook", Payload: []byte(`{"n":1}`)},
		outbox.Event{Key: "order-1", Destination: srv.URL + "/hook", Payload: []byte(`{"n":2}`)},
		outbox.Event{Key: "order-2", Destination: srv.URL + "/hook", Payload: []byte(`{"n":3}`)})
	if err != nil {
		t.Fatal(err)
	}
	called := false
	_, err = o.Upsert(ctx, "order-1", func(*outbox.Event) (outbox.Event, error) {
		called = true
		return outbox.Event{Destination: srv.URL + "/hook"}, nil
	})
	if !errors.Is(err, outbox.ErrNoKeyIndex) || !errors.Is(err, store.ErrNoKeyIndex) || called || !strings.Contains(err.Error(), "NoKeyIndex") {
		t.Fatalf("Upsert without the key index = %v (fn called: %v), want store.ErrNoKeyIndex naming the option", err, called)
	}
	testkit.WaitFor(t, 10*time.Second, "every keyed event delivered", func() bool {
		for _, id := range ids {
			if _, ok := got.Load(id); !ok {
				return false
			}
		}
		return o.Stats().Pending == 0
	})

}

// A burst of throttle answers without Retry-After to deliveries that were
// all in flight at once holds the endpoint for the first step of the
// backoff, not for a step per answer; only an answer to a delivery sent
// after the hold grows the wait, and the first success ends the episode.
// Time is a fake clock.
func TestThrottleBurstGrowsOncePerEpisode(t *testing.T) {
	const burst = 32
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	var succeed atomic.Bool
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		mu.Lock()
		arrived++
		if arrived == burst {
			close(all)
		}
		mu.Unlock()
		<-all // every answer of the first round comes while all are in flight
		if succeed.Load() {
			return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
		}
		return outbox.Result{Action: outbox.ActionThrottle, Status: 429}
	})
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := newFakeClock(t0)
	var puncts atomic.Int64
	cfg := testConfig(sink)
	cfg.Clock = clock
	cfg.Interval = time.Second
	cfg.Concurrency = burst
	cfg.InitialPerEndpoint = burst // the whole burst in flight at once
	cfg.BackoffInitial = time.Second
	cfg.BackoffMax = time.Hour
	cfg.Hooks.OnPunctuation = func(time.Duration, int) { puncts.Add(1) }
	o, _ := open(t, cfg)
	ctx := context.Background()
	var evs []outbox.Event
	for i := range 2 * burst {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("t%02d", i), Destination: "receiver"})
	}
	if _, err := o.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	throttledFor := func(failed uint64) time.Duration {
		t.Helper()
		testkit.WaitFor(t, settle, "the throttle answers committed", func() bool {
			s := o.Stats()
			return s.FailedTotal >= failed && s.InFlight == 0
		})

		eps, err := o.Endpoints(ctx)
		if err != nil || len(eps) != 1 {
			t.Fatalf("Endpoints = %+v, %v", eps, err)
		}
		return eps[0].ThrottledUntil.Sub(clock.Now())
	}
	tick := func(d time.Duration) {
		before := puncts.Load()
		clock.Advance(d)
		testkit.WaitFor(t, settle, "a punctuation", func() bool { return puncts.Load() > before })
	}

	// 32 answers of one burst: the backoff's first step, 1s ±50%.
	if d := throttledFor(burst); d <= 0 || d > 1500*time.Millisecond {
		t.Fatalf("after a burst of %d throttle answers the endpoint is held for %s, want the first step of the backoff (at most 1.5s)", burst, d)
	}
	// The hold ends; the next deliveries were sent after it and are
	// throttled again: one more step (2s ±50%), not one per answer.
	tick(2 * time.Second)
	if d := throttledFor(burst + 1); d <= 0 || d > 3*time.Second {
		t.Fatalf("after the second burst the endpoint is held for %s, want the second step (at most 3s)", d)
	}
	// The receiver recovers: the first success ends the episode, and the
	// pending events are delivered.
	succeed.Store(true)
	tick(4 * time.Second)
	testkit.WaitFor(t, settle, "every event delivered", func() bool { s := o.Stats(); return s.Pending == 0 && s.InFlight == 0 })
	if s := o.Stats(); s.EndpointsThrottled != 0 {
		t.Errorf("%d endpoints still throttled after the receiver recovered", s.EndpointsThrottled)
	}
}
