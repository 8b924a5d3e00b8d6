// Package console is the web console of an outbox: server-rendered HTML
// pages (html/template, with its stylesheet embedded; no script, no CDN)
// that show what is pending, dead, failing or throttled, and let an
// operator replay, delete, enable and retry.
//
// # Pages
//
// Mounted at Config.Path (default "/ui/"): the overview (counts, rates,
// the oldest pending event's age, and a chart of the last hour from samples
// the console takes every Config.SampleInterval); events (pending, dead or
// unrouted, filtered by topic, destination, key prefix and creation time,
// paged with List's cursor: each page reads one page of the store, whatever
// its size; a topic event's deliveries are rows of their own, with their
// topic and endpoint); one event (payload and headers, for a topic event
// its topic and a table of its deliveries, each replayed or deleted on its
// own, its attempt log with the endpoint of each attempt and, when the
// Backend keeps it, its changelog history); dead letters (replay one event
// or delivery, delete one, replay by filter, topic included, at a chosen
// pace in the background); history (the delivered events the Backend keeps
// when it has SearchArchive and, for an *outbox.Outbox, Config.Retain is
// set: filtered by topic or pattern, endpoint, key prefix and delivery
// time, each with its headers and the start of its payload, paged with
// SearchArchive's cursor; without an archive the page says retention is
// off and how to turn it on); endpoints (disabled,
// throttled, breaker, rate limit and rate, failure streak; enable, retry
// now; 50 a page by name, paged with EndpointsPage's cursor); and, when Config.Partitions is set, the partitions of a Kafka group
// member.
//
// # Security
//
// With Config.Token set, every page but the login form redirects to it; the
// token is compared in constant time and a right one creates a server-side
// session (a random ID in an HttpOnly, SameSite=Strict cookie, Secure over
// TLS or when a trusted proxy of Config.Guard says the request came over
// HTTPS) that lasts Config.SessionTTL. Wrong tokens are answered after a
// delay that grows with each one from the same client address
// (Config.Guard, package authguard); the right one is answered at once. Every action is a POST carrying a
// CSRF token bound to the session (without a token, to a random
// per-browser cookie) and goes through a confirmation step. Every answer
// carries a Content-Security-Policy that allows the console's own
// stylesheet and nothing inline, X-Content-Type-Options: nosniff and
// Referrer-Policy: no-referrer. Everything that comes from an event (IDs,
// keys, payloads, headers, response excerpts) is escaped by html/template,
// invalid UTF-8 shown as U+FFFD (with a hex dump of payloads).
//
// # Lifetime
//
// New starts a sampling goroutine; a replay by filter runs in another
// until it ends. Close stops both and waits for them.
package console
