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
