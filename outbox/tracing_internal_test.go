package outbox

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/store"
)

func TestParseTraceParent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		in, want string // want "" means refused
	}{
		{"00-" + tid + "-" + sid + "-01", "00-" + tid + "-" + sid + "-01"},
		{"00-" + tid + "-" + sid + "-00", "00-" + tid + "-" + sid + "-00"},
		{"00-" + tid + "-" + sid + "-03", "00-" + tid + "-" + sid + "-01"}, // unknown flags dropped
		{"01-" + tid + "-" + sid + "-01-future", "00-" + tid + "-" + sid + "-01"},
		{"01-" + tid + "-" + sid + "-01", "00-" + tid + "-" + sid + "-01"},
		{"", ""},
		{"ff-" + tid + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "-01-extra", ""},
		{"01-" + tid + "-" + sid + "-01x", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-" + sid + "-01", ""},
		{"00-00000000000000000000000000000000-" + sid + "-01", ""},
		{"00-" + tid + "-0000000000000000-01", ""},
		{"00-" + tid + "-" + sid + "-0g", ""},
		{"00_" + tid + "-" + sid + "-01", ""},
		{"00-" + tid + "-" + sid + "-1", ""},
	} {
		tp, _ := traceContext(tc.in, "")
		if tp != tc.want {
			t.Errorf("traceContext(%q) = %q, want %q", tc.in, tp, tc.want)
		}
	}
	tp, ts := traceContext("00-"+tid+"-"+sid+"-01", "a=1,b=2")
	if tp == "" || ts != "a=1,b=2" {
		t.Errorf("tracestate: %q %q", tp, ts)
	}
	if tp, ts := traceContext("00-"+tid+"-"+sid+"-01", "not a tracestate"); tp == "" || ts != "" {
		t.Errorf("malformed tracestate: %q %q, want it dropped and the traceparent kept", tp, ts)
	}
	if tp, ts := traceContext("bad", "a=1"); tp != "" || ts != "" {
		t.Errorf("tracestate without a traceparent: %q %q", tp, ts)
	}
}

// BenchmarkAttemptSpan measures what tracing adds to one delivery attempt
// of an event stored with a producer's traceparent (parse it, start the
// attempt span, record the outcome, end it), with tracing off (the
// global provider, a no-op) and with an SDK provider that samples
// nothing, interleaved in one run; "ratio" is the off time over the
// unsampled time.
//
//	go test -run '^$' -bench AttemptSpan ./outbox/
func BenchmarkAttemptSpan(b *testing.B) {
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = unsampled.Shutdown(context.Background()) }()
	r := &store.Record{ID: "x", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	d := &Delivery{ID: "x", Endpoint: "e", Attempt: 1}
	res := Result{Action: ActionSuccess, Status: 200}
	timed := func(tp trace.TracerProvider, n int) time.Duration {
		e := &engine{o: &Outbox{tracer: tp.Tracer(TracerName)}, deliverCtx: context.Background()}
		t0 := time.Now()
		for range n {
			_, span := e.startAttempt(r, d)
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
