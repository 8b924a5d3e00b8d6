package httpsink

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// injectTraceContext sets the W3C traceparent (and tracestate) of the span
// in ctx on h: the outbox's delivery-attempt span, so that the receiver's
// trace continues the producer's. It replaces an event's or endpoint's
// header of the same name, and sets nothing when ctx holds no valid span
// context (then such a header goes as it is).
func injectTraceContext(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	h.Del("Tracestate") // an event's would not belong to the new traceparent
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}
