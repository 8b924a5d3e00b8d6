package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// sharedStores is a group of outboxes, each on its own file, delivering
// through one httpsink to the endpoint "rcv" and sharing one
// SharedEndpoints, as an instance's partition stores do.
type sharedStores struct {
	stores    []*outbox.Outbox
	log       *testkit.Buffer // every store's log, in JSON
	mu        sync.Mutex
	published []outbox.EndpointTransition
	opens     atomic.Int64 // Hooks.OnBreaker calls for an opening, over all stores
	shared    *outbox.SharedEndpoints
}

// openSharedStores opens and starts n outboxes sharing one endpoint state
// (its Probes set to probes), delivering to the receiver rc as endpoint
// "rcv"; edit may change their configuration.
func openSharedStores(t *testing.T, n int, rc *testkit.Receiver, probes func(string) bool, edit func(*outbox.Config)) *sharedStores {
	t.Helper()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(t.TempDir(), fmt.Sprintf("store-%d.db", i))
	}
	return openSharedStoresAt(t, paths, rc, probes, edit)
}

// openSharedStoresAt is openSharedStores on the files at paths.
func openSharedStoresAt(t *testing.T, paths []string, rc *testkit.Receiver, probes func(string) bool, edit func(*outbox.Config)) *sharedStores {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "rcv", URL: rc.URL + "/hook", AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	ss := &sharedStores{log: &testkit.Buffer{}}
	logger := slog.New(slog.NewJSONHandler(ss.log, nil))
	ss.shared = outbox.NewSharedEndpoints(outbox.SharedEndpointsConfig{
		Publish: func(tr outbox.EndpointTransition) {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ss.published = append(ss.published, tr)
		},
		Probes: probes,
		Logger: logger,
	})
	for _, path := range paths {
		cfg := testConfig(sink)
		cfg.Logger = logger
		cfg.MaxAttempts = 100_000
		cfg.SharedEndpoints = ss.shared
		cfg.Hooks = outbox.Hooks{OnBreaker: func(c outbox.BreakerChange) {
			if c.State == outbox.BreakerOpen {
				ss.opens.Add(1)
			}
		}}
		if edit != nil {
			edit(&cfg)
		}
		o, err := outbox.Open(path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, o) })
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
		ss.stores = append(ss.stores, o)
	}
	return ss
}

