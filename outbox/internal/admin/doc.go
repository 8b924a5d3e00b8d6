// Package admin is the outbox's operator side of the store, which the
// outbox's admin verbs wrap: it reads a topic event as a whole (the event
// with the state of each delivery, and the attempts of all of them),
// filters what List and ReplayDead select, replays dead letters at a
// pace, estimates the age of the oldest pending event without a full scan,
// and runs the maintenance trims. It works on store records and plain
// values; the outbox converts them to its own types.
package admin
