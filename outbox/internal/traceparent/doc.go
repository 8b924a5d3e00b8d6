// Package traceparent reads and writes W3C Trace Context headers
// (traceparent, tracestate) as the outbox keeps them with each event: a
// producer's context is normalized to its version-00 form when the event is
// stored, a malformed one is dropped rather than refused, and a delivery
// attempt's span is started as a child of the stored context. It also
// starts the span of an enqueue call, whose context events without one of
// their own take.
package traceparent
