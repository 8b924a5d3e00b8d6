// Package outbox is a durable, embeddable retry-and-delete outbox: a Go
// service enqueues events in its request path (durable on return) and the
// outbox delivers them in the background through a Sink (HTTP in
// package httpsink), retrying, parking, throttling and dead-lettering them as
// the Sink's status policy says, until each one is delivered or dead.
//
// # Life cycle
//
// Open opens (or creates) the bbolt file and checks the Config; Start starts
// the punctuations and the delivery workers; Stop stops them, lets deliveries
// in flight finish until its context is done, commits their outcomes and
// closes the file. An opened Outbox that was not started accepts events and
// admin operations without delivering.
//
// # Semantics
//
// Durable on return: Enqueue returns nil only after the transaction that
// holds the events committed (fsync). Concurrent callers share commits.
//
// Idempotent by ID, one dedup window: enqueueing an ID that is pending or
// dead with the same content is a no-op; an ID delivered (or superseded by
// Upsert) within Config.TombstoneRetention (24h) is a duplicate and is
// skipped; both are counted in Stats.DuplicatesTotal, neither is an error.
// The same ID with other content fails with ErrConflict. Events without an
// ID get a UUIDv7.
//
// Deleted by an operator: an event removed with Delete leaves a tombstone
// that says so. For the same retention Get reports it as StateDeleted, and
// Enqueue refuses its ID with a *DeletedError (ErrDeleted, naming the event
// and when it was deleted; nothing of the call is stored), so that whoever
// sends it again learns that it will not be delivered. Ingest and
// EnqueueDead, meant for sources that may hand over the same event again (a
// Kafka consumer after a rebalance), skip such an event as a duplicate
// instead: nobody waits on them for an answer, and an error would only stall
// the source.
//
// At-least-once delivery: an event is deleted only after its Sink reported
// success, by a compare-and-delete on the version that was delivered, written
// as a tombstone in the store's changelog in the same transaction. A crash
// between a delivery and the commit of its delete delivers the event again
// after restart, with the same ID: receivers deduplicate on it (the
// Idempotency-Key and webhook-id headers of httpsink). A delete is never
// undone: no snapshot, restart or later outcome brings a deleted event back.
//
// No transaction is open during a delivery: each delivery punctuation takes a
// snapshot of due events in one short read transaction, hands them to a pool
// of Config.Concurrency workers (at most Config.MaxPerEndpoint per endpoint),
// and a committer applies the outcomes of whatever finished in one write
// transaction per batch. While deliveries are under way it gathers outcomes
// for up to Config.CommitInterval (25ms), so a busy outbox pays one commit
// and its fsyncs for many deliveries; at most Config.MaxUncommitted
// outcomes wait, which with Config.Concurrency bounds what a crash delivers
// again. Enqueue and finished deliveries wake the punctuation,
// so a new event's first attempt starts at once; otherwise it runs every
// Config.Interval, and when nothing is due it costs one key read.
//
// # Scheduled delivery
//
// An event may carry a not-before time, Event.DeliverAt: it is stored
// pending (durable, surviving restarts) and first attempted at that time,
// not before; a zero or past DeliverAt means at once, and one more than
// Config.MaxSchedule (30 days) ahead is refused (*ValidationError for
// "deliver_at"). The due index is ordered by next attempt time, so a
// punctuation reads only what is due: events scheduled for later cost it
// nothing. Config.MaxAge counts from DeliverAt when that is later than the
// enqueue. Nothing brings an event before its DeliverAt: not EnableEndpoint,
// not Replay (a replayed event is due now, or at its DeliverAt while that is
// ahead). DeliverAt is not content: re-enqueueing an ID with another DeliverAt
// is a duplicate that keeps the first schedule (a client retrying with a
// relative delay computes another time each try); Upsert changes a pending
// event's schedule. With Config.Ordered a scheduled event holds the later
// events of its key until it is delivered or dead, as any earlier event does.
//
// # Policy actions
//
// The Sink maps each response to an Action (the status policy table):
//
//   - ActionSuccess deletes the event.
//   - ActionRetry spends an attempt and waits a jittered exponential backoff
//     (Config.BackoffInitial, BackoffMultiplier, BackoffMax) or the
//     Retry-After the receiver asked for.
//   - ActionPark ("not yet", 404 by default) waits Config.ParkInterval
//     without spending an attempt.
//   - ActionThrottle retries and holds the whole endpoint until a durable
//     not-before time, which survives restarts: the Retry-After capped at
//     Config.MaxThrottle or, without one, a step of the backoff per throttle
//     episode, at most 5 minutes (the first throttle answer starts the
//     episode; answers to deliveries already in flight when the endpoint was
//     held do not lengthen it; the first success ends it).
//     EnableEndpoint lifts it at once.
//   - ActionDisable disables the endpoint (410 Gone); its events stay
//     pending, with no attempt spent, until EnableEndpoint.
//   - ActionDead moves the event to the dead letters with the status and
//     the start of the response body.
//
// Config.MaxAttempts (25) and Config.MaxAge (72h) turn a failing event into
// a dead letter with the reason. Dead letters are kept, listed by List and
// replayed by Replay or, filtered and paced, by ReplayDead.
//
// # Attempt log
//
// Every attempt is recorded, in the transaction that commits its outcome:
// when it started, how long it took, the action, the status, the transport
// error, the response headers IsLoggedHeader accepts and the first
// Config.AttemptExcerptBytes (1 KiB) of the response body. Attempts lists
// them for a pending or dead event, and for a delivered or deleted one while
// its tombstone lasts; they are deleted with the tombstone. An attempt that
// leaves its event as it is (one that disabled the endpoint) is recorded
// too, and so is one whose outcome came too late to apply (the event
// changed meanwhile), while the event is known; an attempt interrupted by
// Stop is not. An event keeps its last AttemptsPerEvent attempts, and a
// replayed one continues its numbering. Nothing of the request is kept,
// and a Sink's errors carry no secrets. The log is local history: the
// changelog does not carry it, so Restore (and a rebuild from Kafka) starts
// each event's log afresh. Config.NoAttemptLog turns it off.
//
// # History of delivered events
//
// With Config.Retain set, a delivered event is kept in an archive for that
// long after its delivery: the delivery's outcome removes it from the
// pending events and moves its record (payload, headers, key, topic, the
// endpoint it went to, its attempt counts and last status) to the archive
// in one transaction, and leaves its tombstone as before, so the ID is a
// duplicate within the tombstone retention and nothing archived is ever
// due or delivered again by itself. The archive holds deliveries: an event
// with one destination is archived once; a topic event once per endpoint
// that received it, each when its own delivery succeeded (its endpoint
// index holds one entry per endpoint it was delivered to; a delivery
// that became dead is a dead letter, not archived). SearchArchive pages
// through it by delivery time, topic or topic pattern, endpoint and key
// prefix, reading one range of one index (by time, topic, endpoint or
// key) and never the whole archive. The maintenance punctuation trims
// the deliveries older than Retain, and then the oldest beyond
// Config.RetainMaxBytes, in transactions of at most 128 records, so that
// a trim never holds the writer long. The archive is local history, as
// the attempt log is: the changelog does not carry it, so Restore (and a
// rebuild from Kafka) brings none of it back. Without Retain nothing
// changes: the file has no archive and a delivery deletes the event.
//
// StartArchiveReplay replays archived deliveries, in the background and
// paced as ReplayDead paces dead letters: each selected delivery (made
// before the replay started) is stored pending again as a new delivery of
// the same event ID, to its own endpoint or to another
// (ArchiveReplay.Endpoint), unless that event is pending or dead for that
// endpoint already, and is then delivered, and archived, as any other.
// ArchiveReplayStatus shows its progress and CancelArchiveReplay stops it;
// a replay is not resumed after a restart (what it queued is delivered).
//
// A new subscriber can be given the past (SubscribeSince, BackfillSince):
// every topic event its subscription matches, created since a given time,
// that is pending for another endpoint or was delivered to one and is
// archived, gets a delivery to it, paced like a replay and each once (a
// delivery to it that is pending, dead or delivered within the tombstone
// retention is skipped). The pending events are read first and the
// archive after, so an event delivered meanwhile is found in the archive.
//
// # Delivery controls
//
// Every endpoint has a circuit breaker (Config.Breaker): after 5
// consecutive failures of the retry class (no answer, a timeout, a 5xx, a
// throttle answer other than 429) it opens, and for a cool-down (5 s,
// doubling at each consecutive opening up to 5 min, jittered) none of the
// endpoint's events is attempted or spends an attempt; they stay as they
// are, and a punctuation passes over them at the cost of one look, however
// many they are, so they hold up no other endpoint. Then it is half-open: one event goes out as a
// probe while the others wait, marked Delivery.Probe so that the Sink makes
// one request for it (httpsink never retries a probe inline). A failed probe opens it again for the next
// cool-down; any other answer closes it, and the endpoint's events become
// due at once. Its state is part of the endpoint's durable state, so a
// restart keeps it open until the cool-down ends; Endpoints shows it, each
// transition is logged once and reported to Hooks.OnBreaker.
//
// Config.RateLimits caps how fast deliveries to named endpoints start
// (events per second and a burst). A delivery the limit refuses is not
// started and spends nothing: it waits in the ready queue without holding a
// worker, and the rest of the endpoint's due backlog is rescheduled, in
// order, to the times the limit will let it go, so that it does not stand
// in front of other endpoints' events. Outboxes given one *RateLimits
// share its limits; processes that hold a limit between them each enforce
// a share of it (RateLimits.SetShare, as Kafka group mode does by owned
// partitions). The breaker, the limit, the throttle and the disable
// compose: an endpoint delivers only when none holds it.
//
// EnableEndpoint lifts a disable, a throttle and an open breaker;
// RetryEndpoint, for an endpoint whose receiver was fixed, closes the
// breaker, lifts the throttle and makes its pending events due now, paced;
// those whose attempt is under way are left alone, and those that fail
// wait out their backoff.
//
// Outboxes given the same Config.SharedEndpoints (the partition stores of
// one process in Kafka group mode) share those states: per endpoint, one
// failure streak, one breaker with one probe at a time, one throttle and
// one disable, lifted for all by EnableEndpoint or RetryEndpoint on any of
// them; transitions that must hold beyond the process are published
// through it, and those made elsewhere are applied with
// SharedEndpoints.Apply.
//
// # Topics and subscriptions
//
// An event names either one Destination or a Topic ("order.paid"; see
// ValidateTopic), never both. Endpoints subscribe to topics by exact name
// or pattern ("order.*" for every topic under order, at any depth; "*" for
// all), optionally narrowed to events that carry given header values
// (Subscription; Config.Subscriptions, replaced at run time with
// SetSubscriptions).
//
// Enqueueing a topic event stores, in the same durable commit, one delivery
// per subscribed endpoint (an endpoint that matches through several
// subscriptions gets one). A delivery is the unit that has a state,
// attempts, a schedule, per-key order, a policy outcome and a dead letter:
// a slow, failing, throttled or disabled endpoint never holds back another
// endpoint's deliveries, and with Config.Ordered a key's order holds per
// endpoint. Every delivery carries the event's ID (Delivery.ID, the
// webhook-id / Idempotency-Key), so each receiver deduplicates on it;
// Delivery.Endpoint and Destination name the subscribed endpoint.
//
// Config.MaxDeliveriesPerCall (default 10,000) bounds the deliveries one
// Enqueue, Ingest or Update creates: every delivery is a record written in
// the call's one commit, and bbolt's commit grows faster than the number of
// records (on a loaded 2-core machine 20,000 deliveries took 0.3s, 200,000
// took 50s). A call over it fails with a *TooManyDeliveriesError
// (ErrTooManyDeliveries) before anything is written; send fewer events per
// call.
//
// The event ID is one dedup key across all deliveries and ingest paths:
// re-enqueueing a topic event whose deliveries are pending, dead or
// delivered within the retention is a duplicate, even when the
// subscriptions changed since (no new deliveries for new subscribers), and
// the same ID as a single-destination event, or with other content, is a
// conflict. Get, Delete, Replay and Attempts given the event's ID act on the
// whole event (Get lists each delivery in Event.DeliveryStates);
// ReplayDelivery and DeleteDelivery act on one delivery; List lists
// deliveries, each as an Event with the event's ID and its Endpoint.
// DeadLetterEndpoint moves a removed endpoint's pending deliveries to the
// dead letters with a reason, so that nothing is lost silently.
//
// An event whose topic no endpoint subscribes to is kept unrouted
// (Config.Unrouted, default UnroutedKeep): counted in Stats.Unrouted,
// listed with ListOptions.Unrouted, never delivered, and routed to its
// endpoints when a matching subscription is set (SetSubscriptions) within
// Config.UnroutedRetention (default MaxAge). That routing, the backfill,
// runs in the background of a started outbox, not in the SetSubscriptions
// call: a few hundred events per write transaction, each event's unrouted
// record removed in the transaction that stores its deliveries (so none
// is routed twice), enqueues and other calls going on between batches; a
// backfill cut short by Stop or a crash resumes at the next Start, and on
// an outbox not started nothing is routed until Start. Stats.Backfill
// and EndpointBackfill show its progress. Past the retention it becomes
// a dead letter with the reason "unrouted: no endpoint subscribes to topic
// ..."; replayed, it is routed to the endpoints subscribed then, or dead
// again at once. With UnroutedDrop such an event is dropped instead,
// counted in Stats.UnroutedDroppedTotal and logged; nothing is stored for
// it, so a later enqueue of its ID is not a duplicate. Upsert coalesces
// the events of one destination and refuses a topic event.
//
// # Ordering and coalescing
//
// With Config.Ordered, events with the same Key are delivered in enqueue
// order: a later event waits until every earlier one of its key is delivered
// or dead, even while the earlier one is being retried; other keys are not
// blocked. Events without a Key are never ordered.
//
// Upsert coalesces by key: it replaces the pending event of a key through a
// read-modify-write in one serialized write transaction (latest state wins,
// as a compacted topic would, and concurrent upserts never lose an update).
// An update changes the event's Version, so a delivery of the previous
// version that succeeds afterwards does not delete the new one.
//
// # The application's state in the same transaction
//
// Update is the outbox pattern proper: it runs one read-write transaction on
// the outbox's file in which the application reads and writes its own
// buckets and enqueues or upserts events (Tx), and either all of it commits,
// durably, or none of it does (fn's error, a panic, ctx ending before the
// commit). The events are then delivered as those of Enqueue are. The
// application's buckets are the file's top-level buckets other than the
// outbox's own (events, due, dead, tombstones, tombstones_by_time, keys,
// endpoints, changelog, attempts, meta), which Tx refuses with ErrReservedBucket; they
// are bbolt's *bbolt.Bucket, with its whole API. The outbox never touches
// them: Check reads their pages, Compact keeps them, the changelog (and so
// Kafka shipping) carries the outbox's events only. View reads them, also on
// an outbox opened with Config.ReadOnly.
//
// Updates share commits with every other write (group commit), so fn runs
// on the committer while other writers wait, and it may run more than once:
// when another function of the same commit fails or panics, the commit is
// rolled back and run again without it. Keep fn short, free of I/O and of
// effects outside its Tx.
//
// # Failures of the file
//
// When the outcomes of finished deliveries cannot be committed (a full or
// failing disk), no delivery starts: the outcomes wait in memory (at most
// Config.MaxUncommitted) and their commit is retried until it succeeds, so a
// failing disk repeats no delivery. When a store call finds damaged data,
// the outbox stops delivering and Enqueue refuses new events with
// ErrUnavailable. Health reports either condition; each is logged once.
//
// # Observability
//
// Stats returns counts (pending, dead, in flight, totals, oldest pending
// age, held endpoints and open breakers, tombstones, changelog LSNs, file
// size) and the group committer's statistics; Hooks are called on enqueues,
// deliveries, punctuations, breaker transitions and rate-limited events;
// package outboxprom turns them into Prometheus metrics. Logs go to
// Config.Logger and are discarded by default.
//
// # Changelog
//
// Every change is also written, in the same transaction, to a changelog of
// ChangelogEntry values (trimmed by Config.ChangelogRetention and
// ChangelogMaxEntries). Outbox.Changelog is a read view of it for shipping
// (package kafka sends it to a compacted topic): entries from an LSN, the
// last and the shipped LSN, and MarkShipped, after which the changelog is
// never trimmed past what was shipped; and for inspection, the History of
// one event. A topic event's deliveries each have their own entries:
// EventHistory merges them in LSN order, and ChangelogEntry.Delivery names
// the endpoint an entry is about. Outbox.Restore rebuilds a fresh outbox from shipped entries,
// or keeps one that is never started up to date with them; such an outbox
// trims its changelog and tombstones when Outbox.Maintain runs, as a
// started one does every MaintenanceInterval.
// Nothing else writes to the file but the Outbox's own methods (Update
// included, whose functions write only the application's buckets).
//
// # Tracing
//
// The outbox traces with OpenTelemetry's API through Config.TracerProvider
// (default: the global provider, a no-op until the application sets one,
// so an outbox nobody configured for tracing starts no recording span and
// allocates no attributes). An event carries its producer's W3C trace
// context, Event.TraceParent and TraceState, stored with it (and shipped
// and restored with its record): its own when it has a valid one, else the
// span context of the ctx given to Enqueue, Ingest or Update; a malformed
// traceparent is ignored, never a reason to refuse the event. Each
// Enqueue or Ingest call runs in a span, SpanEnqueue ("outbox.enqueue"),
// child of the caller's, which covers the wait for the durable group
// commit; its context is what the call's events store. Each delivery
// attempt runs in a span, SpanDeliver ("outbox.deliver", kind client),
// child of the stored context, with the attributes outbox.event.id,
// outbox.endpoint, outbox.attempt, outbox.action and, when there was a
// response, http.response.status_code; an attempt that did not deliver
// has an error status. The Sink gets the attempt span's context (httpsink
// sends it as the request's traceparent), so every attempt of an event,
// across retries and restarts, is in the producer's trace; without a
// tracer the Sink gets the stored context itself.
//
// # Offline tools
//
// A file no process has open for writing can be inspected with an outbox
// opened with Config.ReadOnly (no Sink needed: it delivers nothing), which
// reads under a shared lock: Stats, List, Get, Endpoints, EndpointsPage
// and the changelog view work, every write fails with ErrReadOnly. Check
// verifies the whole file and reports each problem it finds (bucket, page,
// key, what); Compact rewrites it to give back the space of deleted
// events, and refuses a damaged file. outboxd's inspect, check and compact commands are
// built on these.
package outbox
