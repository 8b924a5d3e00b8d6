package outbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// timedSink answers every delivery with answer and records when each event
// was attempted (the bubble's time, under synctest).
type timedSink struct {
	answer outbox.Result
	mu     sync.Mutex
	at     map[string][]time.Time
}

func newTimedSink(answer outbox.Action) *timedSink {
	return &timedSink{answer: outbox.Result{Action: answer, Status: 200}, at: map[string][]time.Time{}}
}

func (s *timedSink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	s.at[d.ID] = append(s.at[d.ID], time.Now())
	s.mu.Unlock()
	return s.answer
}

func (s *timedSink) attempts(id string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[id]...)
}

// An event with a DeliverAt ahead is stored pending, due at that time, and
// is not attempted before it, while an event without one goes at once.
func TestScheduledEventIsNotAttemptedBeforeDeliverAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newTimedSink(outbox.ActionSuccess)
		o := startInBubble(t, outbox.Config{Sink: sink})
		at := time.Now().Add(90 * time.Minute)
		ids, err := o.Enqueue(t.Context(),
			outbox.Event{ID: "later", Destination: "orders", DeliverAt: at},
			outbox.Event{ID: "now", Destination: "orders"})
		if err != nil || len(ids) != 2 {
			t.Fatalf("Enqueue = %v, %v", ids, err)
		}
		ev, err := o.Get(t.Context(), "later")
		if err != nil || ev.State != outbox.StatePending || !ev.DeliverAt.Equal(at) || !ev.NextAttemptAt.Equal(at) ||
			ev.DeliverAt.Location() != time.UTC {
			t.Fatalf("Get = %+v, %v; want pending, DeliverAt and NextAttemptAt %v in UTC", ev, err, at)
		}
		synctest.Wait()
		if len(sink.attempts("now")) != 1 || len(sink.attempts("later")) != 0 {
			t.Fatalf("attempts right after enqueue: now %v, later %v", sink.attempts("now"), sink.attempts("later"))
		}
		waitPending(t, o)
		got := sink.attempts("later")
		if len(got) != 1 || got[0].Before(at) {
			t.Fatalf("later attempted at %v, want once, not before %v", got, at)
		}
	})
}

// A DeliverAt that has passed is due at once; one beyond the horizon
// (MaxSchedule) is refused naming the field, and nothing of the call is
// stored; a negative horizon is a configuration error.
func TestDeliverAtHorizon(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(newWebSink())
	cfg.Clock = clock
	cfg.MaxSchedule = time.Hour
	o, _ := open(t, cfg)
	now := clock.Now()

	if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "past", Destination: "https://x.example/a", DeliverAt: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if ev, err := o.Get(t.Context(), "past"); err != nil || !ev.NextAttemptAt.Equal(now) {
		t.Fatalf("past DeliverAt: %+v, %v; want due now", ev, err)
	}
	if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "edge", Destination: "https://x.example/a", DeliverAt: now.Add(time.Hour)}); err != nil {
		t.Fatalf("DeliverAt exactly at the horizon: %v", err)
	}

	_, err := o.Enqueue(t.Context(),
		outbox.Event{ID: "ok", Destination: "https://x.example/a"},
		outbox.Event{ID: "far", Destination: "https://x.example/a", DeliverAt: now.Add(time.Hour + time.Second)})
	var ve *outbox.ValidationError
	if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != "deliver_at" || !errors.Is(err, outbox.ErrInvalid) ||
		!strings.Contains(ve.Reason, "1h0m0s") {
		t.Fatalf("beyond the horizon: %v, want a ValidationError for events[1].deliver_at", err)
	}
	for _, id := range []string{"ok", "far"} {
		if _, err := o.Get(t.Context(), id); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("%s of a refused call: %v, want ErrNotFound", id, err)
		}
	}
	_, err = o.EnqueueDead(t.Context(), outbox.Event{ID: "far-dead", Destination: "d", DeliverAt: now.Add(2 * time.Hour)}, "x")
	if !errors.As(err, &ve) || ve.Field != "deliver_at" {
		t.Fatalf("EnqueueDead beyond the horizon: %v", err)
	}

	bad := outbox.Config{Sink: newWebSink(), MaxSchedule: -time.Second}
	var ce *outbox.ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) || ce.Field != "MaxSchedule" {
		t.Fatalf("negative MaxSchedule: %v", err)
	}
}

// Max age counts from DeliverAt: an event scheduled two hours ahead with a
// MaxAge of one hour is parked for an hour after DeliverAt, not dead at its
// first outcome.
func TestMaxAgeCountsFromDeliverAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newTimedSink(outbox.ActionPark)
		sink.answer.Status = 404
		o := startInBubble(t, outbox.Config{Sink: sink, MaxAge: time.Hour, ParkInterval: 10 * time.Minute})
		at := time.Now().Add(2 * time.Hour)
		if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "s", Destination: "orders", DeliverAt: at}); err != nil {
			t.Fatal(err)
		}
		waitPending(t, o)
		ev, err := o.Get(t.Context(), "s")
		if err != nil || ev.State != outbox.StateDead || !strings.Contains(ev.DeadReason, "max age") {
			t.Fatalf("Get = %+v, %v; want dead of max age", ev, err)
		}
		if got := ev.DeadAt.Sub(at); got < time.Hour {
			t.Fatalf("dead %s after DeliverAt, want at least MaxAge (1h) after it", got)
		}
		if n := len(sink.attempts("s")); n < 6 {
			t.Fatalf("%d attempts, want the parks of a whole hour (7)", n)
		}
	})
}