// enqueue enqueues n events for "rcv" into store i, with IDs made of
// prefix.
func (ss *sharedStores) enqueue(t *testing.T, i int, prefix string, n int) []string {
	t.Helper()
	evs := make([]outbox.Event, n)
	for j := range evs {
		evs[j] = outbox.Event{ID: fmt.Sprintf("%s-%d-%03d", prefix, i, j), Destination: "rcv", Payload: []byte("{}")}
	}
	ids, err := ss.stores[i].Enqueue(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// kinds returns the kinds of the transitions published so far.
func (ss *sharedStores) kinds() []outbox.TransitionKind {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var out []outbox.TransitionKind
	for _, tr := range ss.published {
		out = append(out, tr.Kind)
	}
	return out
}

// count counts the published transitions of kind.
func (ss *sharedStores) count(kind outbox.TransitionKind) int {
	n := 0
	for _, k := range ss.kinds() {
		if k == kind {
			n++
		}
	}
	return n
}

// breakerLines returns the messages of the log's breaker lines, in order.
func (ss *sharedStores) breakerLines() []string {
	var out []string
	for line := range strings.Lines(ss.log.String()) {
		if i := strings.Index(line, `"msg":"outbox: circuit breaker`); i >= 0 {
			msg := line[i+len(`"msg":"`):]
			out = append(out, msg[:strings.IndexByte(msg, '"')])
		}
	}
	return out
}

// Four stores sharing an endpoint state and a receiver that answers 503 to
// everything: one breaker opens (one log line, one hook call and one
// published transition per opening, whatever the number of stores), each
// cool-down sends one probe for all of them, and once it has been open a
// while the receiver sees one attempt per probe.
func TestSharedBreakerOpensOnceAndProbesOnce(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(*http.Request, string, int) testkit.Reply {
		return testkit.Reply{Status: http.StatusServiceUnavailable}
	})
	var atThird, atEighth atomic.Int64
	var ss *sharedStores
	ss = openSharedStores(t, 4, rc, nil, func(c *outbox.Config) {
		c.Breaker = outbox.Breaker{Threshold: 3, CoolDown: 50 * time.Millisecond, MaxCoolDown: 50 * time.Millisecond}
		c.Hooks.OnBreaker = func(b outbox.BreakerChange) {
			if b.State != outbox.BreakerOpen {
				return
			}
			switch ss.opens.Add(1) {
			case 3:
				atThird.Store(int64(len(rc.Requests())))
			case 8:
				atEighth.Store(int64(len(rc.Requests())))
			}
		}
	})
	for i := range ss.stores {
		ss.enqueue(t, i, "dead", 50)
	}
	testkit.WaitFor(t, settle, "eight openings", func() bool { return ss.opens.Load() >= 8 })

	lines := ss.breakerLines()
	opened := 0
	for i, msg := range lines {
		want := "outbox: circuit breaker opened"
		if i%2 == 1 {
			want = "outbox: circuit breaker half-open, sending a probe"
		}
		if msg != want {
			t.Fatalf("breaker log line %d is %q; want %q (one breaker: opened, a probe, opened again, ...):\n%s",
				i, msg, want, strings.Join(lines, "\n"))
		}
		if msg == "outbox: circuit breaker opened" {
			opened++
		}
	}
	if hooks, published := ss.opens.Load(), ss.count(outbox.TransitionOpened); int64(opened) > hooks || int64(published) > hooks || opened < 8 {
		t.Errorf("%d opening log lines, %d published openings, %d OnBreaker calls; want one of each per opening", opened, published, hooks)
	}
	// Between the third and the eighth opening, five probes went out, and
	// nothing else.
	if got := atEighth.Load() - atThird.Load(); got > 5 {
		t.Errorf("the receiver saw %d attempts during five cool-downs; want one probe per cool-down", got)
	}
	for _, o := range ss.stores {
		if ep := endpointState(t, o, "rcv"); ep.Breaker == outbox.BreakerClosed {
			t.Errorf("%s: breaker closed; want every store to show the shared breaker open", o.Path())
		}
	}
}

// A 410 answered to one store disables the endpoint in every store sharing
// its state; EnableEndpoint through another store lifts it for all, and
// the events of every store are delivered.
func TestShared410DisablesEveryStoreAndEnableLiftsAll(t *testing.T) {
	var gone atomic.Bool
	gone.Store(true)
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(*http.Request, string, int) testkit.Reply {
		if gone.Load() {
			return testkit.Reply{Status: http.StatusGone}
		}
		return testkit.Reply{}
	})
	ss := openSharedStores(t, 3, rc, nil, nil)
	first := ss.enqueue(t, 0, "first", 1)
	testkit.WaitFor(t, settle, "the 410 to disable the endpoint", func() bool {
		return endpointState(t, ss.stores[0], "rcv").Disabled
	})
	ids := append(first, ss.enqueue(t, 1, "later", 5)...)
	ids = append(ids, ss.enqueue(t, 2, "later", 5)...)
	waitPunctuations(t, ss.stores[1], 3)
	waitPunctuations(t, ss.stores[2], 3)
	if got := len(rc.Requests()); got != 1 {
		t.Fatalf("the receiver saw %d requests; want only the one answered 410", got)
	}
	for _, o := range ss.stores {
		if ep := endpointState(t, o, "rcv"); !ep.Disabled || !strings.Contains(ep.DisabledReason, "410") {
			t.Errorf("%s: endpoint = %+v; want it disabled by the 410", o.Path(), ep)
		}
	}

	gone.Store(false)
	if err := ss.stores[2].EnableEndpoint(context.Background(), "rcv"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "every store's events delivered", func() bool { return len(rc.Missing(ids)) == 0 })
	for _, o := range ss.stores {
		if ep := endpointState(t, o, "rcv"); ep.Disabled {
			t.Errorf("%s: endpoint = %+v; want it enabled", o.Path(), ep)
		}
	}
	if got := ss.kinds(); len(got) != 2 || got[0] != outbox.TransitionDisabled || got[1] != outbox.TransitionEnabled {
		t.Errorf("published %v; want the disable and the enable, once each", got)
	}
}

