package outbox_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/internal/engine"
)

const (
	producerTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	callerTP   = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// remoteCtx returns a context holding the span context of a traceparent,
// as a propagator's Extract leaves it.
func remoteCtx(t *testing.T, traceparent string) context.Context {
	t.Helper()
	tid, err1 := trace.TraceIDFromHex(traceparent[3:35])
	sid, err2 := trace.SpanIDFromHex(traceparent[36:52])
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// With no tracer configured, an event keeps its own valid traceparent,
// takes the caller's span context otherwise, and has none without either;
// a malformed traceparent is ignored, never refused. The trace context is
// not content: the same event from another trace is a duplicate.
func TestEnqueueTraceContext(t *testing.T) {
	o, _ := open(t, testConfig(sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionRetry}
	})))
	ctx := remoteCtx(t, callerTP)
	later := time.Now().Add(time.Hour) // nothing is delivered meanwhile
	ev := func(id, tp, ts string) outbox.Event {
		return outbox.Event{ID: id, Destination: "svc", DeliverAt: later, TraceParent: tp, TraceState: ts}
	}
	if _, err := o.Enqueue(ctx,
		ev("own", producerTP, "vendor=x"),
		ev("caller", "", ""),
		ev("malformed", "00-nonsense", "vendor=x"),
		ev("badstate", producerTP, "=="),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Enqueue(context.Background(), ev("none", "", ""), ev("none-malformed", "junk", "")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][2]string{
		"own":            {producerTP, "vendor=x"},
		"caller":         {callerTP, ""},
		"malformed":      {callerTP, ""},
		"badstate":       {producerTP, ""},
		"none":           {"", ""},
		"none-malformed": {"", ""},
	} {
		got, err := o.Get(context.Background(), id)
		if err != nil || got.TraceParent != want[0] || got.TraceState != want[1] {
			t.Errorf("%s: %q %q, %v; want %q %q", id, got.TraceParent, got.TraceState, err, want[0], want[1])
		}
	}
	before := o.Stats().DuplicatesTotal
	if _, err := o.Enqueue(context.Background(), ev("own", callerTP, "")); err != nil {
		t.Fatalf("re-enqueue from another trace: %v", err)
	}
	if o.Stats().DuplicatesTotal != before+1 {
		t.Error("the re-enqueue was not a duplicate")
	}

	// Update's enqueues take its ctx's span context too.
	if err := o.Update(ctx, func(tx *outbox.Tx) error {
		_, err := tx.Enqueue(ev("in-tx", "", ""))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := o.Get(context.Background(), "in-tx"); err != nil || got.TraceParent != callerTP {
		t.Errorf("in-tx: %q, %v", got.TraceParent, err)
	}
}

// Each attempt runs in a span that is a child of the stored context, and
// the Sink gets its context; without a tracer the Sink gets the stored
// context itself, which an HTTP sink sends on.
func TestAttemptSpans(t *testing.T) {
	for _, traced := range []bool{false, true} {
		exp := tracetest.NewInMemoryExporter()
		got := make(chan trace.SpanContext, 3)
		sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
			got <- trace.SpanContextFromContext(ctx)
			if d.Attempt < 2 {
				return outbox.Result{Action: outbox.ActionRetry, Status: 503}
			}
			return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
		})
		c := testConfig(sink)
		if traced {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			c.TracerProvider = tp
		}
		o, _ := open(t, c)
		if _, err := o.Enqueue(context.Background(), outbox.Event{ID: "e", Destination: "svc", TraceParent: producerTP}); err != nil {
			t.Fatal(err)
		}
		if err := o.Start(); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "two attempts", func() bool { return len(got) == 2 })
		want := remoteCtx(t, producerTP)
		wantSC := trace.SpanContextFromContext(want)
		for i := range 2 {
			sc := <-got
			if sc.TraceID() != wantSC.TraceID() {
				t.Fatalf("traced %v, attempt %d: trace %s, want the producer's", traced, i+1, sc.TraceID())
			}
			if traced == (sc.SpanID() == wantSC.SpanID()) {
				t.Errorf("traced %v, attempt %d: span %s (producer's %s)", traced, i+1, sc.SpanID(), wantSC.SpanID())
			}
		}
		if traced {
			testkit.WaitFor(t, 10*time.Second, "two attempt spans", func() bool { return len(exp.GetSpans()) >= 2 })
			for _, s := range exp.GetSpans() {
				if s.Name == outbox.SpanDeliver && s.Parent.SpanID() != wantSC.SpanID() {
					t.Errorf("attempt span's parent %s, want the producer's %s", s.Parent.SpanID(), wantSC.SpanID())
				}
			}
		}
	}
}

// The trace context goes with the event through the changelog's wire
// encoding and a restore, as its other fields do.
func TestTraceContextThroughChangelogRestore(t *testing.T) {
	ctx := context.Background()
	o, _ := open(t, testConfig(nopSink))
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "t", Destination: "d", TraceParent: producerTP, TraceState: "vendor=x"}); err != nil {
		t.Fatal(err)
	}
	entries, err := o.Changelog().Entries(1, 0)
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %v, %v", entries, err)
	}
	b, err := entries[0].MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := outbox.DecodeChangelogEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := open(t, testConfig(nopSink))
	if err := fresh.Restore(ctx, []outbox.ChangelogEntry{shipped}); err != nil {
		t.Fatal(err)
	}
	if got, err := fresh.Get(ctx, "t"); err != nil || got.TraceParent != producerTP || got.TraceState != "vendor=x" {
		t.Errorf("restored: %q %q, %v", got.TraceParent, got.TraceState, err)
	}
}

// The engine starts the attempt spans: their name is the outbox's
// SpanDeliver.
func TestSpanDeliverIsTheEngines(t *testing.T) {
	if outbox.SpanDeliver != engine.SpanDeliver {
		t.Fatalf("outbox.SpanDeliver %q, the engine names its spans %q", outbox.SpanDeliver, engine.SpanDeliver)
	}
}
