package traceparent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// attrEvents is the attribute of an enqueue span that counts its events.
const attrEvents = attribute.Key("outbox.events")

// The start options of the enqueue spans, made once: a call with no tracer
// configured allocates as little as the no-op tracer lets it.
var enqueueSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}

// StartEnqueue starts the span name of an enqueue call of n events, and
// returns the trace context its events take when they bring none of their
// own: the span's, which is the caller's span context when no tracer
// records (a no-op span carries its parent's), and empty when ctx has none.
func StartEnqueue(ctx context.Context, tracer trace.Tracer, name string, n int) (_ context.Context, _ trace.Span, traceparent, tracestate string) {
	ctx, span := tracer.Start(ctx, name, enqueueSpanOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrEvents.Int(n))
	}
	sc := span.SpanContext()
	if !sc.IsValid() {
		return ctx, span, "", ""
	}
	return ctx, span, Format(sc), sc.TraceState().String()
}

// EndSpan ends span, with an error status when err is not nil.
func EndSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
