package store

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrReservedBucket reports an application transaction that named one of
// the store's own buckets: they are written only by the store.
var ErrReservedBucket = errors.New("store: bucket is the store's own")

// IsReservedBucket reports whether name is one of the store's own top-level
// buckets, which application transactions may not open, create or delete.
// Every other top-level bucket of the file belongs to the application: the
// store never reads, writes, checks or drops it.
func IsReservedBucket(name []byte) bool { return isStoreBucket(string(name)) }

// AppTx is one transaction of the application on the store's file (see
// AppUpdate and AppView): its own top-level buckets, and, in AppUpdate,
// inserts and upserts of records that commit with them.
//
// Buckets are bbolt's own, valid until the transaction ends. Their Tx
// method reaches the whole transaction: do not use it, nor keep a bucket
// past the function.
type AppTx struct {
	tx       *bolt.Tx
	w        *wtx // nil in a read-only transaction
	s        *Store
	reserved error // first reserved bucket named; fails the transaction
}

func (t *AppTx) refuse(name []byte) error {
	err := fmt.Errorf("%w: %q", ErrReservedBucket, name)
	if t.reserved == nil {
		t.reserved = err
	}
	return err
}

// Bucket returns the application's top-level bucket name, nil when it does
// not exist. A reserved name (IsReservedBucket) returns nil and fails the
// whole transaction with ErrReservedBucket, whatever the function returns.
func (t *AppTx) Bucket(name []byte) *bolt.Bucket {
	if IsReservedBucket(name) {
		_ = t.refuse(name)
		return nil
	}
	return t.tx.Bucket(name)
}

// CreateBucketIfNotExists returns the application's top-level bucket name,
// creating it when it does not exist. A reserved name fails with
// ErrReservedBucket and fails the whole transaction.
func (t *AppTx) CreateBucketIfNotExists(name []byte) (*bolt.Bucket, error) {
	if IsReservedBucket(name) {
		return nil, t.refuse(name)
	}
	return t.tx.CreateBucketIfNotExists(name)
}

// DeleteBucket deletes the application's top-level bucket name and all it
// holds. A reserved name fails with ErrReservedBucket and fails the whole
// transaction; a missing bucket is bbolt's ErrBucketNotFound.
func (t *AppTx) DeleteBucket(name []byte) error {
	if IsReservedBucket(name) {
		return t.refuse(name)
	}
	return t.tx.DeleteBucket(name)
}

// Writable reports whether the transaction may write (AppUpdate).
func (t *AppTx) Writable() bool { return t.w != nil }

// store runs store code from inside the application's function: a panic in
// it is the store's (ErrCorrupt for the whole commit), not the caller's.
func (t *AppTx) store(fn func() error) error {
	was := t.w.inUser
	t.w.inUser = false
	err := fn()
	t.w.inUser = was
	return err
}

// InsertWith is Store.InsertWith inside the transaction: the records commit
// with the application's writes, or not at all. An error stores nothing of
// this call; the transaction goes on (return the error to abandon it).
func (t *AppTx) InsertWith(recs []*Record, opt InsertOptions) ([]InsertStatus, error) {
	if t.w == nil {
		return nil, fmt.Errorf("%w: insert in a read-only transaction", ErrReadOnly)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	ins, err := t.s.prepareInsert(recs)
	if err != nil {
		return nil, err
	}
	err = t.store(func() error {
		if err := t.w.insert(ins, opt); err != nil {
			return err
		}
		return t.w.err
	})
	if err != nil {
		return nil, err
	}
	ins.setVersions(recs)
	return ins.statuses, nil
}

// UpsertKey is Store.UpsertKey inside the transaction. fn runs each time
// the transaction's function does.
func (t *AppTx) UpsertKey(key string, fn func(current *Record) (*Record, error)) (*Record, error) {
	if t.w == nil {
		return nil, fmt.Errorf("%w: upsert in a read-only transaction", ErrReadOnly)
	}
	if key == "" || len(key) > MaxKeyLen {
		return nil, fmt.Errorf("%w: bad key", ErrInvalid)
	}
	var out *Record
	err := t.store(func() (err error) {
		if out, err = t.w.upsertKey(key, fn); err != nil {
			return err
		}
		return t.w.err
	})
	return out, err
}

// AppUpdate runs fn in a write transaction of the committer, with the
// application's buckets and record inserts (AppTx), and returns once that
// transaction committed (fsync) or was given up: nil means everything fn
// did is durable, an error that none of it is stored.
//
// fn shares its transaction with concurrent writers (group commit), so it
// may run more than once: when another caller's function in the same batch
// fails or panics, the transaction is rolled back and run again without it.
// fn must therefore have no effects outside its AppTx, and must leave any
// state it returns to the caller to be set again by each run.
//
// Nothing is stored when fn returns an error (returned as it is), panics
// (raised again in the caller's goroutine), names a reserved bucket
// (ErrReservedBucket), or when ctx ends before fn's transaction starts
// committing (ctx.Err()). Once the commit has started it is not interrupted:
// AppUpdate waits for it, so that its answer is always the truth.
func (s *Store) AppUpdate(ctx context.Context, fn func(t *AppTx) error) error {
	return s.doApp(ctx, func(w *wtx) error {
		t := &AppTx{tx: w.tx, w: w, s: s}
		if err := w.user(func() error { return fn(t) }); err != nil {
			return err
		}
		return t.reserved
	})
}

// AppView runs fn in a read transaction with the application's buckets. It
// works on a read-only store too. A panic in fn is raised in the caller's
// goroutine; a reserved bucket name fails it with ErrReservedBucket.
func (s *Store) AppView(fn func(t *AppTx) error) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		t := &AppTx{tx: tx, s: s}
		if err := fn(t); err != nil {
			return err
		}
		return t.reserved
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		err = ErrClosed
	}
	return err
}
