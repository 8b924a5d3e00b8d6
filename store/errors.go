package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Compare with errors.Is: the store wraps them with detail.
var (
	// ErrCorrupt reports a value or file that fails its checksum or framing:
	// a torn write, a damaged page, or bytes that were never written by this
	// package. Decoders return it instead of decoding garbage.
	ErrCorrupt = errors.New("store: corrupt data")

	// ErrLocked reports that another process (or another Store in this
	// process) holds the file's lock. It comes wrapped in an *OpenError that
	// names the file.
	ErrLocked = errors.New("store: file is locked by another process")

	// ErrNotDatabase reports a file that is not a store at all: empty, random
	// bytes, or a bbolt file of another application.
	ErrNotDatabase = errors.New("store: not a store database")

	// ErrSchemaTooNew reports a file (or an encoded value) written by a newer
	// build of this package whose format this build does not understand.
	ErrSchemaTooNew = errors.New("store: schema version is newer than this build understands")

	// ErrNotFound reports that no record (in the state asked for) has the ID.
	ErrNotFound = errors.New("store: not found")

	// ErrConflict reports an ID that is already stored with other content.
	// It comes as a *ConflictError naming the ID.
	ErrConflict = errors.New("store: conflicting record with the same ID")

	// ErrDeleted reports a record whose ID an operator dropped (Drop) while
	// its tombstone is live, given to InsertWith with
	// InsertOptions.RefuseDeleted. It comes as a *DeletedError naming the ID.
	ErrDeleted = errors.New("store: record was dropped by an operator")

	// ErrClosed reports a call on a closed Store.
	ErrClosed = errors.New("store: closed")

	// ErrNotDead reports a replay of a record that is not a dead letter.
	ErrNotDead = errors.New("store: record is not dead")

	// ErrStale reports a compare-and-set whose version no longer matches the
	// stored record. Apply reports it per outcome as the Stale result; the
	// error form is what OutcomeResult.Err returns for it.
	ErrStale = errors.New("store: stale version")

	// ErrInvalid reports an argument the store cannot accept (an empty ID, a
	// key over the size limits, an unknown state, ...).
	ErrInvalid = errors.New("store: invalid argument")

	// ErrReadOnly reports a write on a Store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("store: opened read-only")

	// ErrNoKeyIndex reports a call that needs the key index (UpsertKey, Due
	// with HeadOfKeyOnly) on a store that does not keep it
	// (Options.NoKeyIndex).
	ErrNoKeyIndex = errors.New("store: the key index is not kept (Options.NoKeyIndex)")

	// ErrNoEndpointIndex reports DueHeads or DueByEndpoint on a read-only
	// store of a file written before the per-endpoint due index: a
	// writable Open builds the index. Due reads such a file.
	ErrNoEndpointIndex = errors.New("store: the file has no per-endpoint due index yet (open it for writing once to build it)")
)

// OpenError is returned by Open and Compact. It names the file and wraps the
// cause, which matches one of ErrLocked, ErrNotDatabase, ErrCorrupt or
// ErrSchemaTooNew (or an I/O error) under errors.Is.
type OpenError struct {
	Path string
	Err  error
}

// Error implements error.
func (e *OpenError) Error() string { return fmt.Sprintf("store: open %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *OpenError) Unwrap() error { return e.Err }

// ConflictError reports that ID is already stored (pending or dead) with
// different content. errors.Is(err, ErrConflict) holds for it.
type ConflictError struct {
	ID string
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: record %q already exists with different content", e.ID)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// DeletedError reports that ID was dropped by an operator at DeletedAt and
// its tombstone is still live. errors.Is(err, ErrDeleted) holds for it.
type DeletedError struct {
	ID        string
	DeletedAt time.Time
}

// Error implements error.
func (e *DeletedError) Error() string {
	return fmt.Sprintf("store: record %q was dropped by an operator at %s", e.ID, e.DeletedAt.UTC().Format(time.RFC3339Nano))
}

// Unwrap returns ErrDeleted.
func (e *DeletedError) Unwrap() error { return ErrDeleted }
