package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
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

// countingSink counts the attempts the outbox makes through a webSink, by
// endpoint, and the times they start.
type countingSink struct {
	*webSink
	mu     sync.Mutex
	starts map[string][]time.Time
}

func newCountingSink(t *testing.T) *countingSink {
	s := &countingSink{webSink: newWebSink(), starts: map[string][]time.Time{}}
	t.Cleanup(s.close)
	return s
}

func (s *countingSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	s.starts[d.Endpoint] = append(s.starts[d.Endpoint], time.Now())
	s.mu.Unlock()
	return s.webSink.Deliver(ctx, d)
}

func (s *countingSink) attempts(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.starts[endpoint])
}

func (s *countingSink) startTimes(endpoint string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.starts[endpoint])
}

// closedAddr returns a loopback address nothing listens on: connections to
// it are refused.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func endpointState(t *testing.T, o *outbox.Outbox, name string) outbox.EndpointState {
	t.Helper()
	eps, err := o.Endpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.Name == name {
			return ep
		}
	}
	return outbox.EndpointState{Name: name}
}

func enqueueN(t *testing.T, o *outbox.Outbox, n int, dest func(i int) string) []string {
	t.Helper()
	var ids []string
	for start := 0; start < n; start += 1000 {
		evs := make([]outbox.Event, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("ev-%05d", i), Destination: dest(i), Payload: []byte("{}")})
		}
		got, err := o.Enqueue(context.Background(), evs...)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// A receiver that refuses connections while 10,000 events wait for it is
// tried a few dozen times, not thousands: the breaker opens after its
// threshold, and then only its probes go out, each after a longer
// cool-down. No event spends an attempt it did not make. When the receiver
// comes back, a probe closes the breaker and everything is delivered.
func TestBreakerStopsKnockingOnADeadReceiver(t *testing.T) {
	addr := closedAddr(t)
	const n = 10_000
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	cfg.Concurrency = 16
	cfg.MaxAttempts = 1000
	cfg.BackoffInitial, cfg.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	cfg.Breaker = outbox.Breaker{Threshold: 5, CoolDown: 100 * time.Millisecond, MaxCoolDown: 800 * time.Millisecond}
	o, _ := open(t, cfg)
	enqueueN(t, o, n, func(int) string { return "http://" + addr + "/hook/x" })
	endpoint := addr + "/hook"
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}

	testkit.WaitFor(t, settle, "the breaker to open", func() bool {
		return endpointState(t, o, endpoint).BreakerOpens > 0
	})
	// Four seconds of a dead receiver: about eight cool-downs at these
	// settings (the two minutes of the defaults', 5 s to 5 min).
	testkit.WaitFor(t, settle, "six reopenings", func() bool {
		return endpointState(t, o, endpoint).BreakerOpens >= 6
	})
	attempts := sink.attempts(endpoint)
	t.Logf("%d attempts to a receiver refusing connections with %d events pending, the breaker opened %d times",
		attempts, n, endpointState(t, o, endpoint).BreakerOpens)
	if limit := cfg.Breaker.Threshold + cfg.Concurrency + 12; attempts > limit {
		t.Fatalf("%d attempts to a dead receiver with the breaker opened %d times; want at most %d",
			attempts, endpointState(t, o, endpoint).BreakerOpens, limit)
	}
	// Every attempt spent is one that was made: none is spent while open.
	spent := 0
	for ev := range allPending(t, o) {
		spent += ev.Attempts
	}
	if made := sink.attempts(endpoint); spent > made {
		t.Fatalf("events spent %d attempts, but only %d were made", spent, made)
	}
	ep := endpointState(t, o, endpoint)
	if ep.Breaker == outbox.BreakerClosed || ep.FailureStreak < cfg.Breaker.Threshold {
		t.Fatalf("endpoint = %+v; want its breaker open or half-open after a streak of failures", ep)
	}

	// The receiver comes back on the same address.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	rc := testkit.NewReceiverOn(t, l, "Idempotency-Key", nil)
	testkit.WaitFor(t, settle, "every event delivered", func() bool {
		return rc.Successes() >= n && o.Stats().Pending == 0
	})
	if ep := endpointState(t, o, endpoint); ep.Breaker != outbox.BreakerClosed || ep.FailureStreak != 0 {
		t.Fatalf("endpoint after recovery = %+v; want the breaker closed", ep)
	}
}

