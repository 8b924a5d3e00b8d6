// Package httpapi is the HTTP API of the outboxd sidecar as an importable
// http.Handler, so that a Go service embedding an outbox can mount the same
// ingest and admin API on its own mux.
//
// Routes (all JSON, errors as {"error": "..."} naming the bad field):
//
//	POST   /v1/events                      one event object or an array of them: 202 {"ids": [...]} once durable;
//	                                       409 when an event reuses an ID with other content, or the ID of an
//	                                       event an operator deleted within the tombstone retention (the
//	                                       message says which, and when it was deleted); an ID delivered
//	                                       within the retention is a duplicate, accepted and not sent again
//	GET    /v1/events?state=&limit=&after=&destination=&topic=
//	                                       list pending (default), dead or unrouted events in ID order, at most limit
//	                                       (default 100, at most 1000) after the cursor: 200 {"events": [...], "next": "..."};
//	                                       next is "" on the last page. The cursor is an ID (with the endpoint for a
//	                                       delivery of a topic event), so pages stay consistent while events are added
//	                                       and removed.
//	GET    /v1/events/{id}                 one event (pending, dead, or delivered or deleted while its tombstone lasts);
//	                                       a topic event with its deliveries
//	DELETE /v1/events/{id}[?endpoint=]     drop a pending or dead event, or one delivery of a topic event: 204
//	GET    /v1/events/{id}/attempts[?endpoint=]
//	                                       the event's attempt log, oldest first: 200 {"id", "attempts": [...]}, 404
//	POST   /v1/events/{id}/replay[?endpoint=]
//	                                       move a dead event, or one dead delivery of a topic event, back to pending:
//	                                       202, 404, 409 when not dead
//	POST   /v1/dead/replay                 replay dead events matching a filter at a bounded rate: 202 {"replayed": n}
//	GET    /v1/endpoints?limit=&after=     endpoint states by name, with their definitions (Config.Endpoints), at most
//	                                       limit (default 100, at most 1000) after the cursor: 200 {"endpoints": [...],
//	                                       "next": "..."}; next is the last name of a full page and "" on the last page
//	GET    /v1/endpoints/{name}            one endpoint, as the list shows it, with its "backfill": {"running",
//	                                       "deliveries"} (see below)
//	POST   /v1/endpoints/{name}            create a managed endpoint: 201 with its "secret", shown only then; with
//	                                       "since", the "backfill" ID of its backfill (outbox.Outbox.BackfillSince)
//	PUT    /v1/endpoints/{name}            replace a managed endpoint's definition: 200 (and "since" as POST)
//	DELETE /v1/endpoints/{name}            delete a managed endpoint: 200 {"dead_lettered": n}
//	POST   /v1/endpoints/{name}/rotate-secret
//	                                       a new signing secret, the old one signing until the grace ends:
//	                                       200 {"secret", "previous_valid_until"}
//	POST   /v1/endpoints/{name}/enable     re-enable a disabled endpoint
//	POST   /v1/endpoints/{name}/retry      close the breaker, make its pending events due now, paced: 202 {"retried": n}
//	GET    /v1/archive?topic=&endpoint=&key_prefix=&from=&to=&cursor=&limit=
//	                                       the delivered events kept (outbox.Config.Retain), one index range a page:
//	                                       200 {"events": [...], "next": "..."}; 404 from a Backend without
//	                                       SearchArchive
//	POST   /v1/archive/replay              replay kept deliveries in the background, paced, to their endpoints or a
//	                                       "target": 202 {"id", "state", "replayed", "skipped", "started_at"}
//	GET    /v1/archive/replay/{id}         a replay's (or backfill's) progress; DELETE cancels it
//	GET    /v1/stats                       counts: {"pending", "dead", "unrouted", "unrouted_dropped_total", "in_flight",
//	                                       "delivered_total", "failed_total", "oldest_pending_age_seconds", "archived",
//	                                       "backfill": {"running", "routed", "deliveries", "remaining"}}, plus the
//	                                       fields of Config.ExtraStats
//	GET    /v1/openapi.json                the OpenAPI 3.1 document of these routes (OpenAPI), without the token
//
// OpenAPI returns that document: every route with its parameters, bodies,
// answers and errors, generated clients' source of truth. Routes lists the
// routes New mounts; the package's tests check that they are exactly the
// document's, and validate the answers of the API tests against it.
//
// New serves a Backend: an *outbox.Outbox, or several outboxes served as one
// (package outbox/union, as outboxd does in Kafka group mode). A Backend
// that cannot take a request now for a reason its client may read returns
// an *UnavailableError: a 503 with that reason (outboxd's group mode, whose
// Enqueue produces to Kafka, does when the brokers refuse or do not
// answer).
//
// An event as POST /v1/events takes it:
//
//	{"id"?: string, "key"?: string, "destination"?: string, "topic"?: string, "method"?: string,
//	 "headers"?: {string: string}, "payload"?: any JSON value, "payload_base64"?: string,
//	 "deliver_at"?: string, "delay"?: string}
//
// An event names exactly one of destination and topic (else a 400 naming
// both fields); a topic is checked as outbox.ValidateTopic says. payload is
// delivered as its JSON text, payload_base64 as its decoded bytes
// (one of the two); without id the outbox generates a UUIDv7; method
// defaults to POST. deliver_at (an RFC 3339 time) or delay (a duration such
// as "90s" or "2h30m", from when the request is read; not negative)
// schedules the event: it is first attempted then (outbox.Event.DeliverAt).
// Giving both, an unparseable value, or a time beyond the outbox's horizon
// (outbox.Config.MaxSchedule, 30 days) is a 400 naming the field. Unknown
// fields are refused. An event as the API returns it: {"id", "key",
// "destination", "topic"?, "endpoint"?, "state": "pending" | "dead" |
// "delivered" | "deleted" | "unrouted", "attempts", "created_at", "next_attempt_at",
// "deliver_at", "last_status", "last_error", "dead_reason",
// "deliveries"?} with RFC 3339 times (empty ones left out).
//
// # Topic events and their deliveries
//
// A topic event is stored as one delivery per endpoint subscribed to its
// topic (see package outbox, "Topics and subscriptions"), each with its own
// state, attempts and schedule, all under the event's ID. GET
// /v1/events/{id} shows the event whole: its state is pending while any
// delivery is pending, else dead while any is dead, and "deliveries" lists
// each: {"endpoint", "state", "attempts", "next_attempt_at"?,
// "last_status", "last_error", "dead_reason"?, "dead_at"?}. GET /v1/events
// lists deliveries, one event each with its "endpoint" (so one ID may be
// listed several times, once per endpoint), and filters them by "topic".
// state=unrouted lists the topic events no endpoint subscribes to yet,
// whose state is "unrouted": kept, without an endpoint, until a
// subscription routes them, or until their "next_attempt_at", when they
// become dead letters. DELETE /v1/events/{id}, POST /v1/events/{id}/replay and
// GET /v1/events/{id}/attempts act on every delivery of a topic event, or
// with ?endpoint=NAME on that endpoint's delivery only; any other query
// parameter is refused (400), so that a misspelt one never widens a delete
// or replay to the whole event. Every attempt of a topic event carries its
// "endpoint"; each delivery numbers its own attempts, and the log lists
// them all by start time. POST /v1/dead/replay takes a "topic" filter too.
//
// Creating or changing a subscription (a managed endpoint's POST or PUT)
// answers at once: the unrouted events it matches are routed in the
// background, a few hundred per write transaction (the backfill, see
// outbox.Outbox.SetSubscriptions), and resume after a restart. GET
// /v1/stats shows its progress ("backfill": whether it runs, the events
// it routed and the deliveries it made since the start, and "remaining",
// the events still unrouted); GET /v1/endpoints/{name} shows the
// endpoint's part ("backfill": whether it runs for the endpoint, and the
// deliveries to it made so far).
//
// The endpoint management routes call Config.Endpoints, an
// EndpointManager (outboxd's stores the endpoints in the outbox's file);
// without one they answer 409. Their body is {"url", "topics"?,
// "filter"?, "headers"?, "timeout"? (a duration), "max_in_flight"?,
// "rate"?, "burst"?}; a bad field is a 400 naming it, a static endpoint or
// a taken name a 409, an unknown endpoint a 404. GET /v1/endpoints never
// shows a secret or a header value.
//
// An attempt as GET /v1/events/{id}/attempts returns it (see
// outbox.Attempts): {"attempt" (1, 2, ... in order), "delivery" (the
// delivery number the sink saw), "endpoint"? (a topic event's delivery),
// "started_at", "duration_ms", "outcome"
// (success, retry, park, throttle, disable, dead), "status" (0 without a
// response), "error"?, "response"?: {"headers"?: {name: value},
// "body"? | "body_base64"?}}. The body's excerpt is "body" when it is valid
// UTF-8 and "body_base64" otherwise, never both. A pending or dead event
// lists its attempts, and so does a delivered or deleted one while its
// tombstone lasts; otherwise 404.
//
// Every request must carry "Authorization: Bearer TOKEN" when Config.Token
// is set (compared in constant time), except GET /v1/openapi.json: the
// document holds nothing secret, and tools read it before they have a token.
// A wrong token is answered 401 after a delay that grows with each one from
// the same client address, and the right one at once (Config.Guard, package
// authguard). Request bodies are bounded by
// Config.MaxBodyBytes (413), payloads by Config.MaxPayloadBytes (413), and a
// batch by Config.MaxBatch (413); a batch is stored in one durable Enqueue
// call, so it is accepted or rejected as a whole. A request whose events
// would create more deliveries than the Backend allows in one call (one per
// event with a destination, one per subscribed endpoint of a topic event;
// outbox.Config.MaxDeliveriesPerCall, 10,000 by default) is refused whole
// with a 413 naming the setting (Config.MaxDeliveriesSetting) and the
// numbers. Unknown routes answer 404
// and known routes with another method 405, both in JSON.
//
// A body takes memory as its bytes arrive, not as its Content-Length
// announces, from a budget shared by all requests (Config.MaxBodyMemory):
// a request that would go over it answers 503 with "Retry-After: 1". A body
// must arrive within Config.ReadBodyTimeout of when reading starts (408).
// A Content-Encoding other than identity answers 415. The handler bounds
// only what it reads; the http.Server it runs in should bound connections,
// header sizes and header and idle times (outboxd serve does).
//
// What encoding/json accepts but would change is refused with a 400 naming
// the field: invalid UTF-8 and lone surrogate escapes in strings (they would
// become U+FFFD, so that distinct IDs collide) and keys given twice (the
// last would win). Methods and headers are checked by Enqueue
// (outbox.ValidMethod, outbox.ReservedHeader...), whose refusal is a 400
// naming the event and field. An ID taken by an event with other content is
// a 409 naming events[i].id.
//
// When the store's disk is full (ENOSPC or EDQUOT) a request answers 503
// with "Retry-After: 5": the failed commit changed nothing, so the same
// request can simply be sent again. Other server-side failures answer 500;
// neither answer repeats the underlying error, which may name files: it goes
// to Config.Logger.
//
// # Tracing
//
// POST /v1/events runs in a server span, SpanIngest, made by
// Config.TracerProvider (default: the global provider, a no-op until the
// application sets one): a child of the request's W3C traceparent and
// tracestate when it carries a valid one (read with the W3C Trace Context
// propagator whatever the global propagator is), with the attributes
// http.request.method, http.route and http.response.status_code. The
// request's events are stored with the trace context of the enqueue span
// under it (see package outbox, "Tracing"), so that each delivery attempt
// continues the producer's trace; an event object has no trace field of
// its own.
package httpapi
