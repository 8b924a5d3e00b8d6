package outbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// fanOutEndpoints are the five subscribers of the fan-out benchmarks.
var fanOutEndpoints = []string{"e1", "e2", "e3", "e4", "e5"}

// fanOutSink returns an httpsink with the five endpoints, each at its own
// path of the local server at url.
func fanOutSink(b *testing.B, url string) *httpsink.Sink {
	var eps []httpsink.Endpoint
	for _, name := range fanOutEndpoints {
		eps = append(eps, httpsink.Endpoint{Name: name, URL: url + "/" + name, AllowPrivate: true})
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		b.Fatal(err)
	}
	return sink
}

// fanOutSubs subscribes the five endpoints to "order.paid".
func fanOutSubs() []outbox.Subscription {
	var subs []outbox.Subscription
	for _, name := range fanOutEndpoints {
		subs = append(subs, outbox.Subscription{Endpoint: name, Topics: []string{"order.paid"}})
	}
	return subs
}

// BenchmarkFanOutEnqueue compares, in one run, an Enqueue of one event on a
// topic with five subscribers (five deliveries) with an Enqueue of five
// single-destination events, one to each of the same endpoints, in one
// call: both store five records in one durable commit (fsync). One caller
// makes the two kinds of call in turn on one outbox, so that both see the
// same disk (it is shared, and its fsyncs vary by far more than the
// difference measured); each call is timed. ratio is the five events' total
// time over the fan-out's: 1.0 or more means the fan-out costs no more than
// enqueueing its deliveries as events of their own.
func BenchmarkFanOutEnqueue(b *testing.B) {
	const calls = 2000 // of each kind
	srv := okServer(b)
	sink := fanOutSink(b, srv.URL)
	defer sink.Close()
	payload := []byte(`{"order":7,"amount":"12.50"}`)
	for b.Loop() {
		o, err := outbox.Open(filepath.Join(b.TempDir(), "enqueue.db"), outbox.Config{Sink: sink, Subscriptions: fanOutSubs()})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		evs := make([]outbox.Event, len(fanOutEndpoints))
		var took [2][]time.Duration // single, fan-out
		for i := range 2 * calls {
			fan := i%2 == 1
			t0 := time.Now()
			if fan {
				_, err = o.Enqueue(ctx, outbox.Event{Topic: "order.paid", Payload: payload})
			} else {
				for k, ep := range fanOutEndpoints {
					evs[k] = outbox.Event{Destination: ep, Payload: payload}
				}
				_, err = o.Enqueue(ctx, evs...)
			}
			if err != nil {
				b.Fatal(err)
			}
			took[i%2] = append(took[i%2], time.Since(t0))
		}
		if st := o.Stats(); st.Pending != 2*calls*len(fanOutEndpoints) {
			b.Fatalf("%d pending deliveries, want %d", st.Pending, 2*calls*len(fanOutEndpoints))
		}
		if err := o.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		var sum [2]time.Duration
		for k := range took {
			for _, d := range took[k] {
				sum[k] += d
			}
			slices.Sort(took[k])
		}
		b.ReportMetric(calls/sum[1].Seconds(), "fanout-calls/s")
		b.ReportMetric(calls/sum[0].Seconds(), "five-events-calls/s")
		b.ReportMetric(float64(took[1][calls/2].Microseconds()), "fanout-p50-µs")
		b.ReportMetric(float64(took[0][calls/2].Microseconds()), "five-events-p50-µs")
		b.ReportMetric(sum[0].Seconds()/sum[1].Seconds(), "ratio")
	}
}

// BenchmarkFanOutDelivery compares, in one run, the delivery of events on a
// topic with five subscribers with the delivery of as many
// single-destination events spread over the same five endpoints: 4,000
// events × 5 deliveries against 20,000 events per round, through httpsink
// to a local receiver that answers 200 at once, at concurrency 64, outcomes
// committed durably. The two are interleaved in 5 rounds (alternating
// which goes first). cpu-ratio compares the process CPU time per delivery,
// steadier than the wall clock on a shared machine; ratio is the
// single-destination time over the fan-out's (1.0: the same throughput).
func BenchmarkFanOutDelivery(b *testing.B) {
	const events, rounds = 4000, 5
	n := events * len(fanOutEndpoints)
	srv := okServer(b)
	drain := func(fan bool) (wall, cpu time.Duration) {
		path := filepath.Join(b.TempDir(), "deliver.db")
		i := 0
		fillRecords(b, path, n, func(r *store.Record) {
			ep := fanOutEndpoints[i%len(fanOutEndpoints)]
			if fan {
				r.ID = fmt.Sprintf("ev-%08d%s%s", i/len(fanOutEndpoints), store.GroupSep, ep)
				r.Topic = "order.paid"
			}
			r.Destination, r.Endpoint = ep, ep
			i++
		})
		sink := fanOutSink(b, srv.URL)
		defer sink.Close()
		return drainTimed(b, path, outbox.Config{Sink: sink, Concurrency: 64, Subscriptions: fanOutSubs()}, n)
	}
	for b.Loop() {
		var single, fan, singleCPU, fanCPU time.Duration
		add := func(isFan bool) {
			w, c := drain(isFan)
			if isFan {
				fan, fanCPU = fan+w, fanCPU+c
			} else {
				single, singleCPU = single+w, singleCPU+c
			}
		}
		for r := range rounds {
			add(r%2 == 1)
			add(r%2 == 0)
		}
		total := float64(n * rounds)
		b.ReportMetric(total/fan.Seconds(), "fanout-deliveries/s")
		b.ReportMetric(total/single.Seconds(), "single-deliveries/s")
		b.ReportMetric(single.Seconds()/fan.Seconds(), "ratio")
		b.ReportMetric(float64(fanCPU.Microseconds())/total, "fanout-cpu-µs/delivery")
		b.ReportMetric(float64(singleCPU.Microseconds())/total, "single-cpu-µs/delivery")
		b.ReportMetric(singleCPU.Seconds()/fanCPU.Seconds(), "cpu-ratio")
	}
}
