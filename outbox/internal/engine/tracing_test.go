package engine

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/store"
)

// tracerName is the outbox's TracerName.
const tracerName = "github.com/outboxd/outbox/outbox"

// BenchmarkAttemptSpan measures what tracing adds to one delivery attempt
// of an event stored with a producer's traceparent (parse it, start the
// attempt span, record the outcome, end it), with tracing off (the
// global provider, a no-op) and with an SDK provider that samples
// nothing, interleaved in one run; "ratio" is the off time over the
// unsampled time.
//
//	go test -run '^$' -bench AttemptSpan ./outbox/internal/engine/
func BenchmarkAttemptSpan(b *testing.B) {
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = unsampled.Shutdown(context.Background()) }()
	r := &store.Record{ID: "x", Endpoint: "e", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	res := Result{Action: ActionSuccess, Status: 200}
	timed := func(tp trace.TracerProvider, n int) time.Duration {
		e := &Engine{cfg: Config{Tracer: tp.Tracer(tracerName)}, deliverCtx: context.Background()}
		t0 := time.Now()
		for range n {
			_, span := e.startAttempt(r)
			endAttempt(span, &res)
		}
		return time.Since(t0)
	}
	const n = 100_000
	var off, on time.Duration
	for b.Loop() {
		off += timed(otel.GetTracerProvider(), n)
		on += timed(unsampled, n)
	}
	b.ReportMetric(float64(off.Nanoseconds())/float64(b.N*n), "off-ns/attempt")
	b.ReportMetric(float64(on.Nanoseconds())/float64(b.N*n), "unsampled-ns/attempt")
	b.ReportMetric(off.Seconds()/on.Seconds(), "ratio")
}
