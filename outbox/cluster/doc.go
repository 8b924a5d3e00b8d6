// Package cluster lets any member of a group of outboxd instances answer
// for any event. In Kafka group mode each event lives in the store of the
// partition it was produced to, owned by one member; a Handler, mounted in
// front of a member's own API (package httpapi over its stores), finds the
// member that holds an event and answers with its answer.
//
// # Event routes
//
// GET /v1/events/{id}, GET /v1/events/{id}/attempts, POST
// /v1/events/{id}/replay and DELETE /v1/events/{id} are answered by the
// local API first: any answer but 404 (the event found, a refused token,
// 409 for a replay of an event that is not dead) is the answer. On a 404
// the other members (Config.Peers) are asked at once, since an event ID
// does not always tell its partition; the member that holds the event
// answers, and its answer is passed on with ServedByHeader naming it, at
// once: the requests to the others (which answer 404) are cancelled, so a
// slow member holds up only the requests for events nobody else holds. When no member holds the event, the answer is the
// local 404. When some members could not be asked (no answer within
// Config.Timeout, a connection refused, an answer 5xx or 401), and none
// that answered holds the event, the answer is 502 (504 when every one of
// them timed out) with {"error": ..., "unreachable": [{"member", "api",
// "owner", "error"}]}, naming those members and their addresses, and the
// owner of the event's partition among them when the ID tells it: the
// client can send the request there itself. When the members cannot be
// learned (the brokers do not answer), it is 503.
//
// A forwarded request carries the client's Authorization header (the
// token; every member of a group must share it) and trace context, and
// ForwardedHeader with the forwarding member's address. A request with
// that header is answered by the local API alone: it is never forwarded
// again, so members cannot forward in circles. Nothing is forwarded before
// the local API accepted the token: a request without it is refused with
// 401 where it arrived. The token is never logged. Forwarded requests
// carry no body (none of these routes reads one) and follow no redirect.
//
// An event may briefly be held by no member while its partition moves
// (between the revocation of the old owner's store and the restore of the
// new owner's). A member whose partitions are not all serving, or that is
// between two generations of the group (Config.Moving), says so with
// MovingHeader on its answers to forwarded requests; when no member holds
// the event and one of them (or this one) has partitions on the move, the
// answer is 503 with Retry-After: 1 rather than a 404 that may be false.
//
// # Stale reads while partitions move
//
// A moving partition has copies, though nobody serves it: the new owner's
// store caught up from its checkpoint, the old owner's store handed over or
// closed with its checkpoint, standby stores. A member answers from its
// copies (Config.Stale) the reads GET /v1/events/{id} and GET
// /v1/events/{id}/attempts in the one case that would otherwise be the
// 503 above: no member serves the event and partitions are moving. The
// member asked then asks its own copies and, with AcceptStaleHeader, the
// other members for theirs, and answers with the copy that reflects the
// highest changelog offset (its own on a tie): 200 with StaleHeader
// ("Outbox-Stale: true"), StaleOffsetHeader ("Outbox-Stale-Offset: <the
// changelog offset the copy holds every record below>"), and
// ServedByHeader when another member's copy answered. Only when no copy
// holds the event is the answer 503. A fresh answer always wins: a member
// that serves the event answers as before, and copies are not asked; one
// whose partition starts serving while copies are asked answers fresh; and
// while nothing moves copies are never asked. A stale answer is the event as the
// copy holds it: it may miss a delivery, an attempt or a replay its owner
// made after the offset, and a copy lagging behind the owner may still
// hold an event the owner has delivered. Writes (POST
// /v1/events/{id}/replay, DELETE /v1/events/{id}) are never answered from
// a copy: they are answered 503 until the owner serves the partition.
//
// The token goes to the addresses the members announce, and only to http
// and https URLs without credentials. Whoever can join the consumer group
// can announce an address: the group's members are trusted as much as the
// token (they read the input topic and write the changelog anyway), so
// control who may join the group (Kafka ACLs on the group and its topics)
// and prefer https addresses between hosts.
//
// # Views of the whole group
//
// GET /v1/stats?scope=cluster sums the counts (pending, dead, in_flight,
// delivered_total, failed_total) of every member's own GET /v1/stats; the
// oldest pending age is the largest. It adds "scope": "cluster",
// "complete" (whether every member answered) and "members": per member its
// ID, address, whether it answered (and why not) and its own answer under
// "stats" (with its "kafka" partitions: pending and dead per partition).
// GET /v1/endpoints?scope=cluster merges each endpoint's state over the
// members as one member merges its stores: disabled anywhere is disabled,
// the latest throttle and the most open breaker stand for all, rates and
// failure streaks add up; "members" says which answered. It pages as one
// member does: every member is asked for the same limit and after, and the
// names up to the lowest "next" of a member that has more are kept (at
// most limit of them), so that each is merged over every member and paging
// misses none; "next" is the cursor of the following page. A member that
// does not answer leaves the sums short and "complete" false; the answer
// is still 200. Without scope, or with scope=local, both answer for this
// member's stores, as before; another scope is 400.
//
// # Enabling an endpoint
//
// An endpoint's state (disabled by a 410, throttled, its breaker) is kept
// in every store that delivers to it, on every member. POST
// /v1/endpoints/{name}/enable is therefore sent to every member: the
// answer is the endpoint's state merged over those that know it, 404 when
// none does, and 502 or 504 naming the members that could not be asked
// (the others enabled it; enabling again is harmless). POST
// /v1/endpoints/{name}/retry, whose pace is per store, stays local.
//
// Every other route is the local API's, untouched.
package cluster
