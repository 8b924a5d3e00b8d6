package union_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/union"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// settle bounds the waits for background work: generous, because CI runs
// the whole repository under -race on two busy cores. Passing tests never
// wait for it.
const settle = 2 * time.Minute

// sink answers every delivery with the Result its answer func picks, by
// default a 503 retried in an hour: the events stay pending.
type sink struct {
	answer atomic.Pointer[func(d *outbox.Delivery) outbox.Result]
}

func newSink() *sink {
	s := &sink{}
	s.set(func(*outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
	})
	return s
}

func (s *sink) set(fn func(d *outbox.Delivery) outbox.Result) { s.answer.Store(&fn) }

func (s *sink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	return (*s.answer.Load())(d)
}

// openStore opens an outbox on a new file in a temp dir, delivering through
// s, and starts it unless s is nil (then it delivers nothing); it is stopped
// at the end of the test.
func openStore(t *testing.T, s *sink) *outbox.Outbox {
	t.Helper()
	cfg := outbox.Config{Sink: s, Interval: 20 * time.Millisecond, NoSync: true}
	if s == nil {
		cfg.Sink = newSink()
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o) })
	if s != nil {
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

func stop(t *testing.T, o *outbox.Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	if err := o.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// stores is the changing set of the non-primary outboxes of a View, as a
// Kafka group's partitions come and go.
type stores struct {
	mu   sync.Mutex
	list []*outbox.Outbox
}

func (s *stores) get() []*outbox.Outbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

func (s *stores) set(list ...*outbox.Outbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = list
}

// newView opens n started outboxes whose sink keeps every event pending and
// returns a View over them (the first is the primary) and the outboxes.
func newView(t *testing.T, n int) (*union.View, []*outbox.Outbox, *stores) {
	t.Helper()
	all := make([]*outbox.Outbox, n)
	for i := range all {
		all[i] = openStore(t, newSink())
	}
	others := &stores{list: all[1:]}
	return union.New(all[0], others.get), all, others
}

// put stores events with these IDs in o, pending (or dead when dead is set),
// with key "k-<id>" and destination "orders".
func put(t *testing.T, o *outbox.Outbox, dead bool, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		ev := outbox.Event{ID: id, Key: "k-" + id, Destination: "orders", Payload: []byte(`{}`)}
		var err error
		if dead {
			_, err = o.EnqueueDead(ctx, ev, "test")
		} else {
			_, err = o.Enqueue(ctx, ev)
		}
		if err != nil {
			t.Fatalf("store %s: %v", id, err)
		}
	}
}

// listAll pages through v.List with limit and returns the IDs in the order
// they came, checking every page's size and order.
func listAll(t *testing.T, v *union.View, opt outbox.ListOptions) []string {
	t.Helper()
	return listPages(t, v, opt, func(ev outbox.Event) string { return ev.ID })
}

// listPages pages through v.List with opt's limit and returns what name
// gives for every event listed, in the order they came, checking every
// page's size and that the cursor moves forward.
func listPages(t *testing.T, v *union.View, opt outbox.ListOptions, name func(outbox.Event) string) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("List with limit %d does not end: %d listed so far", opt.Limit, len(got))
		}
		evs, next, err := v.List(context.Background(), opt)
		if err != nil {
			t.Fatalf("List after %q: %v", opt.After, err)
		}
		if len(evs) > opt.Limit {
			t.Fatalf("List with limit %d returned %d events", opt.Limit, len(evs))
		}
		for _, ev := range evs {
			got = append(got, name(ev))
		}
		if next == "" {
			return got
		}
		if next <= opt.After {
			t.Fatalf("List after %q: next cursor %q does not move forward", opt.After, next)
		}
		opt.After = next
	}
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

// callAPI sends method path with body (JSON when not empty) to the HTTP
// API served by srv and returns the answer's status and its JSON object
// (nil for 204 No Content).
func callAPI(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s %s: %d, body not JSON: %v", method, path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, m
}
