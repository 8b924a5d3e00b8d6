// Package union serves several outboxes as one: a View answers the calls of
// the HTTP API (it satisfies httpapi.Backend) and of a metrics collector
// (Stats, Health, CommitStats) over a primary outbox and a changing set of
// others.
//
// outboxd uses it in Kafka group mode, where an instance holds its local
// store, which takes the events POSTed to its API, and one store per Kafka
// partition it owns; partitions, and so their stores, come and go with the
// group's assignments. The others func is called on every call of a View, so
// each call sees the stores of that moment; a store in the list that is
// closed meanwhile (its methods fail with outbox.ErrClosed) is skipped, not
// an error. A call fails with outbox.ErrClosed only when every store it
// asked was closed.
//
// # Semantics
//
// Stores are asked in order: the primary first, then the others in the order
// the func returns them (nil entries, and the primary or a store listed
// twice, are left out).
//
//   - Enqueue stores in the primary only.
//   - Get, Delete, Replay, Attempts, DeleteDelivery and ReplayDelivery
//     answer with the first store that holds the ID (every delivery of a
//     topic event is in the store that took the event):
//     the first whose call succeeds (for Get, a tombstone counts: a
//     delivered or deleted event's store holds its ID while the tombstone
//     lasts). When none does, the error is the first that is not
//     outbox.ErrNotFound (such as outbox.ErrNotDead from a replay, or a
//     failing disk: that store may hold the ID), else the primary's
//     outbox.ErrNotFound.
//   - List merges the pages of every store: each is asked with the same
//     options (Limit defaulted and capped as Outbox.List does: pending,
//     dead or unrouted events, with the same filters), the events are
//     merged in the order of their cursors, and the first Limit are kept.
//     A cursor is what a store's List pages by: the ID, or for a delivery
//     of a topic event the ID and the endpoint, so that the deliveries of
//     one event list one after the other, right after the ID. The next
//     cursor is the last one kept when more were found, else the lowest
//     next cursor of the stores that have more (the merged page keeps only
//     the events up to it, so that the next page misses none), else "" when
//     no store has more. Paging with it returns every event of the stores exactly once,
//     in order, as for one store. An event (or delivery) held by two stores
//     (it should not be) is listed once, from the first store. Any error but
//     outbox.ErrClosed fails the call.
//   - ReplayDead replays in every store in turn, each at ReplayFilter.Rate,
//     so the whole stays within it; Limit bounds the sum. It returns the
//     sum, and stops at the first error but outbox.ErrClosed.
//   - Endpoints lists each endpoint name once, merged over the stores that
//     know it: Disabled when it is disabled in any store (DisabledReason and
//     DisabledAt of the store that disabled it first), ThrottledUntil the
//     latest, FailureStreak the sum, LastStatus that of the store with the
//     longest failure streak (the first of them) among those that have seen
//     one, the breaker that of the store where it is most open (open, then
//     half-open; the latest BreakerUntil among equals), Rate the sum. Each
//     store keeps a breaker of its own; the rate limit is shared when the
//     stores share their Config.RateLimits. EndpointsPage merges one page
//     of each store the way List does: the names up to the lowest next
//     cursor of a store that has more, at most limit of them.
//   - RetryEndpoint retries the endpoint in every store that knows it, each
//     at an equal share of the rate, and returns the sum; errors as for
//     EnableEndpoint.
//   - EnableEndpoint enables the endpoint in every store that knows it. It
//     fails with outbox.ErrNotFound when no store knows it, and with the
//     first other error after asking all of them (the endpoint is enabled in
//     the others; enabling again is harmless).
//   - Stats sums every store's Stats field by field (Unrouted and
//     UnroutedDroppedTotal too). OldestPendingAge is the
//     oldest; KeyIndex holds when every store keeps its key index; held and
//     stored endpoints (EndpointsThrottled, EndpointsDisabled,
//     EndpointsBreakerOpen, Endpoints)
//     are counted per store, so an endpoint held in two stores counts twice.
//     LSNs number the changelog of one store and mean nothing summed:
//     LastLSN and ShippedLSN are the primary's. Totals cover the stores of
//     the moment, so they go down when a store leaves the View.
//   - Health is the first error of a store's Health; CommitStats sums the
//     stores' commit statistics, except Running, the longest.
//
// # Settling writes
//
// A View made by WithSettle answers every write (Enqueue, Delete, Replay,
// DeleteDelivery, ReplayDelivery, ReplayDead, EnableEndpoint and
// RetryEndpoint) only once its settle func accepted each store the write
// changed; a call that changed no store does not wait. outboxd's settle in
// Kafka group mode waits until the store's changelog is shipped up to the
// change, so that an answered change survives the loss of the instance: a
// partition store not closed cleanly is rebuilt from its changelog topic,
// and a change not yet shipped there would be undone (a deleted event back,
// a replayed event dead again).
package union
