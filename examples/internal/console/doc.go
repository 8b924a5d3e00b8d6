// Package console prints what the example binaries do, one readable,
// timestamped line per event, and holds the demo timings they share.
//
// It is internal to the examples: the embedded service, the Kafka relay and
// the webhook relay print their delivery attempts the same way, so that the
// three demos read alike.
package console
