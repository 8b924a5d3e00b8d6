package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the handler's spans.
const TracerName = "github.com/outboxd/outbox/outbox/httpapi"

// SpanIngest is the name of the span of one POST /v1/events.
const SpanIngest = "POST /v1/events"

// ingestSpanOpts are the start options of the ingest span, made once.
var ingestSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// traceIngest wraps the ingest handler in its span: a server span, child
// of the request's W3C traceparent (and tracestate) when it has a valid
// one, whose context the request's events are stored with (Enqueue takes
// the span context of its ctx for events without their own). The
// propagator is W3C Trace Context whatever the global one is: it is the
// format the outbox stores and continues.
func (h *handler) traceIngest(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Header.Get("Traceparent") != "" {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		ctx, span := h.tracer.Start(ctx, SpanIngest, ingestSpanOpts...)
		defer span.End()
		if !span.IsRecording() {
			next(w, r.WithContext(ctx))
			return
		}
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", "/v1/events"),
		)
		sw := &statusWriter{ResponseWriter: w}
		next(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// tracedEnqueue serves POST /v1/events in its ingest span.
func (h *handler) tracedEnqueue(w http.ResponseWriter, r *http.Request) {
	h.traceIngest(h.enqueue)(w, r)
}

// statusWriter records the status a handler answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (the
// body reader sets read deadlines through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
