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
package sinktest
