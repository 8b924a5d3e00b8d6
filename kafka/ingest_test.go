package kafka

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// A record whose enqueue fails holds the committed offset below it: the
// records after it are stored and delivered, but the group's offset does not
// pass it until its retry succeeds; then it moves to the end.
func TestGapAwareCommitHoldsBelowFailedRecord(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "gap"), sink, nil)

	const failing = 25
	failID := RecordID("in", 0, failing)
	var broken atomic.Bool
	broken.Store(true)
	var attempts atomic.Int32
	cfg := testConfig(brokers, "in")
	cfg.BatchSize = 10
	cfg.BeforeEnqueue = func(_ context.Context, events []outbox.Event) error {
		for _, ev := range events {
			if ev.ID == failID && broken.Load() {
				attempts.Add(1)
				return errors.New("injected: disk full")
			}
		}
		return nil
	}
	// Records arrive one produce at a time, so batches stay small.
	p := newProducer(t, brokers, "in")
	for i := 0; i < 100; i += 5 {
		p.produce(t, records(i, 5, 7)...)
	}
	r := startRunner(t, o, cfg)
	cl := admin(t, brokers)

	testkit.WaitFor(t, 20*time.Second, "the records after the failing one to be delivered", func() bool {
		for off := failing + 10; off < 100; off++ {
			if sink.count(RecordID("in", 0, int64(off))) == 0 {
				return false
			}
		}
		return true
	})

	// Several commit rounds and retries later, the offset is still held.
	commits := r.met.commits.Load()
	testkit.WaitFor(t, 10*time.Second, "more retries and commit rounds", func() bool {
		return attempts.Load() >= 4 && r.met.commits.Load() >= commits
	})

	held := committedOffsets(t, cl, "g", "in", 1)[0]
	if held > failing {
		t.Fatalf("committed offset %d passed the record at %d that is not stored", held, failing)
	}
	if sink.count(failID) != 0 {
		t.Fatalf("the failing record was delivered")
	}
	if got := r.Committed()[0]; got > failing {
		t.Fatalf("runner reports committed %d past %d", got, failing)
	}

	broken.Store(false)
	testkit.WaitFor(t, 10*time.Second, "the offset to reach the end after the retry", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == 100
	})

	// The offset moves once the record is stored; its delivery follows.
	testkit.WaitFor(t, 10*time.Second, "the retried record to be delivered", func() bool {
		return sink.count(failID) > 0
	})

	if sink.count(failID) != 1 {
		t.Fatalf("the retried record was delivered %d times", sink.count(failID))
	}
	t.Logf("offset held at %d while %d enqueue attempts failed; then committed to 100", held, attempts.Load())
}

