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
// 409 for a replay of an event that is not dead) is the answer. On a 404,
// when the request names the event's partition (an ID that tells it,
// Config.PartitionOf, or for GET /v1/events/{id} a key= parameter with
// the event's key, Config.PartitionOfKey over the members' partitions)
// and another member owns that partition (Config.Peers), that member
// alone is asked: one forwarded request, whose answer, when the member
// holds the event, is passed on with ServedByHeader naming it. Otherwise,
// and when the owner does not hold the event (the partition moved since
// the assignment was read) or cannot be asked, the other members are
// asked at once (the owner is not asked twice: its answer counts); the
// member that holds the event answers, and its answer is passed on with
// ServedByHeader naming it, at once: the requests to the others (which
// answer 404) are cancelled, so a slow member holds up only the requests
// for events nobody else holds. When no member holds the event, the answer
// is the local 404. When some members could not be asked (no answer within
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
// Where a route has a scope= parameter, scope=local answers for this
// member's stores alone and scope=cluster for every member of the group;
// another scope is 400. A request that carries ForwardedHeader is always
// answered for the member alone, whatever its scope. Without scope, GET
// /v1/events, POST /v1/dead/replay, POST /v1/endpoints/{name}/retry and
// GET /v1/stats answer for the group, GET /v1/endpoints for the member.
// The local API answers first: its refusal (a bad parameter or body, a
// refused token) is the answer, and nothing is forwarded. An answer for
// the group adds "scope": "cluster", "complete" (whether every member
// answered) and "members": per member its ID, address, whether it
// answered (and why not) and its part. A member that does not answer a
// view leaves "complete" false; the answer is still 200.
//
// GET /v1/events lists the events of every member: each is asked for the
// same page (the same state, destination and topic filters, limit and
// after) and the pages are merged in the listing's order (by ID, a topic
// event's deliveries by ID and endpoint), an event listed by two members
// once. Every member lists in that order and resumes after any place in
// it, so the cursor is a place in the group's order (it stays opaque to
// clients): only the events up to the lowest "next" of a member that has
// more are kept (that member may hold events just after it), at most
// limit of them, and "next" is the place of the last one kept when there
// are more, else that lowest "next", else "". Paging with it returns every
// event of the members that answered exactly once, in order, whichever
// member holds it and even when partitions move between pages; a page
// without a member's answer lacks that member's events.
//
// GET /v1/stats sums the counts (pending, dead, in_flight,
// delivered_total, failed_total) of every member's own GET /v1/stats; the
// oldest pending age is the largest. Each member's own answer is under
// "members" ("stats", with its "kafka" partitions: pending and dead per
// partition). GET /v1/endpoints?scope=cluster merges each endpoint's state
// over the members as one member merges its stores: disabled anywhere is
// disabled, the latest throttle and the most open breaker stand for all,
// rates and failure streaks add up. It pages as the listing does, by name.
//
// POST /v1/dead/replay is done by every member in turn, this one first,
// each at the filter's rate (so that the group replays at that pace) and
// with the filter's limit less what the members before it replayed; it
// stops once the limit is reached. A replay is paced: the requests to the
// members are bounded by the client's request only, not Config.Timeout.
// POST /v1/endpoints/{name}/retry is sent to every member at once, each
// with an equal share of the rate, so that the group's pace is the rate.
// Their answers are 202 with the sum ("replayed", "retried") and each
// member's count under "members"; a retry is 404 when no member knows
// the endpoint, and a member's own refusal (409: disabled there) is the
// answer. Members that could not be asked (or answered otherwise) make it
// 502, or 504 when every one of them timed out, with "error" and
// "unreachable" naming them as for an event route, and the sum over the
// others: send the request again for theirs.
//
// Counts.Forwarded counts the requests sent to other members, whatever
// the route.
//
// # Enabling an endpoint
//
// An endpoint's state (disabled by a 410, throttled, its breaker) is kept
// by every member, one per member for all of its stores. A member that
// enables an endpoint also publishes the enable to the group (outboxd
// writes it to the group's endpoints topic, see outbox.SharedEndpoints),
// so every member lifts it; POST /v1/endpoints/{name}/enable is sent to
// every member all the same, so the answer says at once what each holds:
// it is the endpoint's state merged over those that know it, 404 when
// none does, and 502 or 504 naming the members that could not be asked
// (the others enabled it, and the published enable reaches them too;
// enabling again is harmless).
//
// Every other route is the local API's, untouched.
package cluster
