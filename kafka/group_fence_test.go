package kafka

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/outbox"
)

// changelogEntries returns the enqueue entries of events with these IDs, as
// a real store writes them.
func changelogEntries(t *testing.T, ids ...string) map[string]outbox.ChangelogEntry {
	t.Helper()
	o, err := outbox.Open(filepath.Join(t.TempDir(), "src.db"), outbox.Config{Sink: newRecorder("x"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	for _, id := range ids {
		if _, err := o.Enqueue(context.Background(), outbox.Event{ID: id, Destination: "http://127.0.0.1:1/x", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := o.Changelog().Entries(1, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]outbox.ChangelogEntry{}
	for _, e := range es {
		out[e.ID] = e
	}
	return out
}

// createChangelog creates a compacted topic with n partitions.
func createChangelog(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	resp, err := admin(t, brokers).CreateTopics(context.Background(), &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: topic, NumPartitions: n, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Errors[topic]; err != nil {
		t.Fatal(err)
	}
}

// A zombie (an owner that has not noticed it lost its partition) keeps
// writing to the changelog after the new owner's fence: a restore skips
// those records, so it cannot undo the new owner's delete nor add events.
func TestRestoreSkipsWhatAZombieWroteAfterTheFence(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	createChangelog(t, brokers, "in-changelog", 1)
	es := changelogEntries(t, "x", "y", "z")
	old := changelog.Stamp{Partition: 0, Epoch: 4, Generation: 4}
	next := changelog.Stamp{Partition: 0, Epoch: 5, Generation: 5}
	stamped := func(st changelog.Stamp, m kafkago.Message) kafkago.Message {
		st.Apply(&m)
		m.WriterData = nil
		return m
	}
	msgs := []kafkago.Message{
		stamped(old, changelog.EntryMessage(es["x"])), // the old owner's x, before the hand-over
		stamped(old, changelog.EntryMessage(es["z"])), // and z
		changelog.FenceMessage(next),                  // the new owner takes over
		stamped(next, changelog.EntryMessage(outbox.ChangelogEntry{Op: outbox.OpDelete, ID: "x", LSN: 7, Time: time.Now()})), // and delivers x
		stamped(old, changelog.EntryMessage(es["x"])), // the zombie writes x back
		stamped(old, changelog.EntryMessage(es["y"])), // and an event of its own
		stamped(old, changelog.EntryMessage(outbox.ChangelogEntry{Op: outbox.OpDelete, ID: "z", LSN: 9, Time: time.Now()})), // and deletes z
	}
	for i := range msgs {
		msgs[i].WriterData = nil
	}
	newProducer(t, brokers, "in-changelog").produce(t, msgs...)

	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	g := startGroup(t, cfg, groupStoreConfig(t.TempDir(), newSwitchSink()))
	testkit.WaitFor(t, 20*time.Second, "the partition restored", func() bool { return activeCount(g) == 1 })
	st := g.Partitions()[0]
	if st.Restore.Fenced != 3 || st.Restore.Mode != RestoreRebuild {
		t.Errorf("restore %+v, want a rebuild that fenced 3 records", st.Restore)
	}
	if st.Epoch <= next.Epoch {
		t.Errorf("new epoch %d, want above the last applied %d", st.Epoch, next.Epoch)
	}
	o := g.Stores()[0]
	ctx := context.Background()
	if ev, err := o.Get(ctx, "x"); err == nil && ev.State != outbox.StateDelivered {
		t.Errorf("x is %v after the restore: the zombie undid the delete", ev.State)
	}
	if _, err := o.Get(ctx, "y"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("y, written by the zombie only: %v, want not found", err)
	}
	if ev, err := o.Get(ctx, "z"); err != nil || ev.State != outbox.StatePending {
		t.Errorf("z: %v %v, want pending (the zombie's delete is fenced)", ev.State, err)
	}
}

// A changelog record that does not decode fails the partition's restore
// with an error naming the topic, partition and offset; nothing of the
// partition is ingested or delivered from the partial store, and the
// restore is retried.
func TestUndecodableChangelogRecordLeavesThePartitionUndelivered(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	createChangelog(t, brokers, "in-changelog", 1)
	es := changelogEntries(t, "x")
	newProducer(t, brokers, "in-changelog").produce(t, changelog.EntryMessage(es["x"]),
		kafkago.Message{Key: []byte("bad"), Value: []byte("not an entry")})
	newProducer(t, brokers, "in").produce(t, records(0, 5, 5)...)

	cfg := testConfig(brokers, "in")
	cfg.ChangelogTopic = "in-changelog"
	sink := newSwitchSink()
	sink.mode.Store(2)
	dir := t.TempDir()
	g := startGroup(t, cfg, groupStoreConfig(dir, sink))
	testkit.WaitFor(t, 20*time.Second, "the restore failed twice", func() bool { return g.Metrics().Restores.Failed >= 2 })
	testkit.WaitFor(t, 20*time.Second, "no partial store left between attempts", func() bool {
		if g.Partitions()[0].State != PartitionFailed {
			return false
		}
		files, _ := filepath.Glob(filepath.Join(dir, "in-0.*"))
		return len(files) == 0
	})
	st := g.Partitions()[0]
	if st.State != PartitionFailed || !strings.Contains(st.Error, "in-changelog partition 0") || !strings.Contains(st.Error, "offset 1") {
		t.Errorf("status %+v, want failed naming the topic, partition and offset", st)
	}
	if h := g.Health(); h.Failed != 1 {
		t.Errorf("health %+v, want one failed partition", h)
	}
	if len(g.Stores()) != 0 || sink.distinct() != 0 {
		t.Errorf("%d stores active, %d events delivered from a partition whose restore failed", len(g.Stores()), sink.distinct())
	}
}

// Brokers that refuse to create the changelog topic stop the start with an
// error naming it.
func TestGroupReportsARefusedTopicCreation(t *testing.T) {
	c := newCluster(t, kfakeSeed(2, "in")...)
	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	cfg := testConfig(c.ListenAddrs(), "in")
	g, err := StartGroup(context.Background(), cfg, groupStoreConfig(t.TempDir(), newSwitchSink()), testLogger(t))
	if err == nil {
		closeGroup(t, g)
		t.Fatal("started without its changelog topic")
	}
	var te *TopicError
	if !errors.As(err, &te) || te.Topic != "g-in-changelog" || !strings.Contains(err.Error(), "refuse") {
		t.Errorf("error %v, want a TopicError naming g-in-changelog", err)
	}
}
