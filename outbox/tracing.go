package outbox

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/store"
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
	attrEvents   = attribute.Key("outbox.events")
	attrEventID  = attribute.Key("outbox.event.id")
	attrEndpoint = attribute.Key("outbox.endpoint")
	attrAttempt  = attribute.Key("outbox.attempt")
	attrAction   = attribute.Key("outbox.action")
	attrStatus   = attribute.Key("http.response.status_code")
)

// The start options of the spans, made once: a call with no tracer
// configured allocates as little as the no-op tracer lets it.
var (
	enqueueSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	deliverSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

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
	return ctx, span, formatTraceParent(sc), sc.TraceState().String()
}

// endSpan ends span, with an error status when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startAttempt starts the span of one delivery attempt: a child of the
// producer's span stored with the event (a new root when there is none).
// The Sink gets the returned context, and an HTTP sink sends the attempt
// span's context on as the request's traceparent.
func (e *engine) startAttempt(r *store.Record, d *Delivery) (context.Context, trace.Span) {
	ctx := e.deliverCtx
	if r.TraceParent != "" {
		if sc, ok := parseTraceParent(r.TraceParent, r.TraceState); ok {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, span := e.o.tracer.Start(ctx, SpanDeliver, deliverSpanOpts...)
	if span.IsRecording() {
		span.SetAttributes(
			attrEventID.String(d.ID),
			attrEndpoint.String(d.Endpoint),
			attrAttempt.Int(d.Attempt),
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

// traceContext returns the trace context a record keeps for the given
// traceparent and tracestate: the traceparent in its version-00 form and
// the tracestate, or two empty strings when the traceparent is malformed
// (an event is never refused for its tracing header). A malformed
// tracestate is dropped and the traceparent kept.
func traceContext(traceparent, tracestate string) (string, string) {
	if traceparent == "" {
		return "", ""
	}
	sc, ok := parseTraceParent(traceparent, tracestate)
	if !ok {
		return "", ""
	}
	return formatTraceParent(sc), sc.TraceState().String()
}

// traceParentLen is the length of a version-00 traceparent.
const traceParentLen = 55

// parseTraceParent parses a W3C traceparent (and tracestate, dropped when
// malformed) into a remote span context, following the Trace Context
// specification: lower-case hex, version ff invalid, version 00 exactly 55
// characters, later versions possibly longer, trace and parent IDs not all
// zero. Of the flags only "sampled" is kept, as the W3C propagator does.
func parseTraceParent(s, tracestate string) (trace.SpanContext, bool) {
	if len(s) < traceParentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	if !lowerHex(s[:2]) || s[:2] == "ff" {
		return trace.SpanContext{}, false
	}
	if len(s) > traceParentLen && (s[:2] == "00" || s[traceParentLen] != '-') {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	if !lowerHex(s[3:35]) || !lowerHex(s[36:52]) || !lowerHex(s[53:55]) {
		return trace.SpanContext{}, false
	}
	_, _ = hex.Decode(cfg.TraceID[:], []byte(s[3:35]))
	_, _ = hex.Decode(cfg.SpanID[:], []byte(s[36:52]))
	_, _ = hex.Decode(flags[:], []byte(s[53:55]))
	if !cfg.TraceID.IsValid() || !cfg.SpanID.IsValid() {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	if tracestate != "" {
		if ts, err := trace.ParseTraceState(tracestate); err == nil {
			cfg.TraceState = ts
		}
	}
	return trace.NewSpanContext(cfg), true
}

// formatTraceParent formats sc as a version-00 traceparent.
func formatTraceParent(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [traceParentLen]byte
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b[:])
}

// lowerHex reports whether s is all lower-case hex digits.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validTraceParent reports whether s is a well-formed W3C traceparent.
func validTraceParent(s string) bool {
	_, ok := parseTraceParent(s, "")
	return ok
}

// callerTrace returns the trace context of ctx's span, empty when it has
// none.
func callerTrace(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return formatTraceParent(sc), sc.TraceState().String()
}
