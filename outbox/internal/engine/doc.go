// Package engine is the outbox's delivery machinery: it takes due events from
// the store, hands them to the Sink through a bounded pool of workers, and
// commits their outcomes, keeping each endpoint's holds (throttle, disable,
// circuit breaker) and rate limit.
//
// It works in three jobs, as river splits its producer and completer:
//
//   - dispatch: the delivery punctuation walks the endpoints that have due
//     events (earliest first) and reads, in one short read transaction
//     closed before any delivery starts, each one's due events up to what
//     it may still take into the ready queue: twice its in-flight limit,
//     less what it holds. A held endpoint (disabled, throttled, breaker
//     open) costs one look whatever its backlog; events in flight, busy
//     keys when order is kept and a rate limit's excess are skipped.
//     Workers go first to endpoints under their fair share of Concurrency,
//     then to any endpoint within its limit; a slow endpoint never takes
//     the last eighth of them.
//   - adapting: each endpoint's in-flight limit grows while its deliveries
//     succeed at a steady latency and shrinks on failures and rising
//     latency (additive increase, multiplicative decrease), between 1 and
//     MaxPerEndpoint.
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
