package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// gateSink succeeds at once for every event but the ones named in hold,
// which wait until release is closed. It records the order of deliveries.
type gateSink struct {
	hold    map[string]bool
	release chan struct{}

	mu  sync.Mutex
	got []string
}

func (s *gateSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	if s.hold[d.ID] {
		select {
		case <-s.release:
		case <-ctx.Done():
			return outbox.Result{Action: outbox.ActionRetry, Err: ctx.Err()}
		}
	}
	s.mu.Lock()
	s.got = append(s.got, d.ID)
	s.mu.Unlock()
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

func (s *gateSink) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// startInBubble opens and starts an outbox inside a synctest bubble (its
// goroutines, timers and the punctuator's clock belong to the bubble); it is
// stopped when the test ends.
func startInBubble(t *testing.T, cfg outbox.Config) *outbox.Outbox {
	t.Helper()
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	return o
}

func enqueueIDs(t *testing.T, o *outbox.Outbox, key string, ids ...string) {
	t.Helper()
	evs := make([]outbox.Event, len(ids))
	for i, id := range ids {
		evs[i] = outbox.Event{ID: id, Key: key, Destination: "https://receiver.example/hook", Payload: []byte(`{}`)}
	}
	if _, err := o.Enqueue(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
}

// waitPending advances the bubble's clock a second at a time until nothing
// is pending, failing after a simulated day.
func waitPending(t *testing.T, o *outbox.Outbox) {
	t.Helper()
	for start := time.Now(); o.Stats().Pending > 0; time.Sleep(time.Second) {
		if time.Since(start) > 24*time.Hour {
			t.Fatalf("still %d pending after a simulated day", o.Stats().Pending)
		}
	}
}

// While deliveries are under way, outcomes wait up to CommitInterval to
// share a commit, but never beyond MaxUncommitted of them: a full batch is
// committed at once, so the bound on what a crash delivers again does not
// stall the pipeline until the interval ends. (Had full batches waited too,
// the first four deliveries would hold every other for the hour.)
func TestFullCommitBatchDoesNotWaitForInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxUncommitted = 4
		sink := &gateSink{hold: map[string]bool{"hang": true}, release: make(chan struct{})}
		cfg := outbox.Config{Sink: sink, Concurrency: 8, MaxUncommitted: maxUncommitted, CommitInterval: time.Hour}
		o := startInBubble(t, cfg)

		enqueueIDs(t, o, "", "hang")
		synctest.Wait()
		start := time.Now()
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = fmt.Sprintf("ev-%02d", i)
		}
		enqueueIDs(t, o, "", ids...)
		for len(sink.delivered()) < len(ids) {
			if time.Since(start) >= time.Hour {
				t.Fatalf("full batches waited for the CommitInterval: %d of %d delivered", len(sink.delivered()), len(ids))
			}
			time.Sleep(time.Second)
		}
		// Only a last, partial batch may still wait for company.
		if p := o.Stats().Pending; p > 1+maxUncommitted-1 {
			t.Fatalf("%d pending after all 20 were delivered; at most hang and a partial batch of %d may wait", p, maxUncommitted-1)
		}
		close(sink.release)
		waitPending(t, o)
		if got := sink.delivered(); len(got) != 21 {
			t.Fatalf("%d deliveries, want 21 (each event once): %v", len(got), got)
		}
	})
}

// A commit waits for company only while other deliveries are under way: the
// last delivery's outcome, and with Ordered a keyed event's (whose successor
// waits for it), are committed at once even with a long CommitInterval.
func TestCommitIntervalDoesNotDelayIdleOrOrderedOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &gateSink{hold: map[string]bool{"hang": true}, release: make(chan struct{})}
		cfg := outbox.Config{Sink: sink, Ordered: true, CommitInterval: time.Hour}
		o := startInBubble(t, cfg)

		start := time.Now()
		enqueueIDs(t, o, "", "alone")
		waitPending(t, o)
		if waited := time.Since(start); waited >= time.Hour {
			t.Fatalf("the only delivery's outcome waited %s for company", waited)
		}

		// While "hang" keeps a delivery under way, a key's three events go
		// one after the other, each after its predecessor's commit.
		enqueueIDs(t, o, "", "hang")
		synctest.Wait()
		start = time.Now()
		enqueueIDs(t, o, "room-1", "k1", "k2", "k3")
		for len(sink.delivered()) < 4 {
			if time.Since(start) >= time.Hour {
				t.Fatalf("keyed events waited a CommitInterval each: delivered %v", sink.delivered())
			}
			time.Sleep(time.Second)
		}
		if got := sink.delivered(); fmt.Sprint(got) != "[alone k1 k2 k3]" {
			t.Fatalf("delivered %v, want [alone k1 k2 k3]", got)
		}
		close(sink.release)
		waitPending(t, o)
	})
}

// The enqueue-to-delivery time a hook (and the Prometheus histogram) sees
// ends when the attempt ended, not when its outcome was committed, which
// may be up to CommitInterval later.
func TestSinceEnqueueEndsWithTheAttemptNotItsCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &gateSink{hold: map[string]bool{"hang": true}, release: make(chan struct{})}
		var mu sync.Mutex
		since := map[string]time.Duration{}
		cfg := outbox.Config{Sink: sink, CommitInterval: time.Hour}
		cfg.Hooks.OnDelivery = func(d outbox.DeliveryInfo) {
			mu.Lock()
			since[d.ID] = d.SinceEnqueue
			mu.Unlock()
		}
		o := startInBubble(t, cfg)

		enqueueIDs(t, o, "", "hang")
		synctest.Wait()
		enqueueIDs(t, o, "", "quick")
		synctest.Wait()
		// "quick" was delivered at once; its outcome waits for company
		// while "hang" is under way. Ten minutes later "hang" returns and
		// both are committed together.
		time.Sleep(10 * time.Minute)
		close(sink.release)
		waitPending(t, o)
		mu.Lock()
		defer mu.Unlock()
		if got := since["quick"]; got >= time.Minute {
			t.Errorf("quick: SinceEnqueue %s includes the wait for its commit", got)
		}
		if got := since["hang"]; got < 10*time.Minute {
			t.Errorf("hang: SinceEnqueue %s, want at least the 10 minutes its attempt took", got)
		}
	})
}
