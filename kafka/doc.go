// Package kafka connects outboxes to Apache Kafka with
// github.com/segmentio/kafka-go. Group, the mode outboxd runs, makes Kafka
// own the state: a store per input partition that follows the partition
// from instance to instance through a compacted changelog topic, as Kafka
// Streams' tasks do. Start ingests into one outbox of the caller's and/or
// ships its changelog; Restore rebuilds a database from a changelog topic.
// Sink goes the other way: an outbox's deliveries become records of
// topics, so that Outbox.Update is a transactional outbox to Kafka.
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
// headers the Headers (but the ID, destination, topic, not-before, method
// and trace context headers), its destination the DestinationHeader's value or its
// topic (outbox.Event.Topic: the event goes to every endpoint subscribed to
// it) the TopicHeader's value ("outbox-topic"; a record with both is a dead
// letter), else Config.Destination or, without one, Config.DefaultTopic,
// the DeliverAtHeader's RFC 3339 time, when there is
// one, its DeliverAt (a scheduled event), the MethodHeader's value, when
// there is one, its Method, and its W3C traceparent and
// tracestate headers its producer's trace context (Event.TraceParent and
// TraceState: each delivery attempt continues that trace; a malformed one
// is ignored, never a reason for a dead letter). A record that cannot be
// mapped, or that the outbox refuses (an unknown destination, a bad header,
// a topic with more subscribed endpoints than the outbox's
// Config.MaxDeliveriesPerCall lets one call create), becomes a dead letter
// with the reason; it is never skipped silently, and it never holds up the
// partition. Records whose deliveries are over that bound only together are
// ingested in smaller calls.
//
// Offsets are committed gap-aware: per partition, only up to the highest
// offset below which every consumed record is durable in the store (and, in
// a Group, whose changelog entries the broker acknowledged). A batch whose
// enqueue fails is retried in the background while later records go on;
// the committed offset stays below it until it succeeds.
//
// # Producing events (Producer)
//
// A Producer produces events to a group's ingest topic as records that
// the ingest above maps back to the same events (outboxd's POST /v1/events
// in group mode): the ID (a UUIDv7 when the event has none) in the
// IDHeader, so the owner stores the event under the ID Produce returned,
// the destination in the DestinationHeader, DeliverAt in the
// DeliverAtHeader (RFC 3339 with nanoseconds), Method in the MethodHeader,
// the trace context in traceparent and tracestate, Headers as record
// headers, Key as the record key (a "base64:..." key as the bytes it
// stands for) and Payload as the value. An event whose headers use one of
// those names, exactly, is refused (*outbox.ValidationError), and so is a
// "base64:..." key that is not the form a binary record key maps to:
// neither would come back as sent.
//
// Records are partitioned by KeyBalancer: by the murmur2 hash of the key,
// as Kafka's default partitioner (Java client, kafka-go's Murmur2Balancer)
// does, so external producers and the Producer agree and per-key order
// holds; by the hash of the ID without a key, so an event sent again lands
// where it did. The records of one call for one partition go out whole in
// one produce request, acknowledged by all in-sync replicas; a partition
// has one request in flight at a time, and the calls that queued meanwhile
// share the next. Produce returns only once every request was
// acknowledged. Retriable errors are retried with backoff until
// Config.ProduceTimeout; a refusal or a timeout is a *ProduceError with
// the broker's reason. Nothing is sent of a call whose context ended
// before its request went out; a request in flight when it ended may
// still be written (kafka-go cannot take it back), which is why sending
// the same events again, with their IDs, must be and is harmless: the
// owner drops a repeated ID as a duplicate.
//
// The Producer uses kafka-go's Client.Produce rather than its Writer: the
// Writer merges calls into batches behind a timer (BatchTimeout, 1s by
// default, segmentio/kafka-go#1180), may split one call's records over
// several requests, and goes on retrying a batch in the background after
// WriteMessages returned a context error (segmentio/kafka-go#1427).
//
// # Publishing deliveries (Sink)
//
// A Sink is an outbox.Sink whose endpoints are topics (SinkConfig.Topics):
// each delivery is one record produced to its endpoint's topic through a
// Producer of the Sink's, acknowledged by all in-sync replicas. The key is
// the event's Key (the ID without one), so the record lands where Kafka's
// default partitioner puts that key; the value is the payload; the
// headers are the event's own plus outbox-id (the event ID, the same on
// every attempt: consumers deduplicate on it), outbox-topic (the event's
// topic, if any) and the delivery span's traceparent and tracestate.
// Concurrent deliveries to one partition share produce requests, as the
// Producer's calls do (the Sink is an outbox.Batcher: its endpoints keep
// MaxPerEndpoint deliveries in flight, not adapted), and a delivery
// returns once its record was acknowledged: with outbox.Config.Ordered,
// which starts one delivery per key at a time and the next only once the
// outcome is committed, a key's records are written in the order of its
// events. Delivery is at least
// once: a record whose outcome was not committed before a crash is
// produced again, with the same outbox-id.
//
// The Sink's policy table: acknowledged is a success; topic authorisation
// failed, a record too large (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE),
// an invalid topic or record, and a topic or partition still unknown when
// Config.ProduceTimeout ends are dead letters with the broker's reason;
// anything else (a leader moving, not enough in-sync replicas, a request
// timed out, a broker not reachable) is a retry with the outbox's
// backoff, counted by the endpoint's breaker. As the results are the
// outcome types every sink returns, a Kafka endpoint has the breaker, rate
// limit, attempt log and metrics an HTTP one has.
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
// are rebuilt (unless they had standbys, below).
//
// The stores' rate limits (StoreConfig.Outbox.RateLimits) hold for the
// group: at every assignment, before its stores start, a member makes them
// enforce its share, each limit times the partitions it owns over the
// partitions of Config.Topic, bursts likewise (rounded down, at least 1;
// nothing while it owns none) (outbox.RateLimits.SetShare). The shares of
// the members add up to the limit, and a lost member's share passes to the
// survivors with its partitions. Give every member the same limits.
//
// # Standby replicas
//
// With Config.StandbyReplicas N, the group leader's assignor also gives
// each partition N standbys: members other than its owner (each at most
// once), spread evenly, preferring the members that hold the partition
// warm already. A standby travels in the assignment as the changelog
// topic's partition of the same number, so no protocol of our own is
// needed; kafka-go passes on the assignments of subscribed topics only, so
// a member with StandbyReplicas above 0 subscribes to the changelog topic
// too (it commits no offsets there), and only such members get standbys.
// The leader's StandbyReplicas applies: give every member the same.
//
// A member keeps a standby in the partition's usual files: it opens the
// store (resuming from its checkpoint when usable, else anew from the
// partition's first offset), never starts it (a standby neither ingests
// nor delivers), and applies the changelog partition as it grows, as a
// restore does (offset order, fenced records skipped, tombstones delete).
// When the generation ends it closes the store with a checkpoint of the
// offset it applied, so its UserData reports the partition warm: when the
// owner is lost, the assignor gives the partition to its most caught-up
// holder, the standby, which catches up the tail from its checkpoint
// instead of rebuilding the store. Group.Standbys and Metrics.Standbys
// report each standby's state, applied offset and lag.
//
// A standby store writes a changelog entry of its own per change it
// applies (outbox.Outbox.Restore); as it is never started, the standby
// trims that changelog and the store's tombstones itself
// (outbox.Outbox.Maintain) when it opens the store and then every
// MaintenanceInterval of its store's configuration, whether records arrive
// or not, as a started store does.
//
// # Reading copies while partitions move
//
// While a partition moves, no member serves its store, yet copies of it
// exist: the new owner's store being caught up from its checkpoint (or
// restored and not started yet), the old owner's store being handed over
// or closed with its checkpoint, and standby stores. Group.StaleCopies
// yields, for each partition this instance holds such a copy of but does
// not serve, the copy's store for reading and the changelog offset it
// reflects (StaleCopy), so that reads of the partition's events can be
// answered, marked stale, rather than refused. A copy's holder retires it
// before closing its store and waits for the reads under way (each is
// short), so a read never sees a closed store; a store closed with its
// checkpoint is opened read-only for one read under the file's shared
// lock, only when no task or standby of this instance holds it, and only
// when the checkpoint still vouches for it. A copy is never written to.
//
// A copy passing from one holder to the next on an instance is waited for,
// not skipped: while the partition's new task or standby opens the
// checkpointed file (it holds the file's lock, and the checkpoint goes
// before its store is published), while the owner's store stops and is
// reopened to be handed over, and while a holder still closes the file.
// The holder says that its store is coming before it takes the file, and
// a read waits until it is published, the holder gives up (Group.Close
// included), or the file can be opened again, for at most a second over
// all the copies of one read. Without that, a read landing in such a
// moment on every member that holds a copy, as a rebalance moves the
// owner and the standby of a partition at once, found none.
//
// # Members and their API addresses
//
// A member announces, with the partitions it holds warm, the base URL of
// its HTTP API (Config.AdvertiseURL) in the UserData it joins the group
// with, as a JSON object {"warm": {...}, "api": "http://..."}; members of
// older versions, which send neither, are read as holding nothing warm and
// announcing no address. Group.Members asks the group's coordinator
// (DescribeGroups) for every member's ID, client, host, address and
// assigned partitions, so that any member can find the owner of an event
// (package outbox/cluster forwards requests to it). While the group
// rebalances, the coordinator describes its members without what they
// announced: a member keeps the address of the group's last stable
// description, and a member that joined since has none until the group is
// stable again. What Group.Members learned serves for up to MembersMaxAge
// within a generation: a member that left may be asked for that long.
// DescribeGroup gives
// the same without joining, with each partition's committed offset, log
// end offset and lag, for operators (outboxd inspect --cluster).
//
// A member also announces a hash of each of its static endpoint
// definitions, by name (StoreConfig.StaticEndpoints, "static" in the
// UserData): endpoints defined in configuration must be defined alike on
// every member, which Group.StaticMismatch checks, naming the endpoints
// whose hashes differ between members or that some members do not define.
// Members that announce no hashes (older versions) are left out of the
// comparison.
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
// # State shared by the group (Table)
//
// A Table is a global table: one compacted topic of one partition
// (Config.EndpointsTopic, default "<changelog topic>-endpoints"; created
// when missing, compacted, replicated as the changelog) that every member
// reads whole from its first offset, in offset order, and then as it
// grows. Records go to handlers by the prefix of their key ("endpoint/",
// "state/"), so that several kinds share the topic, and a kind no handler
// knows is passed over. Every member applies the same records in the same
// order, so the offset order decides between changes written at the same
// time: a record that carries the revision it expects to replace lets
// every member come to the same decision. Table.Put is acknowledged by
// every in-sync replica and returns once the writer's own reader applied
// the record. A record its handler cannot decode is skipped, logged once
// and counted (TableStats.Skipped); it never stops the reader. As
// compaction keeps a key's last record only, a kind's last record of each
// key must say everything that is in force.
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
// restores, and the standbys; the sub-package kafkaprom exports them to
// Prometheus, so that this package does not depend on it.
package kafka