// allPending returns every pending event.
// waitPunctuations waits until o has run n more delivery punctuations.
func waitPunctuations(t *testing.T, o *outbox.Outbox, n int64) {
	t.Helper()
	var puncts atomic.Int64
	o.AddHooks(outbox.Hooks{OnPunctuation: func(time.Duration, int) { puncts.Add(1) }})
	o.WakeForTest()
	testkit.WaitFor(t, settle, "punctuations", func() bool {
		if puncts.Load() >= n {
			return true
		}
		o.WakeForTest()
		return false
	})
}

func allPending(t *testing.T, o *outbox.Outbox) func(func(outbox.Event) bool) {
	return func(yield func(outbox.Event) bool) {
		after := ""
		for {
			evs, next, err := o.List(context.Background(), outbox.ListOptions{State: outbox.StatePending, After: after, Limit: outbox.MaxListLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if !yield(ev) {
					return
				}
			}
			if next == "" {
				return
			}
			after = next
		}
	}
}

// A probe that fails opens the breaker again for a longer cool-down; one
// that gets any answer (here a 404) closes it. EnableEndpoint closes it by
// hand.
func TestBreakerProbeAndManualClose(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(r *http.Request, id string, n int) testkit.Reply {
		if down.Load() {
			return testkit.Reply{Status: http.StatusServiceUnavailable}
		}
		return testkit.Reply{Status: http.StatusNotFound}
	})
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	cfg.MaxAttempts = 1000
	cfg.Breaker = outbox.Breaker{Threshold: 3, CoolDown: 50 * time.Millisecond, MaxCoolDown: time.Second}
	o, _ := open(t, cfg)
	endpoint := rc.Listener.Addr().String() + "/hook"
	enqueueN(t, o, 50, func(int) string { return rc.URL + "/hook/x" })
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "a failed probe", func() bool { return endpointState(t, o, endpoint).BreakerOpens >= 2 })
	ep := endpointState(t, o, endpoint)
	if ep.BreakerOpenedAt.IsZero() || !ep.BreakerUntil.After(ep.BreakerOpenedAt) {
		t.Fatalf("open breaker = %+v; want when it opened and when it half-opens", ep)
	}

	down.Store(false)
	testkit.WaitFor(t, settle, "a probe answered 404 to close the breaker", func() bool {
		return endpointState(t, o, endpoint).Breaker == outbox.BreakerClosed
	})
	testkit.WaitFor(t, settle, "every event tried since", func() bool {
		for ev := range allPending(t, o) {
			if ev.LastStatus != http.StatusNotFound {
				return false
			}
		}
		return true
	})

	// Down again: the breaker opens, and EnableEndpoint closes it.
	down.Store(true)
	testkit.WaitFor(t, settle, "the breaker to open again", func() bool {
		return endpointState(t, o, endpoint).Breaker != outbox.BreakerClosed
	})
	// Let the attempts sent before it opened end: their failures would
	// count against a breaker closed by hand.
	testkit.WaitFor(t, settle, "the attempts under way to end", func() bool { return o.Stats().InFlight == 0 })
	down.Store(false)
	if err := o.EnableEndpoint(context.Background(), endpoint); err != nil {
		t.Fatal(err)
	}
	if ep := endpointState(t, o, endpoint); ep.Breaker != outbox.BreakerClosed || ep.BreakerOpens != 0 {
		t.Fatalf("after EnableEndpoint: %+v; want the breaker closed", ep)
	}
}

