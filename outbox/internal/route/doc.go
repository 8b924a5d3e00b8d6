// Package route is the outbox's fan-out routing: it matches an event's topic
// and headers to the subscribed endpoints, makes one delivery record per
// endpoint (stored under the event's ID, a separator and the endpoint, so
// that each has its own state, attempts, schedule and dead letter), and
// keeps an event no endpoint subscribes to as unrouted until a subscription
// appears or its retention ends, when it becomes a dead letter.
//
// A Router is immutable: the outbox swaps a new one in when the
// subscriptions change, then routes the kept unrouted events it matches
// in the background (Mover.RouteUnrouted), in bounded batches: each batch
// is one write transaction that removes its events' unrouted records and
// stores their deliveries. An event that changed meanwhile is left as it
// is.
package route
