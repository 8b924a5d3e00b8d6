package kafka

import (
	"context"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
)

const testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The traceparent and tracestate headers map to the event's trace context,
// not to its headers; a malformed traceparent does not make the record
// dead (the outbox ignores it).
func TestMapRecordTraceContext(t *testing.T) {
	m := newMapper(Config{Destination: "d", DestinationHeader: "outbox-destination", IDHeader: "outbox-id",
		DeliverAtHeader: "outbox-deliver-at"})
	msg := kafkago.Message{Topic: "t", Offset: 1, Headers: []kafkago.Header{
		{Key: "traceparent", Value: []byte(testTraceParent)},
		{Key: "tracestate", Value: []byte("vendor=k")},
		{Key: "x-other", Value: []byte("1")},
	}}
	got := m.mapRecord(&msg)
	if got.dead != "" || got.ev.TraceParent != testTraceParent || got.ev.TraceState != "vendor=k" ||
		len(got.ev.Headers) != 1 || got.ev.Headers["x-other"] != "1" {
		t.Fatalf("mapped %+v", got)
	}
	msg.Headers = []kafkago.Header{{Key: "traceparent", Value: []byte("not-a-traceparent")}}
	if got := m.mapRecord(&msg); got.dead != "" || len(got.ev.Headers) != 0 {
		t.Fatalf("malformed traceparent: %+v, want a deliverable event without it as a header", got)
	}
}

// A record's traceparent is stored with the event it becomes; a malformed
// one is not stored, and the event is pending all the same.
func TestIngestStoresTraceContext(t *testing.T) {
	c := newCluster(t, kfakeSeed(1, "in")...)
	brokers := c.ListenAddrs()
	sink := newRecorder("sink")
	o := openOutbox(t, dbPath(t, "traced"), sink, nil)
	p := newProducer(t, brokers, "in")
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339) // not delivered during the test
	p.produce(t,
		kafkago.Message{Value: []byte("a"), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("traced")},
			{Key: "outbox-deliver-at", Value: []byte(at)},
			{Key: "traceparent", Value: []byte(testTraceParent)}, {Key: "tracestate", Value: []byte("vendor=k")}}},
		kafkago.Message{Value: []byte("b"), Headers: []kafkago.Header{{Key: "outbox-id", Value: []byte("bad-trace")},
			{Key: "outbox-deliver-at", Value: []byte(at)},
			{Key: "traceparent", Value: []byte("00-00000000000000000000000000000000-00f067aa0ba902b7-01")}}},
	)
	startRunner(t, o, testConfig(brokers, "in"))
	cl := admin(t, brokers)
	testkit.WaitFor(t, 10*time.Second, "the offset to pass every record", func() bool {
		return committedOffsets(t, cl, "g", "in", 1)[0] == 2
	})
	ctx := context.Background()
	if ev, err := o.Get(ctx, "traced"); err != nil || ev.TraceParent != testTraceParent || ev.TraceState != "vendor=k" {
		t.Errorf("traced: %+v, %v", ev, err)
	}
	if ev, err := o.Get(ctx, "bad-trace"); err != nil || ev.TraceParent != "" || ev.Headers["traceparent"] != "" {
		t.Errorf("bad-trace: %+v, %v; want pending without a trace context", ev, err)
	}
}
