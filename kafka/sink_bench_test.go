package kafka

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// BenchmarkSinkDrain drains an outbox of 100,000 pending events (200-byte
// payloads, 1,000 keys, unordered, fsync on, the outbox's defaults) to one
// topic of three partitions through a Sink. In the same iteration it
// measures two baselines: the Sink's Producer producing the same records
// directly, from as many goroutines as the outbox has delivery workers
// (Config.Concurrency), one record per call as the Sink's deliveries are;
// and the outbox draining the same events into a sink that does nothing
// (the store's and the engine's own ceiling). It reports the three rates,
// "ratio" (drain / Producer) and "of-engine" (drain / nothing-sink drain).
//
//	go test -run '^$' -bench SinkDrain -benchtime 3x ./kafka/
func BenchmarkSinkDrain(b *testing.B) {
	const n = 100_000
	c := newCluster(b, kfakeSeed(3, "base", "drain")...)
	payload := bytes.Repeat([]byte("x"), 200)
	var producerSecs, drainSecs, nopSecs float64
	for i := range b.N {
		sink, err := NewSink(SinkConfig{Kafka: Config{Brokers: c.ListenAddrs()}, Topics: map[string]string{"drain": "drain", "base": "base"}})
		if err != nil {
			b.Fatal(err)
		}
		events := make([]outbox.Event, n)
		deliveries := make([]*outbox.Delivery, n)
		for j := range n {
			events[j] = outbox.Event{ID: fmt.Sprintf("ev-%d-%d", i, j), Key: fmt.Sprint("k", j%1000), Destination: "drain", Payload: payload}
			deliveries[j] = &outbox.Delivery{ID: events[j].ID, Key: events[j].Key, Endpoint: "base", Payload: payload}
		}
		start := time.Now()
		produceConcurrently(b, sink, deliveries, outbox.DefaultConcurrency)
		producerSecs += time.Since(start).Seconds()
		nopSecs += drainOutbox(b, fmt.Sprint("nop-", i), nopSink{}, events)
		drainSecs += drainOutbox(b, fmt.Sprint("drain-", i), sink, events)
		_ = sink.Close()
	}
	total := float64(n * b.N)
	b.ReportMetric(total/producerSecs, "producer-records/s")
	b.ReportMetric(total/nopSecs, "nothing-sink-events/s")
	b.ReportMetric(total/drainSecs, "drained-events/s")
	b.ReportMetric(producerSecs/drainSecs, "ratio")
	b.ReportMetric(nopSecs/drainSecs, "of-engine")
}

// drainOutbox enqueues events into a new outbox delivering to sink, not
// started, then starts it and returns the seconds it took to deliver them
// all.
func drainOutbox(b *testing.B, name string, sink outbox.Sink, events []outbox.Event) float64 {
	o, err := outbox.Open(dbPath(b, name), outbox.Config{Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	for k := 0; k < len(events); k += 1000 {
		if _, err := o.Enqueue(context.Background(), events[k:min(k+1000, len(events))]...); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	if err := o.Start(); err != nil {
		b.Fatal(err)
	}
	pollUntil(func() bool { return o.Stats().Pending == 0 })
	secs := time.Since(start).Seconds()
	if err := o.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	return secs
}

// produceConcurrently produces the deliveries' records through the
// Sink's Producer from workers goroutines, one record per call, as the
// Sink's Deliver does.
func produceConcurrently(b *testing.B, s *Sink, ds []*outbox.Delivery, workers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(ds) {
					return
				}
				msg, err := sinkRecord(context.Background(), ds[k])
				if err != nil {
					b.Error(err)
					return
				}
				if pe := s.p.send(context.Background(), "base", []kafkago.Message{msg}); pe != nil {
					b.Error(pe)
					return
				}
			}
		})
	}
	wg.Wait()
}