// The breaker's state is durable: an outbox reopened on the file while the
// breaker is open keeps it open until its cool-down ends, and sends
// nothing meanwhile.
func TestBreakerSurvivesReopen(t *testing.T) {
	addr := closedAddr(t)
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	cfg.MaxAttempts = 1000
	cfg.Breaker = outbox.Breaker{Threshold: 2, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	o, path := open(t, cfg)
	endpoint := addr + "/hook"
	enqueueN(t, o, 20, func(int) string { return "http://" + addr + "/hook/x" })
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the breaker to open", func() bool { return endpointState(t, o, endpoint).Breaker == outbox.BreakerOpen })
	before := endpointState(t, o, endpoint)
	stop(t, o)

	sink2 := newCountingSink(t)
	cfg.Sink = sink2
	o2, err := outbox.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o2) })
	after := endpointState(t, o2, endpoint)
	if after.Breaker != outbox.BreakerOpen || !after.BreakerUntil.Equal(before.BreakerUntil) || after.BreakerOpens != before.BreakerOpens {
		t.Fatalf("after reopening: %+v; want the open breaker of before: %+v", after, before)
	}
	if err := o2.Start(); err != nil {
		t.Fatal(err)
	}
	// Punctuations run and pass over the held endpoint's events, which
	// stay as they were; none is attempted.
	waitPunctuations(t, o2, 3)
	if got := sink2.attempts(endpoint); got != 0 {
		t.Fatalf("%d attempts while the breaker was open; want none", got)
	}
}

