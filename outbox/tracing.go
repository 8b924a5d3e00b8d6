package outbox

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/outbox/internal/traceparent"
)

// TracerName is the instrumentation scope of the outbox's spans.
const TracerName = "github.com/outboxd/outbox/outbox"

// The names of the outbox's spans.
const (
	// SpanEnqueue covers one Enqueue or Ingest call: validation and the
	// wait for the durable (group) commit of its events.
	SpanEnqueue = "outbox.enqueue"
	// SpanDeliver covers one delivery attempt: the Sink's Deliver call.
	SpanDeliver = "outbox.deliver"
)

// The attributes of the outbox's spans.
const (
	attrEvents = attribute.Key("outbox.events")
)

// The start options of the enqueue spans, made once: a call with no tracer
// configured allocates as little as the no-op tracer lets it.
var enqueueSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// startEnqueue starts the span of an Enqueue or Ingest call of n events,
// and returns the trace context its events take when they bring none of
// their own: the span's, which is the caller's span context when no tracer
// records (a no-op span carries its parent's), and empty when ctx has none.
func (o *Outbox) startEnqueue(ctx context.Context, n int) (context.Context, trace.Span, string, string) {
	ctx, span := o.tracer.Start(ctx, SpanEnqueue, enqueueSpanOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrEvents.Int(n))
	}
	sc := span.SpanContext()
	if !sc.IsValid() {
		return ctx, span, "", ""
	}
	return ctx, span, traceparent.Format(sc), sc.TraceState().String()
}

// endSpan ends span, with an error status when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
