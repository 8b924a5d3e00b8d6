package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outbox/store"
)

// Sentinel errors returned by the outbox. Test for them with errors.Is; the
// returned errors wrap them with the details (event ID, field, file).
var (
	// ErrClosed is returned by every method once Stop has been called.
	ErrClosed = errors.New("outbox: closed")
	// ErrNotFound is returned when no event (or endpoint) has the given name.
	ErrNotFound = errors.New("outbox: not found")
	// ErrConflict is returned by Enqueue when an event reuses the ID of a
	// pending or dead event with other content (key, destination, method,
	// headers or payload). Nothing of that Enqueue call is stored.
	ErrConflict = errors.New("outbox: conflicting event with the same ID")
	// ErrDeleted is returned by Enqueue when an event reuses the ID of an
	// event that an operator deleted (Delete) within the tombstone
	// retention: the ID stays reserved for the deleted event until its
	// tombstone is trimmed. It comes as a *DeletedError naming the event.
	// Nothing of that Enqueue call is stored.
	ErrDeleted = errors.New("outbox: event was deleted by the operator")
	// ErrNotDead is returned by Replay for an event that is not a dead letter.
	ErrNotDead = errors.New("outbox: event is not dead")
	// ErrEndpointDisabled is returned by RetryEndpoint for a disabled
	// endpoint: EnableEndpoint re-enables it and makes its events due.
	ErrEndpointDisabled = errors.New("outbox: endpoint is disabled")
	// ErrInvalid is matched by every *ValidationError.
	ErrInvalid = errors.New("outbox: invalid event")
	// ErrUnavailable is matched by the error Health returns, and by
	// Enqueue's error once the database file was found damaged.
	ErrUnavailable = errors.New("outbox: unavailable")
	// ErrDamaged is matched, besides ErrUnavailable, when the reason is a
	// damaged database file (data that fails its checksum or framing).
	ErrDamaged = errors.New("outbox: the database file is damaged")
	// ErrLocked is matched by Open's error when another process (or another
	// Outbox in this process) holds the file's lock past Config.LockTimeout.
	ErrLocked = errors.New("outbox: the database file is locked by another process")
	// ErrNotDatabase is matched by Open's error for a file that is not an
	// outbox database: empty, random bytes, or another application's bbolt
	// file.
	ErrNotDatabase = errors.New("outbox: not an outbox database")
	// ErrSchemaTooNew is matched by Open's error for a file written by a
	// newer build whose layout this build does not understand.
	ErrSchemaTooNew = errors.New("outbox: the database file is newer than this build understands")
	// ErrReadOnly is matched by the error of every write to an outbox
	// opened with Config.ReadOnly.
	ErrReadOnly = errors.New("outbox: opened read-only")
	// ErrNoKeyIndex is matched by Upsert's error on an outbox opened with
	// Config.NoKeyIndex.
	ErrNoKeyIndex = errors.New("outbox: the key index is not kept (Config.NoKeyIndex)")
	// ErrReservedBucket is matched by the error of an Update or View whose
	// function named one of the outbox's own buckets (events, due, dead,
	// tombstones, tombstones_by_time, keys, endpoints, changelog, attempts,
	// meta):
	// they are not the application's to read or write.
	ErrReservedBucket = errors.New("outbox: bucket is the outbox's own")
	// ErrTooManyDeliveries is matched by every *TooManyDeliveriesError:
	// the error of a call that would create more deliveries than
	// Config.MaxDeliveriesPerCall allows. Nothing of that call is stored.
	ErrTooManyDeliveries = errors.New("outbox: too many deliveries in one call")
	// ErrInvalidConfig is matched by every *ConfigError: the error of Open
	// and of Config.Validate for a configuration they refuse.
	ErrInvalidConfig = errors.New("outbox: invalid config")
)

// storeSentinels pairs each store error a caller may match with the outbox
// sentinel that stands for it.
var storeSentinels = []struct{ store, outbox error }{
	{store.ErrCorrupt, ErrDamaged},
	{store.ErrLocked, ErrLocked},
	{store.ErrNotDatabase, ErrNotDatabase},
	{store.ErrSchemaTooNew, ErrSchemaTooNew},
	{store.ErrReadOnly, ErrReadOnly},
	{store.ErrNoKeyIndex, ErrNoKeyIndex},
	{store.ErrClosed, ErrClosed},
	{store.ErrNotFound, ErrNotFound},
	{store.ErrNotDead, ErrNotDead},
	{store.ErrConflict, ErrConflict},
	{store.ErrReservedBucket, ErrReservedBucket},
}

