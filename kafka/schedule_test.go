package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// The not-before header maps to Event.DeliverAt; a value that is not an
// RFC 3339 time, or a second such header, makes the record a dead letter as
// other bad control headers do.
func TestMapRecordDeliverAt(t *testing.T) {
	m := newMapper(Config{Destination: "d", DestinationHeader: "outbox-destination", IDHeader: "outbox-id",
		DeliverAtHeader: "outbox-deliver-at"})
	msg := kafkago.Message{Topic: "t", Offset: 1, Headers: []kafkago.Header{{Key: "outbox-deliver-at", Value: []byte("2026-01-02T15:04:05+01:00")}}}
	got := m.mapRecord(&msg)
	if want := time.Date(2026, 1, 2, 14, 4, 5, 0, time.UTC); got.dead != "" || !got.ev.DeliverAt.Equal(want) ||
		got.ev.DeliverAt.Location() != time.UTC || len(got.ev.Headers) != 0 {
		t.Fatalf("mapped %+v, want DeliverAt %v and no headers", got, want)
	}
	for name, hs := range map[string][]kafkago.Header{
		"not a time": {{Key: "outbox-deliver-at", Value: []byte("tomorrow")}},
		"empty":      {{Key: "outbox-deliver-at", Value: nil}},
		"twice":      {{Key: "outbox-deliver-at", Value: []byte("2026-01-02T15:04:05Z")}, {Key: "outbox-deliver-at", Value: []byte("2026-01-02T15:04:05Z")}},
	} {
		msg.Headers = hs
		if got := m.mapRecord(&msg); !strings.Contains(got.dead, "outbox-deliver-at") {
			t.Errorf("%s: %+v, want a dead letter naming the header", name, got)
		}
	}
}

// Ingested records with the header are stored scheduled; one beyond the
// outbox's horizon is kept as a dead letter saying so.
func TestIngestScheduledRecords(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "sched"), sink, nil)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	far := time.Now().Add(40 * 24 * time.Hour).UTC().Format(time.RFC3339)
	p := newProducer(t, brokers, "in")
	p.produce(t,
		kafkago.Message{Value: []byte("later"), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("later")}, {Key: "outbox-deliver-at", Value: []byte(at.Format(time.RFC3339))}}},
		kafkago.Message{Value: []byte("far"), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("far")}, {Key: "outbox-deliver-at", Value: []byte(far)}}},
		kafkago.Message{Value: []byte("bad"), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("bad")}, {Key: "outbox-deliver-at", Value: []byte("soon")}}},
	)
	startRunner(t, o, testConfig(brokers, "in"))
	cl := admin(t, brokers)
	testkit.WaitFor(t, 10*time.Second, "the offset to pass every record", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == 3
	})
	ctx := context.Background()
	if ev, err := o.Get(ctx, "later"); err != nil || ev.State != outbox.StatePending || !ev.DeliverAt.Equal(at) || !ev.NextAttemptAt.Equal(at) {
		t.Errorf("later: %+v, %v; want pending until %v", ev, err, at)
	}
	if ev, err := o.Get(ctx, "far"); err != nil || ev.State != outbox.StateDead || !strings.Contains(ev.DeadReason, "deliver_at") {
		t.Errorf("far: %+v, %v; want dead, refused for deliver_at", ev, err)
	}
	if ev, err := o.Get(ctx, "bad"); err != nil || ev.State != outbox.StateDead || !strings.Contains(ev.DeadReason, "outbox-deliver-at") {
		t.Errorf("bad: %+v, %v; want dead for its header", ev, err)
	}
	if n := sink.count("later"); n != 0 {
		t.Errorf("later was delivered %d times before its time", n)
	}
}
