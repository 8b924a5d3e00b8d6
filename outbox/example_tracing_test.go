package outbox_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/outboxd/outbox/outbox"
)

// Config.TracerProvider traces each Enqueue call and each delivery
// attempt; the event is stored with its producer's trace context, and
// every attempt is a child of it. Here the producer's traceparent is the
// event's own, and the spans go to an in-memory exporter.
func ExampleConfig_tracerProvider() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	delivered := make(chan struct{})
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		close(delivered)
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink, TracerProvider: tp})
	if err != nil {
		log.Fatal(err)
	}
	const producer = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := o.Enqueue(context.Background(), outbox.Event{
		ID: "order-1", Destination: "orders", Payload: []byte(`{"order":1}`), TraceParent: producer,
	}); err != nil {
		log.Fatal(err)
	}
	ev, _ := o.Get(context.Background(), "order-1")
	fmt.Println("stored:", ev.TraceParent == producer)
	if err := o.Start(); err != nil {
		log.Fatal(err)
	}
	<-delivered
	_ = o.Stop(context.Background()) // the attempt span has ended by now

	// The enqueue span is a root here (the ctx had no span); the attempt
	// is in the producer's trace, a child of its span.
	for _, s := range exp.GetSpans() {
		fmt.Println(s.Name, "trace", s.SpanContext.TraceID().String() == producer[3:35],
			"parent", s.Parent.SpanID())
	}
	// Output:
	// stored: true
	// outbox.enqueue trace false parent 0000000000000000
	// outbox.deliver trace true parent 00f067aa0ba902b7
}
