package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// A record whose fan-out alone is over Config.MaxDeliveriesPerCall becomes
// a dead letter saying so, as a record the outbox refuses as invalid does;
// records over the bound only together are ingested in smaller calls. The
// offset passes every record: nothing blocks the partition.
func TestFanOutOverTheBoundBecomesADeadLetter(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "fanout"), sink, func(cfg *outbox.Config) {
		cfg.MaxDeliveriesPerCall = 4
		for i := range 5 {
			topics := []string{"big.*"}
			if i < 2 {
				topics = append(topics, "small.*")
			}
			cfg.Subscriptions = append(cfg.Subscriptions, outbox.Subscription{Endpoint: fmt.Sprintf("e%d", i), Topics: topics})
		}
	})
	cfg := testConfig(brokers, "in")
	topic := func(name string) []kafkago.Header {
		return []kafkago.Header{{Key: "outbox-topic", Value: []byte(name)}}
	}
	// Record 0 fans out to five endpoints (over 4); records 1-3 to two
	// each, six together (over 4 only in one call).
	newProducer(t, brokers, "in").produce(t,
		kafkago.Message{Value: []byte("big"), Headers: topic("big.one")},
		kafkago.Message{Value: []byte("s1"), Headers: topic("small.one")},
		kafkago.Message{Value: []byte("s2"), Headers: topic("small.two")},
		kafkago.Message{Value: []byte("s3"), Headers: topic("small.three")},
	)
	startRunner(t, o, cfg)
	cl := admin(t, brokers)
	testkit.WaitFor(t, 10*time.Second, "the offset to pass every record", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == 4
	})
	testkit.WaitFor(t, 10*time.Second, "the small records delivered to both subscribers", func() bool {
		return sink.count(RecordID("in", 0, 1)) == 2 && sink.count(RecordID("in", 0, 2)) == 2 && sink.count(RecordID("in", 0, 3)) == 2
	})
	if n := sink.count(RecordID("in", 0, 0)); n != 0 {
		t.Fatalf("the record over the bound was delivered %d times", n)
	}
	dead, _, err := o.List(context.Background(), outbox.ListOptions{State: outbox.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != RecordID("in", 0, 0) || string(dead[0].Payload) != "big" {
		t.Fatalf("dead letters %+v, want the big record's", dead)
	}
	for _, s := range []string{"5 deliveries", "limit of 4", "MaxDeliveriesPerCall"} {
		if !strings.Contains(dead[0].DeadReason, s) {
			t.Errorf("dead reason %q does not say %q", dead[0].DeadReason, s)
		}
	}
}

// One batch of records whose fan-outs are over the bound only together is
// ingested in smaller calls, all of it pending; a record over the bound on
// its own in the same batch becomes the one dead letter.
func TestStoreSplitsABatchOverTheBound(t *testing.T) {
	ocfg := outbox.Config{Sink: newRecorder("sink"), NoSync: true, MaxDeliveriesPerCall: 4}
	for i := range 5 {
		topics := []string{"big.*"}
		if i < 2 {
			topics = append(topics, "small.*")
		}
		ocfg.Subscriptions = append(ocfg.Subscriptions, outbox.Subscription{Endpoint: fmt.Sprintf("e%d", i), Topics: topics})
	}
	o, err := outbox.Open(dbPath(t, "split"), ocfg) // not started: the deliveries stay pending
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Stop(context.Background()) })
	cfg := testConfig(nil, "in").WithDefaults()
	in := &ingest{cfg: cfg, m: newMapper(cfg), met: &metrics{}, log: testLogger(t)}
	var batch []kafkago.Message
	for off, tp := range []string{"small.a", "small.b", "big.c", "small.d", "small.e"} {
		batch = append(batch, kafkago.Message{Topic: "in", Offset: int64(off), Value: []byte(tp),
			Headers: []kafkago.Header{{Key: cfg.TopicHeader, Value: []byte(tp)}}})
	}
	if err := in.store(context.Background(), o, batch); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Pending != 8 || st.Dead != 1 {
		t.Fatalf("stats %+v, want 8 deliveries of the small records and 1 dead letter", st)
	}
	if got := in.met.enqueued.Load(); got != 4 {
		t.Errorf("enqueued counter %d, want 4", got)
	}
}
