package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// BenchmarkDrainTracing delivers 100,000 pending events, each stored with
// its producer's traceparent, through httpsink to a local receiver that
// answers 200 at once, at concurrency 64, with tracing off (the default:
// the global provider, a no-op) and with an SDK provider that samples
// nothing (sdktrace.NeverSample: every attempt still starts a span,
// derives its context and sends it as the request's traceparent). The
// two are interleaved in 6 rounds of 20,000 each, alternating which goes
// first; "ratio" is the unsampled rate over the off rate, "cpu-ratio" the
// off process CPU time per event over the unsampled one.
//
//	go test -run '^$' -bench DrainTracing -benchtime 1x ./outbox/
func BenchmarkDrainTracing(b *testing.B) {
	const conc, rounds, per = 64, 6, 20_000
	srv := okServer(b)
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	b.Cleanup(func() { _ = unsampled.Shutdown(context.Background()) })
	// OUTBOX_BENCH_NOSYNC=1 commits without fsync: the rate is then bound
	// by CPU, not by the disk's variance, which on a shared machine can
	// drown a difference of a few percent.
	noSync := os.Getenv("OUTBOX_BENCH_NOSYNC") == "1"
	run := func(tp trace.TracerProvider) (time.Duration, time.Duration) {
		sink, err := httpsink.New(httpsink.Config{PoolSize: conc,
			Endpoints: []httpsink.Endpoint{{Name: "hooks", URL: srv.URL + "/hook", AllowPrivate: true}}})
		if err != nil {
			b.Fatal(err)
		}
		defer sink.Close()
		path := filepath.Join(b.TempDir(), "drain.db")
		fillTraced(b, path, per, "hooks")
		cfg := outbox.Config{Sink: sink, Concurrency: conc, TracerProvider: tp}
		cfg.NoSync = noSync
		return drainTimed(b, path, cfg, per)
	}
	for b.Loop() {
		var offWall, onWall, offCPU, onCPU time.Duration
		for i := range rounds {
			// Alternate which goes first, so that neither always runs on
			// the disk the other has just written to.
			for k := range 2 {
				if (i+k)%2 == 0 {
					w, c := run(nil)
					offWall, offCPU = offWall+w, offCPU+c
				} else {
					w, c := run(unsampled)
					onWall, onCPU = onWall+w, onCPU+c
				}
			}
		}
		n := float64(rounds * per)
		b.ReportMetric(n/offWall.Seconds(), "off-events/s")
		b.ReportMetric(n/onWall.Seconds(), "unsampled-events/s")
		b.ReportMetric(offWall.Seconds()/onWall.Seconds(), "ratio")
		b.ReportMetric(float64(offCPU.Microseconds())/n, "off-cpu-µs/event")
		b.ReportMetric(float64(onCPU.Microseconds())/n, "unsampled-cpu-µs/event")
		b.ReportMetric(offCPU.Seconds()/onCPU.Seconds(), "cpu-ratio")
	}
}

// fillTraced stores n pending events for the endpoint directly, due now,
// each with a producer's traceparent.
func fillTraced(b *testing.B, path string, n int, endpoint string) {
	j := 0
	fillRecords(b, path, n, func(r *store.Record) {
		r.Destination, r.Endpoint = endpoint, endpoint
		r.TraceParent = fmt.Sprintf("00-4bf92f3577b34da6a3ce929d%06x-00f067aa0ba902b7-01", j)
		j++
	})
}
