// Package engine is the outbox's delivery machinery: it takes due events from
// the store, hands them to the Sink through a bounded pool of workers, and
// commits their outcomes, keeping each endpoint's holds (throttle, disable,
// circuit breaker) and rate limit.
//
// It works in three jobs, as river splits its producer and completer:
//
//   - dispatch: the delivery punctuation reads a snapshot of due events in a
//     short read transaction (closed before any delivery starts) into a ready
//     queue, skipping events in flight, held endpoints (whose events it
//     pushes back to the end of the hold), endpoints at their share of the
//     queue or their rate limit, and busy keys when order is kept; workers
//     take ready events within the overall and per-endpoint limits.
//   - the completer gathers finished attempts and commits their outcomes in
//     batched write transactions: a compare-and-delete on the delivered
//     version for a success, a reschedule, or a dead letter, as the status
//     policy table says, with the endpoints' new states and the attempt log.
//     A commit the store refuses is retried; no delivery starts meanwhile.
//   - holds own the endpoints' durable states and the lock that orders their
//     writes, so that an operator's enable or retry is never overwritten by
//     an older outcome.
//
// An event is in flight from the moment a punctuation takes it until its
// outcome is committed, and is never taken twice meanwhile. The engine does
// not import the outbox package: the outbox gives it a Config of values and
// functions (the Sink call, the wake-up, hooks) and converts its types.
package engine
