package store

import (
	"bytes"
	"maps"
	"strconv"
	"time"
)

// Record is one event as the store keeps it. Pending records live in the
// events bucket (indexed by due time), dead letters in the dead bucket.
type Record struct {
	// ID identifies the record; it is the bbolt key, stored byte for byte.
	ID string
	// Key is optional: per-key ordering (DueQuery.HeadOfKeyOnly) and
	// coalescing (UpsertKey).
	Key string
	// Destination is an endpoint name or an absolute URL.
	Destination string
	// Endpoint is the resolved endpoint name: the unit of throttling,
	// disabling and concurrency.
	Endpoint string
	// Method is the HTTP method.
	Method string
	// Headers are encoded sorted by name, so equal maps give equal bytes.
	// An empty map decodes as nil.
	Headers map[string]string
	// Payload is delivered verbatim. An empty payload decodes as nil.
	Payload []byte
	// CreatedAt is when the event was accepted. It is stored in UTC with
	// nanosecond precision; Insert sets it to Options.Now() when zero.
	CreatedAt time.Time
	// Attempts counts the attempts spent (parks do not spend one).
	Attempts int
	// Deliveries counts the attempts made, parks included.
	Deliveries int
	// NextAttemptAt is when the record is due; Insert sets it to CreatedAt,
	// or to DeliverAt when that is later, when zero.
	NextAttemptAt time.Time
	// DeliverAt is the event's not-before time (scheduled delivery); zero
	// when it has none. It is kept with the record, so the schedule
	// survives a restart; Insert and Replay never make a record due before
	// it. It is bookkeeping, not content: SameContent ignores it.
	DeliverAt time.Time
	// LastStatus is the HTTP status of the last attempt (0 if none).
	LastStatus int
	// LastError describes the last failed attempt.
	LastError string
	// Version is the LSN of the last change to this record. The store sets
	// it; what a caller puts there is ignored.
	Version uint64
	// DeadAt is when the record became a dead letter; zero unless dead.
	DeadAt time.Time
	// DeadReason says why the record is dead; non-empty iff dead. A record
	// given to Insert with DeadReason set goes straight to the dead letters.
	DeadReason string
	// TraceParent is the W3C traceparent of the producer's span
	// ("00-<trace-id>-<parent-id>-<flags>"), empty when the event came with
	// none; TraceState is its tracestate, kept only with a TraceParent. The
	// store keeps both as given (the outbox validates them): they are
	// bookkeeping, not content, and SameContent ignores them.
	TraceParent string
	TraceState  string
	// Topic is the topic of a fan-out event; empty for an event with one
	// destination. A record with a Topic is one delivery of that event (or
	// the event kept unrouted, with an empty Endpoint), stored under the ID
	// GroupID ‖ "\x1f" ‖ Endpoint: the records of one event form a group
	// (see GroupOf) that Insert deduplicates as a whole, and its Key orders
	// its deliveries per endpoint (the key index scopes it by Endpoint). It
	// is content: SameContent compares it.
	Topic string

	// seq orders the pending records of one Key (the LSN at which the record
	// became pending). It is kept by the store and encoded with the record.
	seq uint64
}

// SameContent reports whether r and o carry the same event: equal ID, Key,
// Destination, Method, Headers and Payload. It is the test that tells an
// idempotent re-enqueue from a conflict. A nil map equals an empty one, and a
// nil payload an empty one. The schedule (NextAttemptAt, DeliverAt) is not
// content: a client that retries an enqueue with a relative delay computes
// another DeliverAt each time, and its retry must stay a no-op.
func (r *Record) SameContent(o *Record) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.ID == o.ID && r.Key == o.Key && r.Destination == o.Destination && r.Topic == o.Topic &&
		r.Method == o.Method && maps.Equal(r.Headers, o.Headers) && bytes.Equal(r.Payload, o.Payload)
}

// clone returns a deep copy of r (headers and payload included).
func (r *Record) clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	if r.Headers != nil {
		c.Headers = maps.Clone(r.Headers)
	}
	if r.Payload != nil {
		c.Payload = bytes.Clone(r.Payload)
	}
	return &c
}

// State is where a record is.
type State uint8

// States of a record.
const (
	// StateUnknown is the zero State: not found.
	StateUnknown State = iota
	// StatePending records wait for delivery.
	StatePending
	// StateDead records are dead letters.
	StateDead
	// StateDelivered means a tombstone is live for the ID: the record was
	// delivered or superseded, and its ID is remembered until the tombstone
	// is trimmed. There is no record body.
	StateDelivered
	// StateDeleted means a tombstone is live for the ID of a record that an
	// operator dropped (Drop). There is no record body.
	StateDeleted
)

// String returns "unknown", "pending", "dead", "delivered" or "deleted".
func (s State) String() string {
	switch s {
	case StatePending:
		return "pending"
	case StateDead:
		return "dead"
	case StateDelivered:
		return "delivered"
	case StateDeleted:
		return "deleted"
	case StateUnknown:
		return "unknown"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Op is the kind of a changelog entry.
type Op uint8

// Changelog operations. Deleting ops (OpDelete, OpDrop, OpSupersede) carry no
// record; all others carry the record as it is after the change.
const (
	opInvalid Op = iota
	// OpEnqueue: a record was inserted pending.
	OpEnqueue
	// OpUpdate: read-modify-write (Update) or a coalescing update in place.
	OpUpdate
	// OpReschedule: an attempt's outcome was retry, park or throttle.
	OpReschedule
	// OpDelete: the record was delivered; a tombstone remains.
	OpDelete
	// OpDead: the record became (or was inserted as) a dead letter.
	OpDead
	// OpReplay: a dead letter went back to pending.
	OpReplay
	// OpDrop: an operator deleted a pending or dead record; a tombstone remains.
	OpDrop
	// OpSupersede: a coalescing upsert replaced the record with one under
	// another ID; a tombstone remains.
	OpSupersede
	opLimit
)

var opNames = [...]string{"invalid", "enqueue", "update", "reschedule", "delete", "dead", "replay", "drop", "supersede"}

// String returns the op's lower-case name ("enqueue", "delete", ...).
func (o Op) String() string {
	if o < opLimit {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Deleting reports whether o removes the record (and leaves a tombstone).
func (o Op) Deleting() bool { return o == OpDelete || o == OpDrop || o == OpSupersede }

// Entry is one changelog entry: one state change of one record.
type Entry struct {
	// LSN is the entry's log sequence number, increasing by one per entry.
	LSN uint64
	// Op is what happened.
	Op Op
	// ID is the record's ID.
	ID string
	// Version is the record's version after the change (== LSN).
	Version uint64
	// Time is when the change was committed (Options.Now).
	Time time.Time
	// Record is the record after the change; nil for deleting ops.
	Record *Record
	// Reason says why ("delivered", the dead reason, "dropped by operator", ...).
	Reason string
}
