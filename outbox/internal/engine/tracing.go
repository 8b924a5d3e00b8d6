package engine

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/outbox/internal/traceparent"
	"github.com/outboxd/outbox/store"
)

// SpanDeliver is the name of the span of one delivery attempt (the
// outbox's SpanDeliver).
const SpanDeliver = "outbox.deliver"

// The attributes of the attempt spans.
const (
	attrEventID  = attribute.Key("outbox.event.id")
	attrEndpoint = attribute.Key("outbox.endpoint")
	attrAttempt  = attribute.Key("outbox.attempt")
	attrAction   = attribute.Key("outbox.action")
	attrStatus   = attribute.Key("http.response.status_code")
)

// deliverSpanOpts are the start options of the attempt spans, made once: a
// call with no tracer configured allocates as little as the no-op tracer
// lets it.
var deliverSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// startAttempt starts the span of one delivery attempt: a child of the
// producer's span stored with the event (a new root when there is none).
// The Sink gets the returned context, and an HTTP sink sends the attempt
// span's context on as the request's traceparent.
func (e *Engine) startAttempt(r *store.Record) (context.Context, trace.Span) {
	ctx := e.deliverCtx
	if r.TraceParent != "" {
		if sc, ok := traceparent.Parse(r.TraceParent, r.TraceState); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, span := e.cfg.Tracer.Start(ctx, SpanDeliver, deliverSpanOpts...)
	if span.IsRecording() {
		span.SetAttributes(
			attrEventID.String(store.GroupOf(r.ID)),
			attrEndpoint.String(r.Endpoint),
			attrAttempt.Int(r.Deliveries+1),
		)
	}
	return ctx, span
}

// endAttempt records the outcome of an attempt on its span and ends it: the
// action, the status when there was a response, and an error status unless
// the event was delivered.
func endAttempt(span trace.Span, res *Result) {
	if span.IsRecording() {
		span.SetAttributes(attrAction.String(res.Action.String()))
		if res.Status != 0 {
			span.SetAttributes(attrStatus.Int(res.Status))
		}
		if res.Action != ActionSuccess {
			msg := res.Action.String()
			if res.Err != nil {
				msg += ": " + res.Err.Error()
			}
			span.SetStatus(codes.Error, msg)
		}
	}
	span.End()
}
