// Package kafka connects outboxes to Apache Kafka with
// github.com/segmentio/kafka-go. Group, the mode outboxd runs, makes Kafka
// own the state: a store per input partition that follows the partition
// from instance to instance through a compacted changelog topic, as Kafka
// Streams' tasks do. Start ingests into one outbox of the caller's and/or
// ships its changelog; Restore rebuilds a database from a changelog topic.
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
// headers the Headers (but the ID, destination, topic, not-before and trace
// context headers), its destination the DestinationHeader's value or its
// topic (outbox.Event.Topic: the event goes to every endpoint subscribed to
// it) the TopicHeader's value ("outbox-topic"; a record with both is a dead
// letter), else Config.Destination or, without one, Config.DefaultTopic,
// the DeliverAtHeader's RFC 3339 time, when there is
// one, its DeliverAt (a scheduled event), and its W3C traceparent and
// tracestate headers its producer's trace context (Event.TraceParent and
// TraceState: each delivery attempt continues that trace; a malformed one
// is ignored, never a reason for a dead letter). A record that cannot be
// mapped, or that the outbox refuses (an unknown destination, a bad header),
// becomes a dead letter with the reason; it is never skipped silently.
//
// Offsets are committed gap-aware: per partition, only up to the highest
// offset below which every consumed record is durable in the store (and, in
// a Group, whose changelog entries the broker acknowledged). A batch whose
// enqueue fails is retried in the background while later records go on;
// the committed offset stays below it until it succeeds.
//
// # Partition-owned state (Group)
//
// StartGroup gives each partition p of Config.Topic assigned to this
// instance a store of its own, <StoreConfig.Dir>/<topic>-<p>.db. Only its
// owner ingests into it and delivers from it. All the group's stores ship
// to one changelog topic (Config.ChangelogTopic, default
// "<group>-<topic>-changelog"), created compacted with the input's
// partition count: store p ships to changelog partition p, so the topic
// must have exactly the input's partition count and be compacted
// (StartGroup refuses it otherwise with a *TopicError). A record's key is
// the event ID, its value outbox.ChangelogEntry.MarshalBinary (the event
// after the change) or null for a delete; headers carry the op, the LSN,
// the owner's epoch and its group generation.
//
// On assignment, before anything of p is ingested or delivered, the store
// is restored. When the last ownership of p by this instance ended in a
// clean hand-over, the local store and its checkpoint
// (<topic>-<p>.checkpoint: the changelog offset it had applied) are kept,
// and the store is caught up from the checkpoint to the end of changelog
// partition p. Otherwise it is rebuilt from the whole partition into a new
// file that replaces the old one only once complete. Records are applied
// in offset order: the last record per ID wins and a tombstone deletes
// (the event stays deleted for the dedup window), so a delivered event
// never comes back. A restore that fails (a record that does not decode, a
// broker that stops answering) leaves the partition undelivered and is
// retried with backoff. Progress is logged every few seconds and reported
// by Group.Partitions and Metrics.
//
// On revocation (a rebalance, Close), ingest of p stops, the store stops:
// deliveries in flight finish within Config.HandoverTimeout (those
// cancelled stay pending, for the next owner), its remaining changelog is
// shipped to the broker's acknowledgement, the offsets are committed, and
// the store is closed with its checkpoint. kafka-go's groups rebalance
// eagerly: every partition is handed over at every rebalance. The group's
// assignor (protocol "outbox-warm") gives each member its fair share and,
// within it, the partitions it holds checkpointed stores for, which it
// announces when it joins; so at a rebalance partitions come back to where
// their stores are and are caught up, and only a lost member's partitions
// are rebuilt.
//
// # Fencing and zombies
//
// Once restored, an owner picks an epoch above every epoch its restore saw
// (and at least the group generation) and writes a fence record with it to
// its changelog partition before anything else; every record it ships
// carries that epoch. A restore skips a record whose epoch is below one
// it has already applied. So an instance that has not noticed it lost p
// (paused past its session timeout, cut off from the coordinator: a
// zombie) cannot, by what it writes afterwards, undo the new owner's
// deletes or bring events back. What a zombie can still do is deliver an
// event the new owner delivers too, until its next heartbeat fails:
// at-least-once delivery with idempotency keys (every attempt carries the
// event ID) is built for that. Its offset commits are refused by the
// coordinator, and it writes no checkpoint, so its own store is rebuilt
// when it gets p back.
//
// A restore relies on the changelog keeping tombstones at least as long
// as a store may be away: a tombstone removed by compaction
// (delete.retention.ms, 24h by default) before a checkpointed store catches
// up lets that store keep the event. Keep delete.retention.ms above the
// longest time an instance may be down with its local stores.
//
// # Changelog shipping and restore of one outbox
//
// Start with Config.ChangelogTopic ships one outbox's changelog: the
// shipper tails it from the last shipped LSN and produces each entry to
// the topic (created compacted when missing), acknowledged by all in-sync
// replicas. The shipped LSN is recorded in the outbox
// (Changelog.MarkShipped) only after the acknowledgement, and the outbox
// never trims its changelog past it. Give each such outbox its own topic.
// Start with Config.Topic ingests into that one outbox: its state does not
// follow the partitions (use a Group for that).
//
// Restore rebuilds a new outbox file from a changelog topic through
// Outbox.Restore, every partition into one file: the last record of each ID
// wins, fenced records are skipped and tombstones delete. It reports its
// progress through a callback (RestoreProgress); drawing it is the
// caller's business (outboxd restore draws a progress bar).
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
// Runner.Metrics and Group.Metrics return the counters and gauges of
// ingest, shipping and (for a Group) the owned partitions and their
// restores; the sub-package kafkaprom exports them to Prometheus, so that
// this package does not depend on it.
package kafka