// The schedule is durable: after a restart the event is still pending with
// its DeliverAt, and still not attempted before it.
func TestScheduleSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "outbox.db")
		at := time.Now().Add(time.Hour)
		first, err := outbox.Open(path, outbox.Config{Sink: newTimedSink(outbox.ActionSuccess)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Enqueue(t.Context(), outbox.Event{ID: "s", Destination: "orders", DeliverAt: at}); err != nil {
			t.Fatal(err)
		}
		stop(t, first)

		sink := newTimedSink(outbox.ActionSuccess)
		o, err := outbox.Open(path, outbox.Config{Sink: sink})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, o) })
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
		ev, err := o.Get(t.Context(), "s")
		if err != nil || ev.State != outbox.StatePending || !ev.DeliverAt.Equal(at) || !ev.NextAttemptAt.Equal(at) {
			t.Fatalf("after restart Get = %+v, %v", ev, err)
		}
		waitPending(t, o)
		if got := sink.attempts("s"); len(got) != 1 || got[0].Before(at) {
			t.Fatalf("attempted at %v, want once, not before %v", got, at)
		}
	})
}

// Re-enqueueing a pending ID with another DeliverAt is a duplicate that
// keeps the first schedule; Upsert in place with another DeliverAt
// reschedules the event; enabling its endpoint does not bring a scheduled
// event forward; replaying a dead one makes it due now.
func TestScheduleChanges(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	disable := sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionDisable, Status: 410}
	})
	cfg := testConfig(disable)
	cfg.Clock = clock
	o, _ := open(t, cfg)
	now := clock.Now()
	ctx := t.Context()

	at := now.Add(time.Hour)
	ev := outbox.Event{ID: "s", Key: "k", Destination: "orders", Payload: []byte("1"), DeliverAt: at}
	if _, err := o.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	other := ev
	other.DeliverAt = now.Add(2 * time.Hour)
	if _, err := o.Enqueue(ctx, other); err != nil {
		t.Fatalf("same ID and content, another DeliverAt: %v", err)
	}
	if got, _ := o.Get(ctx, "s"); !got.DeliverAt.Equal(at) || o.Stats().DuplicatesTotal != 1 {
		t.Fatalf("after a re-enqueue: DeliverAt %v, duplicates %d; want %v kept, 1", got.DeliverAt, o.Stats().DuplicatesTotal, at)
	}

	// Upsert keeping the schedule (a copy of current) changes nothing of it;
	// another DeliverAt moves it.
	up, err := o.Upsert(ctx, "k", func(cur *outbox.Event) (outbox.Event, error) {
		e := *cur
		e.Payload = []byte("2")
		return e, nil
	})
	if err != nil || !up.DeliverAt.Equal(at) || !up.NextAttemptAt.Equal(at) {
		t.Fatalf("Upsert keeping DeliverAt = %+v, %v", up, err)
	}
	sooner := now.Add(time.Minute)
	up, err = o.Upsert(ctx, "k", func(cur *outbox.Event) (outbox.Event, error) {
		e := *cur
		e.DeliverAt = sooner
		return e, nil
	})
	if err != nil || !up.DeliverAt.Equal(sooner) || !up.NextAttemptAt.Equal(sooner) {
		t.Fatalf("Upsert with another DeliverAt = %+v, %v; want due at %v", up, err, sooner)
	}

	// An endpoint disabled by a 410, then enabled: its scheduled event
	// stays scheduled.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "gone", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the endpoint disabled by a 410", func() bool {
		eps, _ := o.Endpoints(ctx)
		return len(eps) == 1 && eps[0].Disabled
	})
	if err := o.EnableEndpoint(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if got, _ := o.Get(ctx, "s"); !got.NextAttemptAt.Equal(sooner) {
		t.Fatalf("after EnableEndpoint the scheduled event is due at %v, want %v", got.NextAttemptAt, sooner)
	}
	if got, _ := o.Get(ctx, "gone"); got.NextAttemptAt.After(clock.Now()) {
		t.Fatalf("after EnableEndpoint the unscheduled event is due at %v, want now", got.NextAttemptAt)
	}
}

// Replaying a dead event whose DeliverAt has passed makes it due now.
func TestReplayOfScheduledEventIsDueNow(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(newWebSink())
	cfg.Clock = clock
	o, _ := open(t, cfg)
	at := clock.Now().Add(time.Minute)
	if _, err := o.EnqueueDead(t.Context(), outbox.Event{ID: "d", Destination: "orders", DeliverAt: at}, "test"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := o.Replay(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	ev, err := o.Get(t.Context(), "d")
	if err != nil || ev.State != outbox.StatePending || !ev.NextAttemptAt.Equal(clock.Now()) || !ev.DeliverAt.Equal(at) {
		t.Fatalf("after Replay: %+v, %v; want pending, due now, DeliverAt kept", ev, err)
	}
}

// An event waiting for its DeliverAt is not lag: OldestPendingAge counts
// from DeliverAt, as MaxAge does.
func TestOldestPendingAgeCountsFromDeliverAt(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig(newWebSink())
	cfg.Clock = clock
	o, _ := open(t, cfg)
	if _, err := o.Enqueue(t.Context(), outbox.Event{ID: "s", Destination: "https://x.example/a", DeliverAt: clock.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if age := o.Stats().OldestPendingAge; age != 0 {
		t.Fatalf("an hour before its DeliverAt: OldestPendingAge %v, want 0", age)
	}
	clock.Advance(90 * time.Minute)
	if age := o.Stats().OldestPendingAge; age != 30*time.Minute {
		t.Fatalf("30m after its DeliverAt: OldestPendingAge %v, want 30m", age)
	}
}