// An endpoint limited to 200 deliveries a second with a burst of 20 gets
// at most 220 in any one second, and its backlog goes out at that pace
// while an unlimited endpoint's backlog is not held behind it. No delivery
// the limit refused spent an attempt (each event was tried once).
func TestRateLimitPacesOneEndpointOnly(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	limits, err := outbox.NewRateLimits(map[string]outbox.RateLimit{
		rc.Listener.Addr().String() + "/slow": {PerSecond: 200, Burst: 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RateLimits = limits
	o, _ := open(t, cfg)
	const slowN, fastN = 2000, 1000
	enqueueN(t, o, slowN+fastN, func(i int) string {
		if i < slowN {
			return rc.URL + "/slow/x" // the slow backlog comes first in the due index
		}
		return rc.URL + "/fast/x"
	})
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	slowDone := func() int {
		n := 0
		for _, r := range rc.Requests() {
			if r.Path == "/slow/x" {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, settle, "the unlimited endpoint's backlog", func() bool {
		n := 0
		for _, r := range rc.Requests() {
			if r.Path == "/fast/x" {
				n++
			}
		}
		return n >= fastN
	})
	if got := slowDone(); got > slowN/2 {
		t.Errorf("the unlimited endpoint finished after %d of the limited endpoint's %d events; want it not held behind them", got, slowN)
	}
	testkit.WaitFor(t, settle, "the limited endpoint's backlog", func() bool { return slowDone() >= slowN })

	times := sink.startTimes(rc.Listener.Addr().String() + "/slow")
	if len(times) != slowN {
		t.Fatalf("%d attempts for %d events of the limited endpoint; want one each", len(times), slowN)
	}
	worst := testkit.MostWithin(times, time.Second)
	t.Logf("the limited endpoint's %d deliveries: at most %d started in any one second", len(times), worst)
	// The limiter grants at most 220 in any second; the sink sees each
	// start a little later, when a worker has taken the event, and those
	// delays can bunch a few starts that the limiter spread: 2% slack.
	if worst > 220+4 {
		t.Errorf("%d deliveries started within one second; want at most 200/s + a burst of 20", worst)
	}
	if ep := endpointState(t, o, rc.Listener.Addr().String()+"/slow"); ep.RateLimit != (outbox.RateLimit{PerSecond: 200, Burst: 20}) || ep.Rate <= 0 {
		t.Errorf("endpoint = %+v; want its limit and a current rate", ep)
	}
}

// RetryEndpoint closes the breaker, lifts a throttle and makes the
// endpoint's events due now, paced: the n-th no earlier than n/rate from
// now, those sent back unattempted when the breaker opened included. A
// disabled endpoint is refused, an unknown one is not found.
func TestRetryEndpoint(t *testing.T) {
	var up atomic.Bool
	rc := testkit.NewReceiver(t, "Idempotency-Key", func(r *http.Request, id string, n int) testkit.Reply {
		if !up.Load() {
			return testkit.Reply{Status: http.StatusInternalServerError}
		}
		return testkit.Reply{}
	})
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	cfg.MaxAttempts = 1000
	cfg.Breaker = outbox.Breaker{Threshold: 3, CoolDown: time.Hour, MaxCoolDown: time.Hour}
	o, _ := open(t, cfg)
	endpoint := rc.Listener.Addr().String() + "/hook"
	ids := enqueueN(t, o, 100, func(int) string { return rc.URL + "/hook/x" })
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the breaker to open", func() bool { return endpointState(t, o, endpoint).Breaker == outbox.BreakerOpen })
	// RetryEndpoint leaves the attempts under way alone: let those sent
	// before the breaker opened end and their outcomes be recorded.
	testkit.WaitFor(t, settle, "the attempts under way to end", func() bool {
		s := o.Stats()
		return s.InFlight == 0 && s.FailedTotal == uint64(sink.attempts(endpoint))
	})
	// One event is scheduled for later: retry now leaves its time alone.
	later := time.Now().Add(time.Hour).UTC()
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "later", Destination: rc.URL + "/hook/x", DeliverAt: later}); err != nil {
		t.Fatal(err)
	}
	up.Store(true)
	before := time.Now()
	n, err := o.RetryEndpoint(context.Background(), endpoint, 1000)
	if err != nil || n != len(ids) {
		t.Fatalf("RetryEndpoint = %d, %v; want the %d pending events", n, err, len(ids))
	}
	// Paced: one every millisecond, in ID order.
	for ev := range allPending(t, o) {
		if ev.ID == "later" {
			if !ev.NextAttemptAt.Equal(later) {
				t.Errorf("the scheduled event is due at %s after RetryEndpoint; want its time, %s", ev.NextAttemptAt, later)
			}
			continue
		}
		var i int
		fmt.Sscanf(ev.ID, "ev-%d", &i)
		if ev.NextAttemptAt.Before(before.Add(time.Duration(i)*time.Millisecond)) || ev.NextAttemptAt.After(time.Now().Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("event %s is due at %s; want %s + %dms", ev.ID, ev.NextAttemptAt, before, i)
		}
	}
	if ep := endpointState(t, o, endpoint); ep.Breaker != outbox.BreakerClosed {
		t.Fatalf("after RetryEndpoint: %+v; want the breaker closed", ep)
	}
	testkit.WaitFor(t, settle, "every event delivered", func() bool { return len(rc.Missing(ids)) == 0 })

	if _, err := o.RetryEndpoint(context.Background(), "nowhere", 0); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("RetryEndpoint(unknown) = %v; want ErrNotFound", err)
	}
	if _, err := o.RetryEndpoint(context.Background(), endpoint, -1); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("RetryEndpoint(rate -1) = %v; want ErrInvalid", err)
	}
	rc.SetAnswer(func(*http.Request, string, int) testkit.Reply { return testkit.Reply{Status: http.StatusGone} })
	if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "gone", Destination: rc.URL + "/hook/x"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the endpoint disabled", func() bool { return endpointState(t, o, endpoint).Disabled })
	if _, err := o.RetryEndpoint(context.Background(), endpoint, 0); !errors.Is(err, outbox.ErrEndpointDisabled) {
		t.Errorf("RetryEndpoint(disabled) = %v; want ErrEndpointDisabled", err)
	}
}

// Bad limits and breaker settings are refused, naming the field.
func TestControlsConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		limits map[string]outbox.RateLimit
		field  string
	}{
		{map[string]outbox.RateLimit{"a": {PerSecond: 0, Burst: 1}}, `RateLimits["a"].PerSecond`},
		{map[string]outbox.RateLimit{"a": {PerSecond: -5, Burst: 1}}, `RateLimits["a"].PerSecond`},
		{map[string]outbox.RateLimit{"a": {PerSecond: 5, Burst: 0}}, `RateLimits["a"].Burst`},
		{map[string]outbox.RateLimit{"": {PerSecond: 5, Burst: 1}}, `RateLimits`},
	} {
		_, err := outbox.NewRateLimits(tc.limits)
		var ce *outbox.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("NewRateLimits(%v) = %v; want a ConfigError naming %s", tc.limits, err, tc.field)
		}
	}
	for _, tc := range []struct {
		b     outbox.Breaker
		field string
	}{
		{outbox.Breaker{CoolDown: -time.Second}, "Breaker.CoolDown"},
		{outbox.Breaker{CoolDown: time.Minute, MaxCoolDown: time.Second}, "Breaker.MaxCoolDown"},
	} {
		cfg := testConfig(sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result { return outbox.Result{} }))
		cfg.Breaker = tc.b
		var ce *outbox.ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("Validate(%+v) = %v; want a ConfigError naming %s", tc.b, err, tc.field)
		}
	}
}

