// Package httpsink delivers outbox events over HTTP. Its *Sink implements
// outbox.Sink and outbox.EndpointResolver on top of
// github.com/hashicorp/go-retryablehttp.
//
// # Destinations
//
// An event's Destination names a configured Endpoint (URL, Standard Webhooks
// secrets, headers, timeout, concurrency cap) or, when Config.AllowRawURLs is
// on, is an absolute http or https URL; each scheme://host:port of a raw URL
// is its own endpoint for throttling and disabling.
//
// Endpoints can be added, replaced and removed while the sink delivers
// (PutEndpoint, RemoveEndpoint): a delivery under way finishes on the
// definition it started with, the next one takes the new definition.
//
// # Requests
//
// Every attempt sends the event's method (POST by default), payload and
// headers verbatim, then the endpoint's headers (which win over the event's
// headers of the same name), Content-Type application/json when a payload
// has none, and the headers the sink owns, which replace any an event
// carried:
//
//	Idempotency-Key    the event ID, the same on every attempt
//	webhook-id         the event ID (Standard Webhooks)
//	webhook-timestamp  unix seconds of this attempt
//	webhook-signature  "v1,<base64 HMAC-SHA256 of id.timestamp.payload>" per
//	                   secret, space-separated (endpoints with Secrets only)
//
// When the attempt's context holds a valid span context (the outbox's
// attempt span, a child of the trace context stored with the event), the
// request also carries its W3C traceparent and tracestate, replacing an
// event's or endpoint's headers of those names: the receiver's trace
// continues the producer's.
//
// A secret is rotated without a gap by moving the old one to
// Endpoint.RetiringSecrets with the end of its grace period, next to the new
// one in Endpoint.Secrets: until then every attempt carries both
// signatures (Standard Webhooks' multiple signatures), after it only the
// new one, with no further change to the endpoint.
//
// Receivers check those signatures with a Verifier (NewVerifier with the
// endpoint's secrets, then Verifier.Verify on each request): it checks the
// signature in constant time and the timestamp against a tolerance (five
// minutes by default), and says why a delivery does not verify.
//
// # Outcomes
//
// The response is classified by the status policy table (Policy): exact code,
// then class, then a default row, plus an error row for transport failures
// and timeouts. Retry-After is honoured in both its forms (delay-seconds and
// HTTP-date), capped by Config.MaxRetryAfter. Transport failures and 502, 503
// and 504 are retried a few times inside Deliver within a small time budget
// (Config.InlineRetries, Config.InlineRetryBudget); nothing else is, a 404
// least of all. The context and the endpoint's timeout bound the whole
// delivery. Redirects are not followed unless Config.FollowRedirects is set.
//
// Inline retries go only to an endpoint that has not been failing. The sink
// keeps each endpoint's failure streak (deliveries in a row that got no
// answer or a retried 502, 503 or 504; any other answer, a 500 or 429
// included, shows the receiver is up and sets it back to zero), and a delivery retries inline only while the
// streak was zero when it started and no other delivery to the endpoint has
// failed since. A dead endpoint thus costs one connection per delivery,
// even when many meet it at once, and each failure comes back to the outbox
// as a result of its own, which its circuit breaker counts. Raw-URL origins
// keep their streaks in a table of fixed size. A circuit breaker's probe
// (outbox.Delivery.Probe) is never retried inline, whatever the streak: the
// endpoint's state may have come from elsewhere (another store of the
// process, another instance of a Kafka group) before this sink saw it
// fail, and a probe costs the receiver one request.
//
// Response bodies are read through a limit: the first Config.MaxBodyExcerpt
// bytes of a failed response are kept for the dead letters, up to
// Config.MaxDrain bytes are drained so the connection goes back to the
// keep-alive pool, and a longer body closes the connection instead. When the
// outbox logs the attempt (Delivery.LogResponse), the first
// Delivery.ExcerptBytes of every response (at most 64 KiB, success included)
// are kept as received, with the response headers outbox.IsLoggedHeader
// accepts; the endpoint's secrets and header values, the event's credential
// headers and the request's signature are replaced by "xxxxx" in both,
// should a receiver echo them.
//
// # Address guard
//
// A check at dial time (net.Dialer.Control, after name resolution, so DNS
// rebinding cannot get around it) refuses private, loopback, link-local,
// unspecified, multicast, carrier-grade NAT, cloud metadata and other
// non-public addresses, IPv4 and IPv6, including IPv4-mapped, NAT64 and 6to4
// forms. It is on by default for every destination; Endpoint.AllowPrivate,
// Config.AllowPrivateNetworks and Config.AllowedNetworks open it. Environment
// proxies are not used, so the guard always sees the receiver's address.
// A named endpoint whose host is refused whatever it resolves to is refused
// when it is defined (New, PutEndpoint, CheckEndpoint) rather than at its
// first delivery: a literal address, localhost and *.localhost (any case,
// trailing dot), and the numeric forms resolvers read as IPv4 ("127.1",
// "2130706433", "0x7f000001", "017700000001").
//
// # Limits of a definition
//
// An endpoint has at most MaxHeaders headers of at most MaxHeaderBytes,
// a URL of at most MaxURLBytes, a timeout from MinTimeout to MaxTimeout,
// and a name that does not start with a dot; checking a definition takes
// time linear in its size.
//
// # Secrets
//
// Errors and logs never hold header values or signing secrets, and URLs in
// them are redacted (RedactURL): user information and query values are
// replaced.
package httpsink
