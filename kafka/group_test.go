package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// switchSink answers 503 (retry) to everything in mode 0, 200 to the
// events of even-length keys in mode 1, 200 to everything in mode 2, and
// counts the successful deliveries by ID.
type switchSink struct {
	*recorder // successes only
	mode      atomic.Int32
}

func newSwitchSink() *switchSink { return &switchSink{recorder: newRecorder("s")} }

func (s *switchSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	m := s.mode.Load()
	if m == 2 || m == 1 && len(d.Key)%2 == 0 {
		return s.recorder.Deliver(ctx, d)
	}
	return outbox.Result{Action: outbox.ActionRetry, Status: 503}
}

func groupStoreConfig(dir string, sink outbox.Sink) StoreConfig {
	return StoreConfig{Dir: dir, Outbox: outbox.Config{
		Sink:           sink,
		Interval:       20 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
		MaxAttempts:    1 << 20, // the events wait for the receiver, however long
		NoSync:         true,
		// The receiver opens for some keys only: the breaker, which
		// would hold the whole endpoint, is not what these tests test.
		Breaker: outbox.Breaker{Threshold: -1},
	}}
}

func startGroup(t testing.TB, cfg Config, sc StoreConfig) *Group {
	t.Helper()
	g, err := StartGroup(context.Background(), cfg, sc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeGroup(t, g) })
	return g
}

func closeGroup(t testing.TB, g *Group) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Close(ctx); err != nil {
		t.Errorf("group close: %v", err)
	}
}

func pendingOf(g *Group) int {
	n := 0
	for _, p := range g.Partitions() {
		if p.State == PartitionActive {
			n += p.Pending
		}
	}
	return n
}

func activeCount(g *Group) int {
	n := 0
	for _, p := range g.Partitions() {
		if p.State == PartitionActive {
			n++
		}
	}
	return n
}

// The state follows the partitions: a group's stores are handed over with
// checkpoints and caught up from them; with the local state gone they are
// rebuilt from the changelog with every pending event, and delivered events
// do not come back.
func TestGroupStoresFollowThePartitions(t *testing.T) {
	const parts, n = 3, 300
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	sink := newSwitchSink()
	dir := t.TempDir()

	g := startGroup(t, cfg, groupStoreConfig(dir, sink))
	newProducer(t, brokers, "in").produce(t, records(0, n, 50)...)
	testkit.WaitFor(t, 30*time.Second, "every record pending in the partition stores", func() bool {
		return activeCount(g) == parts && pendingOf(g) == n
	})
	closeGroup(t, g)
	for p := range parts {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("in-%d.checkpoint", p))); err != nil {
			t.Errorf("partition %d handed over without a checkpoint: %v", p, err)
		}
	}

	// Warm: the same directory restores from the checkpoints.
	g = startGroup(t, cfg, groupStoreConfig(dir, sink))
	testkit.WaitFor(t, 30*time.Second, "the stores back from their checkpoints", func() bool {
		return activeCount(g) == parts && pendingOf(g) == n
	})
	if m := g.Metrics(); m.Restores.Checkpoint != parts || m.Restores.Rebuild != 0 {
		t.Errorf("restores %+v, want %d from checkpoints and no rebuild", m.Restores, parts)
	}
	for _, p := range g.Partitions() {
		if p.Restore.Mode != RestoreCheckpoint {
			t.Errorf("partition %d restored by %q", p.Partition, p.Restore.Mode)
		}
	}
	// Deliver half: the receiver opens for the records of even keys.
	sink.mode.Store(1)
	var want int
	for _, m := range records(0, n, 50) {
		if len(m.Key)%2 != 0 {
			want++
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the even keys delivered", func() bool { return pendingOf(g) == want })
	closeGroup(t, g)

	// Cold: a new directory rebuilds every store from the changelog.
	delivered := sink.snapshot()
	g = startGroup(t, cfg, groupStoreConfig(t.TempDir(), sink))
	testkit.WaitFor(t, 30*time.Second, "the stores rebuilt from the changelog", func() bool {
		return activeCount(g) == parts && pendingOf(g) == want
	})
	if m := g.Metrics(); m.Restores.Rebuild != parts {
		t.Errorf("restores %+v, want %d rebuilds", m.Restores, parts)
	}
	sink.mode.Store(2)
	testkit.WaitFor(t, 30*time.Second, "every record delivered", func() bool { return pendingOf(g) == 0 && sink.distinct() == n })
	after := sink.snapshot()
	for id, k := range delivered {
		if after[id] != k {
			t.Errorf("%s delivered %d times before the rebuild and %d more after it", id, k, after[id]-k)
		}
	}
}

// A changelog topic that does not fit is refused at start, naming it.
func TestGroupRefusesAChangelogTopicThatDoesNotFit(t *testing.T) {
	c := newCluster(t, kfakeSeed(3, "in")...)
	brokers := c.ListenAddrs()
	cl := admin(t, brokers)
	ctx := context.Background()
	for _, tc := range []struct {
		topic   string
		parts   int
		configs []kafkago.ConfigEntry
		want    string
	}{
		{"cl-two", 2, []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}}, "has 2 partitions, the ingest topic in has 3"},
		{"cl-delete", 3, []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "delete"}}, "is not compacted"},
	} {
		if _, err := cl.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
			Topic: tc.topic, NumPartitions: tc.parts, ReplicationFactor: 1, ConfigEntries: tc.configs,
		}}}); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(brokers, "in")
		cfg.ChangelogTopic = tc.topic
		g, err := StartGroup(ctx, cfg, groupStoreConfig(t.TempDir(), newSwitchSink()), testLogger(t))
		if err == nil {
			closeGroup(t, g)
			t.Fatalf("%s: started", tc.topic)
		}
		var te *TopicError
		if !errors.As(err, &te) || te.Topic != tc.topic || !errors.Is(err, ErrTopic) {
			t.Errorf("%s: error %v, want a TopicError naming it", tc.topic, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q lacks %q", tc.topic, err, tc.want)
		}
	}
}

