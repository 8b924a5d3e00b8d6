package outbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// A rate limit set on a running outbox paces the endpoint's deliveries from
// then on (at most PerSecond + Burst in any second), shows in Endpoints,
// and once removed no longer holds the endpoint back. A bad limit is
// refused and changes nothing.
func TestRateLimitSetAtRunTime(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	limits, err := outbox.NewRateLimits(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RateLimits = limits
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	endpoint := rc.Listener.Addr().String() + "/slow"
	limit := outbox.RateLimit{PerSecond: 100, Burst: 10}
	if err := limits.Set(endpoint, limit); err != nil {
		t.Fatal(err)
	}
	var ce *outbox.ConfigError
	if err := limits.Set(endpoint, outbox.RateLimit{PerSecond: 0, Burst: 1}); !errors.As(err, &ce) || ce.Field != `RateLimits["`+endpoint+`"].PerSecond` {
		t.Fatalf("Set with a zero rate: %v; want a *ConfigError naming PerSecond", err)
	}
	if err := limits.Set(endpoint, outbox.RateLimit{PerSecond: 5, Burst: 0}); !errors.As(err, &ce) || ce.Field != `RateLimits["`+endpoint+`"].Burst` {
		t.Fatalf("Set with no burst: %v; want a *ConfigError naming Burst", err)
	}

	const n = 300
	enqueueN(t, o, n, func(int) string { return rc.URL + "/slow/x" })
	testkit.WaitFor(t, settle, "the limited endpoint's backlog", func() bool { return sink.attempts(endpoint) >= n })
	times := sink.startTimes(endpoint)
	worst := testkit.MostWithin(times, time.Second)
	t.Logf("%d deliveries under a limit set at run time: at most %d started in any one second", len(times), worst)
	if worst > 110+3 {
		t.Errorf("%d deliveries started within one second; want at most 100/s + a burst of 10", worst)
	}

	if ep := endpointState(t, o, endpoint); ep.RateLimit != limit {
		t.Fatalf("the endpoint's limit after refused changes and its deliveries: %+v, want %+v", ep.RateLimit, limit)
	}

	limits.Remove(endpoint)
	limits.Remove(endpoint) // no limit: nothing to do
	if ep := endpointState(t, o, endpoint); ep.RateLimit != (outbox.RateLimit{}) {
		t.Fatalf("the endpoint's limit after Remove: %+v, want none", ep.RateLimit)
	}
	if _, ok := limits.Limit(endpoint); ok {
		t.Fatal("Limit after Remove reports a limit")
	}
}

// An outbox enforcing a share of its limits (as an instance of a Kafka
// group does) reports the limit as set and the share it enforces; under a
// share of nothing its limited endpoint's events stay pending, spend no
// attempt and keep their schedule, and once a share is given back they are
// all delivered.
func TestRateLimitShareHoldsAndReleases(t *testing.T) {
	rc := testkit.NewReceiver(t, "Idempotency-Key", nil)
	sink := newCountingSink(t)
	cfg := testConfig(sink)
	endpoint := rc.Listener.Addr().String() + "/shared"
	limit := outbox.RateLimit{PerSecond: 1000, Burst: 10}
	limits, err := outbox.NewRateLimits(map[string]outbox.RateLimit{endpoint: limit})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RateLimits = limits
	o, _ := open(t, cfg)
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	var ce *outbox.ConfigError
	if err := limits.SetShare(1, 0); !errors.As(err, &ce) {
		t.Fatalf("SetShare(1, 0) = %v; want a *ConfigError", err)
	}
	if err := limits.SetShare(0, 3); err != nil {
		t.Fatal(err)
	}
	const n = 50
	enqueueN(t, o, n, func(int) string { return rc.URL + "/shared/x" })
	waitPunctuations(t, o, 5)
	if got := sink.attempts(endpoint); got != 0 {
		t.Fatalf("%d deliveries started under a share of nothing", got)
	}
	if st := o.Stats(); st.Pending != n {
		t.Fatalf("pending = %d under a share of nothing, want %d", st.Pending, n)
	}
	if l, _ := limits.Limit(endpoint); l != limit {
		t.Fatalf("Limit = %v under a share, want %v as set", l, limit)
	}
	if l, ok := limits.Effective(endpoint); !ok || l != (outbox.RateLimit{}) {
		t.Fatalf("Effective = %v, %v under a share of nothing, want the zero limit", l, ok)
	}

	if err := limits.SetShare(1, 2); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "the held events delivered", func() bool {
		return rc.Successes() >= n && o.Stats().Pending == 0
	})
	want := outbox.RateLimit{PerSecond: 500, Burst: 5}
	if got, _ := limits.Effective(endpoint); got != want {
		t.Fatalf("Effective = %v, want %v", got, want)
	}
	if ep := endpointState(t, o, endpoint); ep.RateLimit != limit || ep.RateLimitShare != want {
		t.Fatalf("endpoint limit %v, share %v; want %v and %v", ep.RateLimit, ep.RateLimitShare, limit, want)
	}
}