// Every rate an operator gives is bounded: below one a day or above
// MaxRate is a *ValidationError naming the bounds, and nothing moves; at
// the floor a backlog is paced a day apart, in the future, not in an
// overflowed past.
func TestOperatorRatesAreBounded(t *testing.T) {
	ctx := context.Background()
	const endpoint = "hook"
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: endpoint, URL: "https://receiver.example/hook"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	o, _ := open(t, testConfig(sink)) // not started: nothing is delivered
	ids := enqueueN(t, o, 3, func(int) string { return endpoint })
	for _, bad := range []float64{1e-300, outbox.MinRate / 2, -1, outbox.MaxRate * 1.5, math.NaN(), math.Inf(1)} {
		_, retryErr := o.RetryEndpoint(ctx, endpoint, bad)
		_, replayErr := o.ReplayDead(ctx, outbox.ReplayFilter{Rate: bad})
		for _, err := range []error{retryErr, replayErr} {
			var ve *outbox.ValidationError
			if !errors.As(err, &ve) || ve.Field != "rate" || !strings.Contains(err.Error(), "out of range: from 1/86400 (one per day) to 1000000 per second") {
				t.Errorf("rate %g: %v; want a validation error naming the bounds", bad, err)
			}
		}
		if _, err := outbox.NewRateLimits(map[string]outbox.RateLimit{"a": {PerSecond: bad, Burst: 1}}); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("NewRateLimits(%g/s) = %v; want a config error", bad, err)
		}
	}
	if _, err := o.ReplayDead(ctx, outbox.ReplayFilter{Rate: outbox.MaxRate}); err != nil {
		t.Errorf("ReplayDead at the ceiling: %v", err)
	}
	before := time.Now()
	n, err := o.RetryEndpoint(ctx, endpoint, outbox.MinRate)
	if err != nil || n != len(ids) {
		t.Fatalf("RetryEndpoint at the floor = %d, %v; want the %d pending events", n, err, len(ids))
	}
	for ev := range allPending(t, o) {
		var i int
		fmt.Sscanf(ev.ID, "ev-%d", &i)
		want := before.Add(time.Duration(i) * 24 * time.Hour)
		if ev.NextAttemptAt.Before(want) || ev.NextAttemptAt.After(want.Add(time.Minute)) {
			t.Errorf("event %s is due at %s at one a day; want about %s", ev.ID, ev.NextAttemptAt, want)
		}
	}
}
