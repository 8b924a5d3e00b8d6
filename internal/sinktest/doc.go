// Package sinktest is the behaviour suite that every outbox.Sink that
// delivers over HTTP runs, as database/sql drivers share a conformance suite
// (river's riverdrivertest, watermill's pubsub/tests): the default status
// policy table, the headers receivers deduplicate on, payloads delivered
// verbatim, transport errors kept apart from statuses, a context that
// cancels a delivery, and concurrent use.
//
// A sink's test calls Run with a function that builds the sink so that the
// destination "receiver" (and the absolute URL of the receiver) reaches the
// loopback server the suite started.
//
// A sink that publishes to a message broker (kafka.Sink) runs RunBroker
// instead: the same promises where they make sense without HTTP (the
// payload verbatim, the event's headers and ID on the record, no answer
// is a retry, a cancelled context ends a delivery, concurrent use), with
// a function that builds the sink and lets the suite read the broker.
package sinktest
