// Package kafka connects an outbox to Apache Kafka with
// github.com/segmentio/kafka-go: it ingests events from a topic in a consumer
// group, ships the store's changelog to a compacted topic, and restores a
// store from that topic. It is how outboxd grows past one machine.
//
// # Ingest
//
// Several instances consume one partitioned topic in one consumer group
// (kafka-go's ConsumerGroup: generations and partition assignments). Each
// record becomes an event: its ID is the IDHeader's value or
// "kafka:<topic>:<partition>:<offset>" (RecordID), stable across
// re-consumption, so a record read again after a crash or a rebalance is a
// duplicate by ID (outbox.Outbox.Ingest), even when an operator deleted its
// event meanwhile; its key becomes the event's Key (a key that is not
// printable text is carried as "base64:..."), its value the Payload, its
// headers the Headers (but the ID and destination headers), its destination
// the DestinationHeader's value or Config.Destination. A record that cannot be
// mapped, or that the outbox refuses (an unknown destination, a bad header),
// becomes a dead letter with the reason; it is never skipped silently.
//
// Offsets are committed gap-aware: per partition, only up to the highest
// offset below which every consumed record is durable in the store. A batch
// whose enqueue fails is retried in the background while later records go
// on; the committed offset stays below it until it succeeds. On a rebalance
// each consumer stops fetching, finishes its in-flight write, and the
// durable offsets are committed before the partitions are given up.
//
// # Changelog shipping and restore
//
// The shipper tails the outbox's changelog (Outbox.Changelog) from the last
// shipped LSN and produces each entry to Config.ChangelogTopic (created
// compacted when missing) with key = event ID, value =
// outbox.ChangelogEntry.MarshalBinary (the event after the change) or null
// for a delete, acknowledged by all in-sync replicas. The shipped LSN is
// recorded in the outbox (Changelog.MarkShipped) only after the
// acknowledgement, and the outbox never trims its changelog past it. Restore
// rebuilds a new outbox file from the topic through Outbox.Restore: the last
// record of each ID wins and tombstones delete, so a delivered event never
// comes back.
//
// Give each instance its own changelog topic: a topic restores one outbox.
// Restore reports its progress through a callback (RestoreProgress); drawing
// it is the caller's business (outboxd restore draws a progress bar).
//
// # Authentication
//
// TLS and SASL are kafka-go's: PLAIN from sasl/plain, SCRAM-SHA-256 and
// SCRAM-SHA-512 from sasl/scram (github.com/xdg-go/scram), which checks the
// server's signature and refuses fewer than 4096 iterations. One check is
// added around it: a server-first message whose nonce does not extend the
// client's is refused (RFC 5802 section 5.1), where xdg-go only checks that
// it starts with the client's. That client applies SASLprep to the username
// and password; Kafka brokers do not, so a non-ASCII credential SASLprep
// changes does not authenticate with SCRAM (see SASLConfig.Username).
//
// # Metrics
//
// Runner.Metrics returns the counters and gauges of ingest and shipping; the
// sub-package kafkaprom exports them to Prometheus, so that this package
// does not depend on it.
package kafka
