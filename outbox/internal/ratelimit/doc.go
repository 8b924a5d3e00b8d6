// Package ratelimit keeps the endpoints' rate limits behind the outbox's
// RateLimits: one token-bucket limiter per limited endpoint, in a set that
// readers (the delivery engine, looking a limiter up for every delivery)
// read without a lock, and that Set and Remove replace by copy-on-write
// while deliveries run. A limit that is replaced keeps its limiter, and so
// its tokens. A set may enforce a share of every limit (SetShare: the part
// of a group's limit one member enforces); a new share keeps the tokens
// too, up to the new burst.
package ratelimit
