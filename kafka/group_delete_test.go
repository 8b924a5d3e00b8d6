package kafka

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/union"
)

// TestPowerLossKafkaDeleteIsShippedBeforeItIsAnswered is the regression
// test of the Kafka power-loss scenario (faults: TestPowerLossKafka), which
// found an event deleted through the API (204) back after a cut: the
// delete was committed to the partition's store but not yet shipped, and
// a store not closed cleanly is rebuilt from the changelog topic, which
// still held the event. A delete through the group's view with
// Group.WaitShipped as its settle step returns only once its tombstone is
// in the changelog topic.
func TestPowerLossKafkaDeleteIsShippedBeforeItIsAnswered(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	cfg.ShipInterval = 500 * time.Millisecond // a delete answered before its shipping is seen as such
	sc := groupStoreConfig(t.TempDir(), newSwitchSink())
	sc.Outbox.BackoffInitial, sc.Outbox.BackoffMax = time.Hour, time.Hour // one attempt, then quiet
	g := startGroup(t, cfg, sc)
	newProducer(t, brokers, "in").produce(t, records(0, 1, 1)...)
	testkit.WaitFor(t, 30*time.Second, "the record pending in the partition store", func() bool {
		return activeCount(g) == 1 && pendingOf(g) == 1
	})
	id := expectedIDs("in", map[int]int64{0: 1})[0]
	// Everything so far shipped: the delete's tombstone is the only new record.
	o := g.Stores()[0]
	if err := g.WaitShipped(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	primary := openOutbox(t, dbPath(t, "primary"), newRecorder("p"), nil)
	view := union.New(primary, g.Stores).WithSettle(g.WaitShipped)
	if err := view.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if !tombstoneShipped(t, brokers, "in-changelog", id) {
		t.Fatalf("Delete of %s returned before its tombstone was in the changelog topic: a restore after a crash brings the event back", id)
	}
}

// TestPowerLossKafkaDeadReplayIsShippedBeforeItIsAnswered: a dead-letter
// replay (POST /v1/dead/replay) through the group's view settled by
// Group.WaitShipped returns only once the replay is in the changelog
// topic; answered before, a crash would rebuild the store with the event
// dead again although the operator was told it was replayed.
func TestPowerLossKafkaDeadReplayIsShippedBeforeItIsAnswered(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	cfg.ShipInterval = 500 * time.Millisecond // a replay answered before its shipping is seen as such
	// The receiver answers 503: the one attempt fails and the event is dead.
	sc := groupStoreConfig(t.TempDir(), newSwitchSink())
	sc.Outbox.MaxAttempts = 1
	sc.Outbox.BackoffInitial, sc.Outbox.BackoffMax = time.Hour, time.Hour
	g := startGroup(t, cfg, sc)
	newProducer(t, brokers, "in").produce(t, records(0, 1, 1)...)
	testkit.WaitFor(t, 30*time.Second, "the record dead in the partition store", func() bool {
		return activeCount(g) == 1 && g.Stores()[0].Stats().Dead == 1
	})
	id := expectedIDs("in", map[int]int64{0: 1})[0]
	if err := g.WaitShipped(context.Background(), g.Stores()[0]); err != nil {
		t.Fatal(err)
	}
	primary := openOutbox(t, dbPath(t, "primary"), newRecorder("p"), nil)
	view := union.New(primary, g.Stores).WithSettle(g.WaitShipped)
	n, err := view.ReplayDead(context.Background(), outbox.ReplayFilter{KeyPrefix: "k-0"})
	if err != nil || n != 1 {
		t.Fatalf("ReplayDead: %d replayed, %v; want 1", n, err)
	}
	replayed := func(m kafkago.Message) bool {
		return slices.ContainsFunc(m.Headers, func(h kafkago.Header) bool {
			return h.Key == changelog.HeaderOp && string(h.Value) == outbox.OpReplay.String()
		})
	}
	if !shipped(t, brokers, "in-changelog", id, replayed) {
		t.Fatalf("ReplayDead of %s returned before the replay was in the changelog topic: a restore after a crash has the event dead again", id)
	}
}

// tombstoneShipped reports whether partition 0 of topic holds, up to its
// end offset now, a tombstone (no value) keyed by id.
func tombstoneShipped(t *testing.T, brokers []string, topic, id string) bool {
	t.Helper()
	return shipped(t, brokers, topic, id, func(m kafkago.Message) bool { return m.Value == nil })
}

// shipped reports whether partition 0 of topic holds, up to its end offset
// now, a record keyed by id for which is holds.
func shipped(t *testing.T, brokers []string, topic, id string, is func(kafkago.Message) bool) bool {
	t.Helper()
	end := endOffsets(t, admin(t, brokers), topic, 1)[0]
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for off := int64(0); off < end; off++ {
		m, err := r.ReadMessage(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("reading %s up to offset %d: %v", topic, end, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Key) == id && is(m) {
			return true
		}
		off = m.Offset
	}
	return false
}
