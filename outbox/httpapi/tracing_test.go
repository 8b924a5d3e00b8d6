package httpapi_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// An event posted with a traceparent to a receiver that answers 500, 500,
// 200 leaves one trace, the producer's: the ingest span (child of the
// producer's span), the enqueue commit (child of the ingest span), and
// three attempt spans (children of the stored context, the enqueue
// span's); each attempt's request carries a traceparent of the producer's
// trace whose parent is that attempt's span.
func TestTraceFromIngestToEveryAttempt(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })

	rc := testkit.NewReceiver(t, "webhook-id", func(_ *http.Request, _ string, n int) testkit.Reply {
		if n < 2 {
			return testkit.Reply{Status: http.StatusInternalServerError}
		}
		return testkit.Reply{Status: http.StatusOK}
	})
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "hooks", URL: rc.URL, AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink:           sink,
		TracerProvider: tp,
		Interval:       20 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := serve(t, o, sink, httpapi.Config{TracerProvider: tp})

	const producer = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	status, body := e.do(t, http.MethodPost, "/v1/events", "application/json",
		[]byte(`{"id":"traced-1","destination":"hooks","payload":{"n":1}}`),
		"traceparent", producer, "tracestate", "vendor=p")
	if status != http.StatusAccepted {
		t.Fatalf("POST: %d %v", status, body)
	}
	testkit.WaitFor(t, 10*time.Second, "three attempts, the last acknowledged", func() bool {
		return rc.Acked("traced-1") == 1
	})
	testkit.WaitFor(t, 10*time.Second, "three ended attempt spans", func() bool {
		return len(spansNamed(exp.GetSpans(), outbox.SpanDeliver)) == 3
	})

	spans := exp.GetSpans()
	wantTrace, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	producerSpan, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	one := func(name string) tracetest.SpanStub {
		t.Helper()
		got := spansNamed(spans, name)
		if len(got) != 1 {
			t.Fatalf("%d spans named %q, want 1", len(got), name)
		}
		return got[0]
	}
	ingest, enqueue := one(httpapi.SpanIngest), one(outbox.SpanEnqueue)
	for _, s := range spans {
		if s.SpanContext.TraceID() != wantTrace {
			t.Errorf("span %q is in trace %s, not the producer's", s.Name, s.SpanContext.TraceID())
		}
	}
	if ingest.Parent.SpanID() != producerSpan || !ingest.Parent.IsRemote() || ingest.SpanKind != trace.SpanKindServer {
		t.Errorf("ingest span: parent %s (remote %v), kind %v", ingest.Parent.SpanID(), ingest.Parent.IsRemote(), ingest.SpanKind)
	}
	if got := attr(ingest.Attributes, "http.response.status_code"); got.AsInt64() != http.StatusAccepted {
		t.Errorf("ingest status attribute %v", got.Emit())
	}
	if enqueue.Parent.SpanID() != ingest.SpanContext.SpanID() {
		t.Errorf("enqueue span's parent is %s, not the ingest span %s", enqueue.Parent.SpanID(), ingest.SpanContext.SpanID())
	}

	attempts := spansNamed(spans, outbox.SpanDeliver)
	reqs := rc.Requests()
	if len(reqs) != 3 {
		t.Fatalf("receiver saw %d requests, want 3", len(reqs))
	}
	wantStatus := []int64{500, 500, 200}
	wantAction := []string{"retry", "retry", "success"}
	for i, s := range attempts {
		if s.Parent.SpanID() != enqueue.SpanContext.SpanID() || !s.Parent.IsRemote() {
			t.Errorf("attempt %d: parent %s (remote %v), want the stored enqueue span %s",
				i+1, s.Parent.SpanID(), s.Parent.IsRemote(), enqueue.SpanContext.SpanID())
		}
		if got := attr(s.Attributes, "outbox.attempt").AsInt64(); got != int64(i+1) {
			t.Errorf("span %d has attempt %d", i+1, got)
		}
		if got := attr(s.Attributes, "outbox.event.id").AsString(); got != "traced-1" {
			t.Errorf("attempt %d: event id %q", i+1, got)
		}
		if got := attr(s.Attributes, "outbox.endpoint").AsString(); got != "hooks" {
			t.Errorf("attempt %d: endpoint %q", i+1, got)
		}
		if got := attr(s.Attributes, "http.response.status_code").AsInt64(); got != wantStatus[i] {
			t.Errorf("attempt %d: status %d, want %d", i+1, got, wantStatus[i])
		}
		if got := attr(s.Attributes, "outbox.action").AsString(); got != wantAction[i] {
			t.Errorf("attempt %d: action %q, want %q", i+1, got, wantAction[i])
		}
		if wantErr := i < 2; (s.Status.Code == codes.Error) != wantErr {
			t.Errorf("attempt %d: span status %v", i+1, s.Status)
		}

		// What the receiver saw on this attempt.
		sent := propagation.TraceContext{}.Extract(t.Context(), propagation.HeaderCarrier(reqs[i].Header))
		sc := trace.SpanContextFromContext(sent)
		if sc.TraceID() != wantTrace || sc.SpanID() != s.SpanContext.SpanID() || !sc.IsSampled() {
			t.Errorf("attempt %d: receiver got traceparent %q, want trace %s and the attempt span %s",
				i+1, reqs[i].Header.Get("traceparent"), wantTrace, s.SpanContext.SpanID())
		}
		if got := reqs[i].Header.Get("tracestate"); got != "vendor=p" {
			t.Errorf("attempt %d: tracestate %q, want the producer's", i+1, got)
		}
	}
}

// spansNamed returns the spans named name, in the order they ended.
func spansNamed(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of the attribute key (an invalid Value if absent).
func attr(kvs []attribute.KeyValue, key string) attribute.Value {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
