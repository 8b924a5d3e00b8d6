package kafka

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// The rate limits of a group's stores are the group's: each member
// enforces the share of the partitions it owns, re-split at every
// assignment, and a member left alone enforces the whole limit again.
func TestGroupSharesRateLimitsByOwnedPartitions(t *testing.T) {
	const parts = 4
	c := newCluster(t, kfakeSeed(parts, "in")...)
	cfg := testConfig(c.ListenAddrs(), "in")
	cfg.ChangelogTopic = "in-changelog"
	limit := outbox.RateLimit{PerSecond: 100, Burst: 10}
	member := func() (*Group, *outbox.RateLimits) {
		rl, err := outbox.NewRateLimits(map[string]outbox.RateLimit{"dest": limit})
		if err != nil {
			t.Fatal(err)
		}
		sc := groupStoreConfig(t.TempDir(), newSwitchSink())
		sc.Outbox.RateLimits = rl
		return startGroup(t, cfg, sc), rl
	}
	enforces := func(rl *outbox.RateLimits, want outbox.RateLimit) func() bool {
		return func() bool { got, _ := rl.Effective("dest"); return got == want }
	}

	g1, rl1 := member()
	testkit.WaitFor(t, 30*time.Second, "the first member owning every partition", func() bool {
		return activeCount(g1) == parts && enforces(rl1, limit)()
	})
	if l, ok := rl1.Limit("dest"); l != limit || !ok {
		t.Fatalf("Limit = %v, %v; want the limit as configured", l, ok)
	}

	g2, rl2 := member()
	half := outbox.RateLimit{PerSecond: 50, Burst: 5}
	testkit.WaitFor(t, 30*time.Second, "two members enforcing half the limit each", func() bool {
		return activeCount(g1) == parts/2 && activeCount(g2) == parts/2 && enforces(rl1, half)() && enforces(rl2, half)()
	})

	closeGroup(t, g2)
	testkit.WaitFor(t, 30*time.Second, "the member left enforcing the whole limit", func() bool {
		return activeCount(g1) == parts && enforces(rl1, limit)()
	})
}