// A record that cannot be mapped (no destination), or that the outbox refuses
// (a header value it cannot send), becomes a dead letter with the reason;
// nothing is skipped and the offset still reaches the end.
func TestUnmappableRecordsBecomeDeadLetters(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "dead"), sink, nil)
	cfg := testConfig(brokers, "in")
	cfg.Destination = "" // records without the header have nowhere to go

	p := newProducer(t, brokers, "in")
	p.produce(t,
		kafkago.Message{Value: []byte("ok"), Headers: []kafkago.Header{{Key: "outbox-destination", Value: []byte("dest")}, {Key: "outbox-id", Value: []byte("order-1")}, {Key: "X-Trace", Value: []byte("t1")}}},
		kafkago.Message{Value: []byte("nowhere")},
		kafkago.Message{Value: []byte("bad header"), Headers: []kafkago.Header{{Key: "outbox-destination", Value: []byte("dest")}, {Key: "X-Bad", Value: []byte("a\nb")}}},
		kafkago.Message{Value: []byte("binary key"), Key: []byte{0xff, 0x00, 0x01}, Headers: []kafkago.Header{{Key: "outbox-destination", Value: []byte("dest")}}},
	)
	r := startRunner(t, o, cfg)
	cl := admin(t, brokers)
	testkit.WaitFor(t, 10*time.Second, "the offset to pass every record", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == 4
	})

	ctx := context.Background()
	testkit.WaitFor(t, 10*time.Second, "the good records to be delivered", func() bool {
		return sink.count("order-1") == 1 && sink.count(RecordID("in", 0, 3)) == 1
	})

	sink.mu.Lock()
	if sink.body["order-1"] != "ok" {
		t.Errorf("payload %q", sink.body["order-1"])
	}
	sink.mu.Unlock()

	dead, _, err := o.List(ctx, outbox.ListOptions{State: outbox.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(dead))
	for _, ev := range dead {
		ids = append(ids, ev.ID)
		switch ev.ID {
		case RecordID("in", 0, 1):
			if !strings.Contains(ev.DeadReason, "no \"outbox-destination\" header") || string(ev.Payload) != "nowhere" {
				t.Errorf("dead letter %s: reason %q payload %q", ev.ID, ev.DeadReason, ev.Payload)
			}
		case RecordID("in", 0, 2):
			if !strings.Contains(ev.DeadReason, "refused by the outbox") || !strings.Contains(ev.DeadReason, "headers") {
				t.Errorf("dead letter %s: reason %q", ev.ID, ev.DeadReason)
			}
		}
	}
	slices.Sort(ids)
	if want := []string{RecordID("in", 0, 1), RecordID("in", 0, 2)}; !slices.Equal(ids, want) {
		t.Fatalf("dead letters %v, want %v", ids, want)
	}
	if got := r.met.dead.Load(); got != 2 {
		t.Errorf("dead counter %d", got)
	}
}

func TestMapRecord(t *testing.T) {
	m := newMapper(Config{Destination: "default", DestinationHeader: "outbox-destination", IDHeader: "outbox-id"})
	msg := kafkago.Message{Topic: "t", Partition: 2, Offset: 41, Key: []byte("k"), Value: []byte("v"),
		Headers: []kafkago.Header{{Key: "A", Value: []byte("1")}, {Key: "A", Value: []byte("2")}, {Key: "B", Value: []byte("x")}}}
	got := m.mapRecord(&msg)
	if got.dead != "" || got.ev.ID != "kafka:t:2:41" || got.ev.Key != "k" || string(got.ev.Payload) != "v" ||
		got.ev.Destination != "default" || got.ev.Headers["A"] != "1, 2" || got.ev.Headers["B"] != "x" || len(got.ev.Headers) != 2 {
		t.Fatalf("mapped %+v", got)
	}

	msg.Headers = []kafkago.Header{{Key: "outbox-id", Value: []byte("my-id")}, {Key: "outbox-destination", Value: []byte("hooks")}}
	got = m.mapRecord(&msg)
	if got.dead != "" || got.ev.ID != "my-id" || got.ev.Destination != "hooks" || len(got.ev.Headers) != 0 {
		t.Fatalf("control headers: %+v", got)
	}

	for name, hs := range map[string][]kafkago.Header{
		"empty id":         {{Key: "outbox-id", Value: nil}},
		"two ids":          {{Key: "outbox-id", Value: []byte("a")}, {Key: "outbox-id", Value: []byte("b")}},
		"control in id":    {{Key: "outbox-id", Value: []byte("a\x00b")}},
		"empty dest":       {{Key: "outbox-destination", Value: nil}},
		"two destinations": {{Key: "outbox-destination", Value: []byte("a")}, {Key: "outbox-destination", Value: []byte("b")}},
	} {
		msg.Headers = hs
		if got := m.mapRecord(&msg); got.dead == "" || !strings.HasPrefix(got.ev.ID, "kafka:") && got.ev.ID != "a" {
			t.Errorf("%s: %+v", name, got)
		}
	}

	if k := mapKey([]byte{0xff, 0xfe}); k != "base64://4=" {
		t.Errorf("binary key mapped to %q", k)
	}
	if k := mapKey([]byte("base64:x")); !strings.HasPrefix(k, "base64:YmFz") {
		t.Errorf("a key that looks encoded must be encoded too: %q", k)
	}
}

