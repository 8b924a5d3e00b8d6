package outbox_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// TestEndToEndMix sends 10,000 events (2,500 with -short or under the race
// detector) through a
// receiver that answers 404 to each event's first two attempts, 500 once to
// every 7th event, 400 to every 50th, and 410 on one of two endpoints.
// Every event ends delivered exactly once, dead with a reason, or pending on
// the disabled endpoint; the 404s spend no attempts.
func TestEndToEndMix(t *testing.T) {
	n := 10_000
	if testing.Short() || raceEnabled {
		n = 2_500
	}
	num := func(id string) int { v, _ := strconv.Atoi(strings.TrimPrefix(id, "m")); return v }
	var mu sync.Mutex
	afterSuccess := map[string]int{}
	succeeded := map[string]bool{}
	rc := newReceiver(t, func(r *http.Request, id string, seen int) (int, http.Header) {
		mu.Lock()
		defer mu.Unlock()
		if succeeded[id] {
			afterSuccess[id]++
		}
		i := num(id)
		switch {
		case strings.HasPrefix(r.URL.Path, "/gone"):
			return http.StatusGone, nil
		case seen < 2:
			return http.StatusNotFound, nil
		case i%50 == 0:
			return http.StatusBadRequest, nil
		case i%7 == 0 && seen == 2:
			return http.StatusInternalServerError, nil
		}
		succeeded[id] = true
		return http.StatusOK, nil
	})
	sink := newWebSink()
	defer sink.close()
	cfg := testConfig(sink)
	cfg.ParkInterval = time.Millisecond
	cfg.BackoffInitial = time.Millisecond
	cfg.BackoffMax = 2 * time.Millisecond
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Enqueue from 8 callers in batches of 50, while delivery runs.
	const goneEvery = 100
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			var batch []outbox.Event
			for i := w; i < n; i += 8 {
				path := "/hook"
				if i%goneEvery == 1 {
					path = "/gone"
				}
				batch = append(batch, outbox.Event{ID: fmt.Sprintf("m%d", i), Destination: rc.URL + path, Payload: []byte(strconv.Itoa(i))})
				if len(batch) == 50 {
					if _, err := o.Enqueue(ctx, batch...); err != nil {
						t.Error(err)
						return
					}
					batch = batch[:0]
				}
			}
			if len(batch) > 0 {
				if _, err := o.Enqueue(ctx, batch...); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	goneCount := 0
	for i := range n {
		if i%goneEvery == 1 {
			goneCount++
		}
	}
	testkit.WaitFor(t, 2*time.Minute, "every event settled", func() bool {
		s := o.Stats()
		return s.Pending == goneCount && s.InFlight == 0
	})

	delivered, dead, parked := 0, 0, 0
	for i := range n {
		id := fmt.Sprintf("m%d", i)
		ev, err := o.Get(ctx, id)
		if err != nil {
			t.Fatalf("event %s lost: %v", id, err)
		}
		wins := rc.successes(id)
		switch {
		case i%goneEvery == 1:
			if ev.State != outbox.StatePending || ev.Attempts != 0 || wins != 0 {
				t.Fatalf("event %s of the disabled endpoint: %+v, %d successes", id, ev, wins)
			}
			parked++
		case i%50 == 0:
			if ev.State != outbox.StateDead || ev.LastStatus != 400 || !strings.Contains(ev.DeadReason, "400") || wins != 0 {
				t.Fatalf("event %s: %+v, want dead with the 400", id, ev)
			}
			if ev.Attempts != 1 {
				t.Fatalf("event %s: %d attempts spent by two 404s and a 400, want 1 (parks spend none, the 400 one)", id, ev.Attempts)
			}
			dead++
		default:
			if ev.State != outbox.StateDelivered || wins != 1 {
				t.Fatalf("event %s: state %s, %d successes; want delivered exactly once", id, ev.State, wins)
			}
			delivered++
		}
	}
	mu.Lock()
	if len(afterSuccess) > 0 {
		t.Fatalf("%d events were sent again after a successful delivery", len(afterSuccess))
	}
	mu.Unlock()

	// The 404s spent no attempt; the 500 spent one. Read the changelog:
	// every reschedule of an event records the attempts spent so far.
	st := o.StoreForTest()
	for _, i := range []int{3, 7, 14, 99} {
		id := fmt.Sprintf("m%d", i)
		hist, err := st.History(id)
		if err != nil {
			t.Fatal(err)
		}
		var attempts []int
		for _, e := range hist {
			if e.Op == store.OpReschedule {
				attempts = append(attempts, e.Record.Attempts)
			}
		}
		want := "[0 0]"
		if i%7 == 0 {
			want = "[0 0 1]"
		}
		if fmt.Sprint(attempts) != want {
			t.Errorf("event %s: attempts after each reschedule %v, want %s", id, attempts, want)
		}
	}
	s := o.Stats()
	if s.EndpointsDisabled != 1 || s.Dead != dead || int(s.DeliveredTotal) != delivered {
		t.Fatalf("stats %+v; counted %d delivered, %d dead", s, delivered, dead)
	}
	t.Logf("%d delivered, %d dead, %d pending on the disabled endpoint", delivered, dead, parked)
}