// A second member joining takes half of the partitions with their pending
// events: it rebuilds them from the changelog while the first catches up
// the ones it keeps from its checkpoints; nothing is lost or delivered
// twice.
func TestGroupPartitionsMoveWithTheirEvents(t *testing.T) {
	const parts, n = 6, 600
	c := newCluster(t, kfakeSeed(parts, "in")...)
	brokers := c.ListenAddrs()
	cfg := testConfig(brokers, "in")
	sink := newSwitchSink()

	a := startGroup(t, cfg, groupStoreConfig(t.TempDir(), sink))
	newProducer(t, brokers, "in").produce(t, records(0, n, 60)...)
	testkit.WaitFor(t, 30*time.Second, "every record pending on the first member", func() bool {
		return activeCount(a) == parts && pendingOf(a) == n
	})
	b := startGroup(t, cfg, groupStoreConfig(t.TempDir(), sink))
	testkit.WaitFor(t, 30*time.Second, "the partitions shared, every event still pending", func() bool {
		return activeCount(a) > 0 && activeCount(b) > 0 && activeCount(a)+activeCount(b) == parts &&
			pendingOf(a)+pendingOf(b) == n
	})
	if m := b.Metrics(); m.Restores.Rebuild == 0 {
		t.Errorf("the new member restored %+v, want rebuilds", m.Restores)
	}
	if m := a.Metrics(); m.Restores.Checkpoint == 0 {
		t.Errorf("the first member restored %+v, want its kept partitions from checkpoints", m.Restores)
	}
	sink.mode.Store(2)
	testkit.WaitFor(t, 30*time.Second, "every record delivered", func() bool { return sink.distinct() == n })
	testkit.WaitFor(t, 30*time.Second, "nothing pending", func() bool { return pendingOf(a)+pendingOf(b) == 0 })
	for id, k := range sink.snapshot() {
		if k != 1 {
			t.Errorf("%s delivered %d times", id, k)
		}
	}
}
