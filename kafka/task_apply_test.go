package kafka

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/partition"
	"github.com/outboxd/outbox/outbox"
)

// newChangelogTopic creates a compacted changelog topic with one partition.
func newChangelogTopic(t testing.TB, brokers []string, topic string) {
	t.Helper()
	if _, err := admin(t, brokers).CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}}); err != nil {
		t.Fatal(err)
	}
}

// tombstones are the changelog entries of the delivery of the records
// first to first+n-1 of partition 0 of "in", from LSN lsn on.
func tombstones(first, n int, lsn uint64) []outbox.ChangelogEntry {
	out := make([]outbox.ChangelogEntry, n)
	for i := range out {
		out[i] = outbox.ChangelogEntry{LSN: lsn + uint64(i), Op: outbox.OpDelete, ID: RecordID("in", 0, int64(first+i)),
			Version: lsn + uint64(i), Time: time.Now()}
	}
	return out
}

// A rebuild applies the changelog in batches that are read while the
// previous one is committed: a tombstone deletes an event enqueued batches
// before it, and records of an owner fenced off in the meantime are skipped
// whichever batch they fall in.
func TestGroupRebuildAppliesBatchesInOrder(t *testing.T) {
	n := 2*partition.ApplyBatch + 500
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	newChangelogTopic(t, brokers, "in-changelog")
	p := newProducer(t, brokers, "in-changelog")
	old, zombie, owner := changelog.Stamp{Epoch: 1, Generation: 1}, changelog.Stamp{Epoch: 2, Generation: 2}, changelog.Stamp{Epoch: 3, Generation: 3}
	p.produce(t, changelog.FenceMessage(old))
	p.produce(t, stamped(old, storeEntries(t, 0, n)...)...)
	// Delivered by the first owner: events 0 to 99, in the last batch.
	p.produce(t, stamped(old, tombstones(0, 100, uint64(n+1))...)...)
	// The third owner's fence, then a zombie of the second one delivers
	// 100 to 199 (skipped) and the third owner 200 to 209.
	p.produce(t, changelog.FenceMessage(owner))
	p.produce(t, stamped(zombie, tombstones(100, 100, 1)...)...)
	p.produce(t, stamped(owner, tombstones(200, 10, 1)...)...)

	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	cfg.HandoverTimeout = 100 * time.Millisecond // blockSink holds its delivery until then
	g := startGroup(t, cfg, StoreConfig{Dir: t.TempDir(), Outbox: outbox.Config{Sink: blockSink{}, Concurrency: 1, NoSync: true}})
	testkit.WaitFor(t, 60*time.Second, "the partition restored", func() bool { return activeCount(g) == 1 })
	st := g.Partitions()[0]
	if st.Restore.Mode != RestoreRebuild || st.Restore.Records != int64(n+110) || st.Restore.Fenced != 100 {
		t.Errorf("restore %+v, want a rebuild of %d records with 100 fenced", st.Restore, n+110)
	}
	if want := n - 110; st.Pending != want {
		t.Errorf("%d pending, want %d", st.Pending, want)
	}
	if st.Epoch <= owner.Epoch {
		t.Errorf("epoch %d, want above the last owner's %d", st.Epoch, owner.Epoch)
	}
	o := g.Stores()[0]
	for _, tc := range []struct {
		off   int
		state outbox.State
	}{{0, outbox.StateDelivered}, {99, outbox.StateDelivered}, {100, outbox.StatePending}, {199, outbox.StatePending},
		{200, outbox.StateDelivered}, {209, outbox.StateDelivered}, {210, outbox.StatePending}, {n - 1, outbox.StatePending}} {
		id := RecordID("in", 0, int64(tc.off))
		ev, err := o.Get(context.Background(), id)
		if err != nil || ev.State != tc.state {
			t.Errorf("%s: %v %v, want %v", id, ev.State, err, tc.state)
		}
	}
}

// A record that does not decode, batches into a rebuild, fails the restore
// naming the topic, partition and offset; the partition is not delivered
// from what was applied before it, and no store file is left.
func TestGroupRestoreOfAnUndecodableRecordLeavesNoStore(t *testing.T) {
	n := partition.ApplyBatch + 500
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	newChangelogTopic(t, brokers, "in-changelog")
	p := newProducer(t, brokers, "in-changelog")
	st := changelog.Stamp{Epoch: 1, Generation: 1}
	p.produce(t, changelog.FenceMessage(st))
	p.produce(t, stamped(st, storeEntries(t, 0, n)...)...)
	bad := kafkago.Message{Key: []byte(RecordID("in", 0, int64(n))), Value: []byte("not an entry"),
		Headers: []kafkago.Header{{Key: HeaderOp, Value: []byte("enqueue")}, {Key: HeaderLSN, Value: []byte(strconv.Itoa(n + 1))}}}
	st.Apply(&bad)
	p.produce(t, bad)
	badOffset := n + 1 // after the fence and the n entries

	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	cfg.RetryBackoff, cfg.RetryBackoffMax = 500*time.Millisecond, time.Second // the failure stays visible
	dir := t.TempDir()
	g := startGroup(t, cfg, StoreConfig{Dir: dir, Outbox: outbox.Config{Sink: blockSink{}, NoSync: true}})
	var failed PartitionStatus
	testkit.WaitFor(t, 60*time.Second, "the restore failed", func() bool {
		ps := g.Partitions()
		if len(ps) == 1 && ps[0].State == PartitionFailed {
			failed = ps[0]
			return true
		}
		return false
	})
	for _, want := range []string{"topic in-changelog partition 0", "record at offset " + strconv.Itoa(badOffset), ErrBadChangelogRecord.Error()} {
		if !strings.Contains(failed.Error, want) {
			t.Errorf("error %q lacks %q", failed.Error, want)
		}
	}
	if s := g.Stores(); len(s) != 0 {
		t.Errorf("%d stores delivering from a failed restore", len(s))
	}
	if m := g.Metrics(); m.Restores.Failed == 0 || m.Restores.Rebuild != 0 {
		t.Errorf("restores %+v, want failures and no rebuild", m.Restores)
	}
	// The failed attempt removed what it had written; a retry may be
	// writing its own .restoring file.
	if _, err := os.Stat(filepath.Join(dir, "in-0.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store file after a failed restore: %v", err)
	}
}