// A 429 with Retry-After answered to one store holds the endpoint in every
// store sharing its state until then; RetryEndpoint through another store
// lifts it for all.
func TestShared429ThrottlesEveryStoreAndRetryLiftsAll(t *testing.T) {
	var slow atomic.Bool
	slow.Store(true)
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(*http.Request, string, int) testkit.Reply {
		if slow.Load() {
			return testkit.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}}
		}
		return testkit.Reply{}
	})
	ss := openSharedStores(t, 3, rc, nil, nil)
	ids := ss.enqueue(t, 0, "first", 1)
	testkit.WaitFor(t, settle, "the 429 to throttle the endpoint", func() bool {
		return endpointState(t, ss.stores[0], "rcv").ThrottledUntil.After(time.Now().Add(30 * time.Minute))
	})
	until := endpointState(t, ss.stores[0], "rcv").ThrottledUntil
	ids = append(ids, ss.enqueue(t, 1, "later", 5)...)
	ids = append(ids, ss.enqueue(t, 2, "later", 5)...)
	waitPunctuations(t, ss.stores[1], 3)
	waitPunctuations(t, ss.stores[2], 3)
	if got := len(rc.Requests()); got != 1 {
		t.Fatalf("the receiver saw %d requests; want only the one answered 429", got)
	}
	for _, o := range ss.stores {
		if ep := endpointState(t, o, "rcv"); !ep.ThrottledUntil.Equal(until) {
			t.Errorf("%s: throttled until %v; want %v, the Retry-After the first store got", o.Path(), ep.ThrottledUntil, until)
		}
	}

	slow.Store(false)
	if _, err := ss.stores[1].RetryEndpoint(context.Background(), "rcv", 1000); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "every store's events delivered", func() bool { return len(rc.Missing(ids)) == 0 })
	if got := ss.kinds(); len(got) != 2 || got[0] != outbox.TransitionThrottled || got[1] != outbox.TransitionRetried {
		t.Errorf("published %v; want the throttle and the retry, once each", got)
	}
}

// A transition applied from elsewhere holds the endpoint in every store
// without publishing it again; a later closing resumes deliveries.
func TestSharedApplyHoldsWithoutPublishing(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	ss := openSharedStores(t, 2, rc, nil, nil)
	now := time.Now().UTC()
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionOpened,
		Until: now.Add(time.Hour), At: now}); err != nil {
		t.Fatal(err)
	}
	ids := ss.enqueue(t, 0, "held", 3)
	ids = append(ids, ss.enqueue(t, 1, "held", 3)...)
	waitPunctuations(t, ss.stores[0], 3)
	waitPunctuations(t, ss.stores[1], 3)
	if got := len(rc.Requests()); got != 0 {
		t.Fatalf("the receiver saw %d requests while the group's breaker was open", got)
	}
	for _, o := range ss.stores {
		if ep := endpointState(t, o, "rcv"); ep.Breaker != outbox.BreakerOpen {
			t.Errorf("%s: breaker %v; want open, as the group said", o.Path(), ep.Breaker)
		}
	}
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionClosed, At: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the held events delivered once the group closed the breaker", func() bool {
		return len(rc.Missing(ids)) == 0
	})
	if got := ss.kinds(); len(got) != 0 {
		t.Errorf("published %v; want nothing for transitions applied from the group", got)
	}
	if got := strings.Count(ss.log.String(), "by the group"); got != 2 {
		t.Errorf("%d log lines for the group's transitions; want one each", got)
	}
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: "reopened", At: now}); err == nil {
		t.Error("Apply of an unknown kind: nil error")
	}
}

