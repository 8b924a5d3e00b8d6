package traceparent

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/trace"
)

// Normalize returns the trace context a record keeps for the given
// traceparent and tracestate: the traceparent in its version-00 form and
// the tracestate, or two empty strings when the traceparent is malformed
// (an event is never refused for its tracing header). A malformed
// tracestate is dropped and the traceparent kept.
func Normalize(traceparent, tracestate string) (string, string) {
	if traceparent == "" {
		return "", ""
	}
	sc, ok := Parse(traceparent, tracestate)
	if !ok {
		return "", ""
	}
	return Format(sc), sc.TraceState().String()
}

// length is the length of a version-00 traceparent.
const length = 55

// Parse parses a W3C traceparent (and tracestate, dropped when
// malformed) into a remote span context, following the Trace Context
// specification: lower-case hex, version ff invalid, version 00 exactly 55
// characters, later versions possibly longer, trace and parent IDs not all
// zero. Of the flags only "sampled" is kept, as the W3C propagator does.
func Parse(s, tracestate string) (trace.SpanContext, bool) {
	if len(s) < length || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	if !lowerHex(s[:2]) || s[:2] == "ff" {
		return trace.SpanContext{}, false
	}
	if len(s) > length && (s[:2] == "00" || s[length] != '-') {
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

// Format formats sc as a version-00 traceparent.
func Format(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [length]byte
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

// Valid reports whether s is a well-formed W3C traceparent.
func Valid(s string) bool {
	_, ok := Parse(s, "")
	return ok
}

// FromContext returns the trace context of ctx's span, empty when it has
// none.
func FromContext(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return Format(sc), sc.TraceState().String()
}
