package kafka

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/outbox"
)

// BenchmarkProduce compares the Producer with kafka-go's Writer writing the
// same records (what the Producer makes of 100 keyed events: key, ID and
// destination headers, a 60-byte payload; the same KeyBalancer, acks=all,
// the Writer with a 1ms BatchTimeout) from 64 concurrent callers to one
// kfake broker (file-backed log) in this process, alternating, twice each. The Producer's
// events/s over the Writer's is the cost of its way of producing (a UUIDv7
// per event, one request per partition per call, calls that queue
// meanwhile sharing the next one) without HTTP:
//
//	go test -run '^$' -bench Produce -benchtime 2000x ./kafka/
func BenchmarkProduce(b *testing.B) {
	const parts, perCall, callers = 6, 100, 64
	// A file-backed log (not fsynced): kfake's in-memory one copies itself
	// whole as it doubles, slowing each run more than the one before.
	c := newCluster(b, append(kfakeSeed(parts, "in"), kfake.DataDir(b.TempDir()))...)
	p := newTestProducer(b, c.ListenAddrs(), "in", func(cfg *Config) { cfg.ProduceTimeout = time.Minute })
	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	w := &kafkago.Writer{Addr: kafkago.TCP(c.ListenAddrs()...), Topic: "in", Transport: tr,
		Balancer: KeyBalancer{}, RequiredAcks: kafkago.RequireAll,
		BatchSize: 1000, BatchBytes: 1 << 20, BatchTimeout: time.Millisecond}
	defer w.Close()
	payload := []byte(`{"order":1,"status":"paid","total":"129.90","currency":"EUR"}`)
	m := newMapper(testConfig(nil, "in").WithDefaults())
	var seq atomic.Int64
	events := func() []outbox.Event {
		evs := make([]outbox.Event, perCall)
		for i := range evs {
			evs[i] = outbox.Event{Key: fmt.Sprintf("customer-%d", i), Destination: "sink", Payload: payload}
		}
		return evs
	}
	run := func(b *testing.B, call func() error) {
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		began := time.Now()
		for range callers {
			wg.Go(func() {
				for next.Add(1) <= int64(b.N) {
					if err := call(); err != nil {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(began)
		b.StopTimer()
		if n := failed.Load(); n > 0 {
			b.Fatalf("%d of %d calls failed", n, b.N)
		}
		b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "events/s")
	}
	for round := range 2 {
		b.Run(fmt.Sprintf("writer/round%d", round), func(b *testing.B) {
			run(b, func() error {
				evs := events()
				msgs := make([]kafkago.Message, len(evs))
				for i := range evs {
					evs[i].ID = fmt.Sprintf("writer-%012d", seq.Add(1))
					msgs[i], _ = m.record(i, &evs[i])
				}
				return w.WriteMessages(context.Background(), msgs...)
			})
		})
		b.Run(fmt.Sprintf("producer/round%d", round), func(b *testing.B) {
			run(b, func() error {
				_, err := p.Produce(context.Background(), events()...)
				return err
			})
		})
	}
}