// storeError is a store error seen through the outbox: its message is the
// store's, prefixed by the outbox operation, and it matches both the store's
// error and the outbox sentinel that stands for it.
type storeError struct {
	op       string
	sentinel error
	err      error
}

func (e *storeError) Error() string   { return "outbox: " + e.op + ": " + e.err.Error() }
func (e *storeError) Unwrap() []error { return []error{e.sentinel, e.err} }

// wrapStoreErr returns err (from the store) prefixed by op, matching the
// outbox sentinel of its cause when it has one.
func wrapStoreErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, p := range storeSentinels {
		if errors.Is(err, p.store) {
			return &storeError{op: op, sentinel: p.outbox, err: err}
		}
	}
	return fmt.Errorf("outbox: %s: %w", op, err)
}

// ValidationError reports an event that Enqueue, EnqueueDead or Upsert
// refused, or a subscription SetSubscriptions refused. errors.Is(err,
// ErrInvalid) is true for it.
type ValidationError struct {
	// Index is the position of the event in the Enqueue call (0 for
	// EnqueueDead and Upsert), or of the subscription in the
	// SetSubscriptions call.
	Index int
	// Field names the offending field: "id", "key", "destination", "topic",
	// "method", "headers", "payload" or "deliver_at" (for a Subscription:
	// "endpoint", "topics" or "headers").
	Field string
	// Reason says what is wrong with it.
	Reason string

	subscription bool // it is about a Subscription (SetSubscriptions)
	argument     bool // it is about an argument of a call (ValidateRate)
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.argument {
		return fmt.Sprintf("outbox: invalid %s: %s", e.Field, e.Reason)
	}
	what := "event"
	if e.subscription {
		what = "subscription"
	}
	return fmt.Sprintf("outbox: invalid %s %d: %s: %s", what, e.Index, e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// DeletedError reports an event of an Enqueue call whose ID an operator
// deleted within the tombstone retention. errors.Is(err, ErrDeleted) is true
// for it.
type DeletedError struct {
	// Index is the position of the event in the Enqueue call.
	Index int
	// ID is the event's ID.
	ID string
	// DeletedAt is when the operator deleted the event (UTC).
	DeletedAt time.Time
}

// Error implements error.
func (e *DeletedError) Error() string {
	return fmt.Sprintf("outbox: event %d: id %q was deleted by an operator at %s; its ID stays reserved for the tombstone retention",
		e.Index, e.ID, e.DeletedAt.UTC().Format(time.RFC3339Nano))
}

// Unwrap returns ErrDeleted.
func (e *DeletedError) Unwrap() error { return ErrDeleted }

// TooManyDeliveriesError reports a call (Enqueue, Ingest, or the
// Tx.Enqueue calls of one Update) whose events would create more
// deliveries than Config.MaxDeliveriesPerCall: nothing of it is stored.
// errors.Is(err, ErrTooManyDeliveries) is true for it. Send the events in
// smaller calls, or raise the limit.
type TooManyDeliveriesError struct {
	// Deliveries is how many the call would create: one per event with a
	// Destination, one per subscribed endpoint of an event with a Topic
	// (one for a topic event kept unrouted).
	Deliveries int
	// Limit is Config.MaxDeliveriesPerCall.
	Limit int
}

// Error implements error.
func (e *TooManyDeliveriesError) Error() string {
	return fmt.Sprintf("outbox: the call would create %d deliveries (events times subscribed endpoints), over the limit of %d "+
		"(Config.MaxDeliveriesPerCall); nothing was stored", e.Deliveries, e.Limit)
}

// Unwrap returns ErrTooManyDeliveries.
func (e *TooManyDeliveriesError) Unwrap() error { return ErrTooManyDeliveries }

// ConfigError names the Config field that Open (or Config.Validate)
// refused. errors.Is(err, ErrInvalidConfig) is true for it.
type ConfigError struct {
	// Field is the name of the Config field, e.g. "Concurrency" or
	// "MaxCommitBatch".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("outbox: config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// ConflictingID returns the ID that made err (from Enqueue) an ErrConflict:
// the event ID already pending or dead with other content, or given twice
// in one call with different content.
func ConflictingID(err error) (id string, ok bool) {
	var ce *store.ConflictError
	if errors.As(err, &ce) {
		return ce.ID, true
	}
	return "", false
}