// An instance that does not send an endpoint's probes (another member
// does) holds a half-open breaker until the probe's outcome arrives from
// the group: a closing resumes its deliveries without any probe from here.
func TestSharedProbeLeftToTheGroup(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	ss := openSharedStores(t, 2, rc, func(string) bool { return false }, nil)
	now := time.Now().UTC()
	// Opened by the group an hour ago for a cool-down that has just ended:
	// half-open, and the probe is another member's for another hour.
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionOpened,
		Until: now.Add(-time.Millisecond), At: now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids := ss.enqueue(t, 0, "wait", 2)
	ids = append(ids, ss.enqueue(t, 1, "wait", 2)...)
	waitPunctuations(t, ss.stores[0], 3)
	waitPunctuations(t, ss.stores[1], 3)
	if got := len(rc.Requests()); got != 0 {
		t.Fatalf("the receiver saw %d requests; want no probe from an instance that leaves it to the group", got)
	}
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionClosed, At: now}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the events delivered once the group's probe closed it", func() bool {
		return len(rc.Missing(ids)) == 0
	})
}

// The shared state is durable through the stores' files: after a restart
// of every store with a new shared state, an endpoint disabled through one
// store before is disabled in all, including a store that never delivered
// to it.
func TestSharedDisableSurvivesRestart(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(*http.Request, string, int) testkit.Reply {
		return testkit.Reply{Status: http.StatusGone}
	})
	ss := openSharedStores(t, 2, rc, nil, nil)
	ss.enqueue(t, 0, "first", 1)
	testkit.WaitFor(t, settle, "the 410 to disable the endpoint", func() bool {
		return endpointState(t, ss.stores[0], "rcv").Disabled
	})
	paths := []string{ss.stores[0].Path(), ss.stores[1].Path()}
	for _, o := range ss.stores {
		stop(t, o)
	}

	again := openSharedStoresAt(t, paths, rc, nil, nil)
	again.enqueue(t, 1, "after-restart", 3)
	waitPunctuations(t, again.stores[1], 3)
	if got := len(rc.Requests()); got != 1 {
		t.Fatalf("the receiver saw %d requests; want only the one answered 410 before the restart", got)
	}
	if ep := endpointState(t, again.stores[1], "rcv"); !ep.Disabled {
		t.Errorf("endpoint after the restart = %+v; want it disabled", ep)
	}
}

// probeSink records, in order, whether each delivery it was given was a
// breaker's probe, and answers every one with a success.
type probeSink struct {
	mu     sync.Mutex
	probes []bool
}

func (s *probeSink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probes = append(s.probes, d.Probe)
	return outbox.Result{Action: outbox.ActionSuccess, Status: http.StatusNoContent}
}

func (s *probeSink) seen() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.probes)
}

// The probe of a breaker that the group opened, before this instance's
// stores ever failed to deliver to the endpoint, reaches the sink marked
// as a probe (so that it makes one request, not the inline retries of an
// endpoint the sink has not seen failing); the deliveries that follow its
// success are not probes.
func TestSharedProbeIsMarkedForTheSink(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	sink := &probeSink{}
	ss := openSharedStores(t, 2, rc, nil, func(cfg *outbox.Config) { cfg.Sink = sink })
	now := time.Now().UTC()
	if err := ss.shared.Apply(outbox.EndpointTransition{Endpoint: "rcv", Kind: outbox.TransitionOpened,
		Until: now.Add(-time.Millisecond), At: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	ss.enqueue(t, 0, "probed", 3)
	ss.enqueue(t, 1, "probed", 3)
	testkit.WaitFor(t, settle, "every event delivered", func() bool {
		return ss.stores[0].Stats().Pending == 0 && ss.stores[1].Stats().Pending == 0
	})
	got := sink.seen()
	if len(got) != 6 || !got[0] || slices.Contains(got[1:], true) {
		t.Fatalf("probe flags of the deliveries, in order: %v; want the first alone marked, of six", got)
	}
}