// Records read again (the group's offset was reset, as after a crash before
// a commit) are recognised by their IDs: duplicates, not delivered twice.
func TestReconsumedRecordsAreDuplicates(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "dups"), sink, nil)
	newProducer(t, brokers, "in").produce(t, records(0, 50, 5)...)
	r := startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 10*time.Second, "every record delivered", func() bool { return sink.distinct() == 50 })
	closeRunner(t, r)

	cl := admin(t, brokers)
	resp, err := cl.OffsetCommit(context.Background(), &kafkago.OffsetCommitRequest{GroupID: "g", GenerationID: -1,
		Topics: map[string][]kafkago.OffsetCommit{"in": {{Partition: 0, Offset: 0}}}})
	if err != nil || resp.Topics["in"][0].Error != nil {
		t.Fatalf("reset the group's offset: %v %+v", err, resp)
	}
	before := o.Stats().DuplicatesTotal
	r = startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 10*time.Second, "the records read again", func() bool { return o.Stats().DuplicatesTotal-before == 50 })
	testkit.WaitFor(t, 10*time.Second, "the offset back at the end", func() bool { return committedOffsets(t, cl, "g", "in", 1)[0] == 50 })
	for id, n := range sink.snapshot() {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// Records read again after the operator deleted their events (pending ones
// and a dead letter of an unmappable record) are duplicates too: dropped and
// counted, never an enqueue error that would hold the partition's offset, and
// the events stay deleted.
func TestReconsumedDeletedRecordsAreDuplicates(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	sink.action = func(*outbox.Delivery) outbox.Action { return outbox.ActionPark } // all stay pending
	o := openOutbox(t, dbPath(t, "deleted"), sink, slowSchedules)
	const n = 20
	msgs := records(0, n, 3)
	msgs = append(msgs, kafkago.Message{Value: []byte("nowhere"), Headers: []kafkago.Header{{Key: "outbox-destination", Value: nil}}})
	newProducer(t, brokers, "in").produce(t, msgs...)
	cl := admin(t, brokers)
	r := startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 10*time.Second, "every record stored and committed", func() bool {
		s := o.Stats()
		return s.Pending == n && s.Dead == 1 && committedOffsets(t, cl, "g", "in", 1)[0] == n+1
	})

	closeRunner(t, r)

	// The operator deletes half of the events and the dead letter.
	ctx := context.Background()
	var deleted []string
	for off := 0; off < n; off += 2 {
		deleted = append(deleted, RecordID("in", 0, int64(off)))
	}
	deleted = append(deleted, RecordID("in", 0, n))
	for _, id := range deleted {
		if err := o.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	resp, err := cl.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{GroupID: "g", GenerationID: -1,
		Topics: map[string][]kafkago.OffsetCommit{"in": {{Partition: 0, Offset: 0}}}})
	if err != nil || resp.Topics["in"][0].Error != nil {
		t.Fatalf("reset the group's offset: %v %+v", err, resp)
	}
	before := o.Stats().DuplicatesTotal
	r = startRunner(t, o, testConfig(brokers, "in"))
	testkit.WaitFor(t, 10*time.Second, "the records read again, all duplicates", func() bool {
		return o.Stats().DuplicatesTotal-before == n+1
	})

	testkit.WaitFor(t, 10*time.Second, "the offset back at the end", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == n+1
	})

	if got := r.met.enqueueErrors.Load(); got != 0 {
		t.Errorf("%d enqueue errors; a deleted ID must be a duplicate, not an error", got)
	}
	if got := r.met.enqueued.Load(); got != n {
		t.Errorf("ingest_enqueued_total %d, want %d (duplicates included)", got, n)
	}
	if s := o.Stats(); s.Pending != n/2 || s.Dead != 0 {
		t.Errorf("stats %+v, want %d pending and no dead letter", s, n/2)
	}
	for _, id := range deleted {
		if ev, err := o.Get(ctx, id); err != nil || ev.State != outbox.StateDeleted {
			t.Errorf("%s after it was read again: %+v, %v; want deleted", id, ev, err)
		}
	}
}
