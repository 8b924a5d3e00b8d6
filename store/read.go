package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DueQuery selects due records for a snapshot.
type DueQuery struct {
	// Now: records with NextAttemptAt <= Now are due.
	Now time.Time
	// Limit is the most records returned (default 100).
	Limit int
	// SkipID, if set, is asked before a record is read (e.g. in flight).
	// The id is only valid during the call.
	SkipID func(id []byte) bool
	// Skip, if set, is asked after a record is decoded (throttled or
	// disabled endpoint, busy key).
	Skip func(r *Record) bool
	// HeadOfKeyOnly returns only records that are the oldest pending record
	// of their Key (records without a Key always qualify). It needs the key
	// index: without it (Options.NoKeyIndex) Due fails with ErrNoKeyIndex.
	HeadOfKeyOnly bool
	// MaxScan bounds the due index entries examined (default 10*Limit).
	MaxScan int
}

// Due returns copies of due records in NextAttemptAt order, read from the
// due index in one short read transaction that is closed before it returns.
// Its cost grows with the entries it examines (at most MaxScan), not with the
// backlog of records that are not due. SkipID and Skip run inside the read
// transaction: keep them fast.
func (s *Store) Due(q DueQuery) ([]*Record, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.MaxScan <= 0 {
		q.MaxScan = 10 * q.Limit
	}
	if q.HeadOfKeyOnly && !s.keyIndex {
		return nil, ErrNoKeyIndex
	}
	end := nanos(q.Now)
	var out []*Record
	err := s.view(func(tx *bolt.Tx) error {
		d := newDueReader(tx, q.SkipID, q.Skip, q.HeadOfKeyOnly)
		c := tx.Bucket(bucketDue).Cursor()
		scanned := 0
		for k, _ := c.First(); k != nil && len(out) < q.Limit && scanned < q.MaxScan; k, _ = c.Next() {
			if len(k) <= 8 {
				return fmt.Errorf("%w: due index key of %d bytes", ErrCorrupt, len(k))
			}
			if binary.BigEndian.Uint64(k) > end {
				break
			}
			scanned++
			r, err := d.read(k[8:])
			if err != nil {
				return err
			}
			if r != nil {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dueReader reads the records a due index entry names, for Due and
// DueByEndpoint: the record must be pending under that ID, and the query's
// skips and HeadOfKeyOnly are applied in one order (SkipID, decode, key
// head, Skip).
type dueReader struct {
	events        *bolt.Cursor // one cursor for all lookups: no allocation each
	keys          *bolt.Bucket
	skipID        func([]byte) bool
	skip          func(*Record) bool
	headOfKeyOnly bool
}

func newDueReader(tx *bolt.Tx, skipID func([]byte) bool, skip func(*Record) bool, headOfKeyOnly bool) *dueReader {
	return &dueReader{events: tx.Bucket(bucketEvents).Cursor(), keys: tx.Bucket(bucketKeys),
		skipID: skipID, skip: skip, headOfKeyOnly: headOfKeyOnly}
}

// read returns the pending record id (a key in the read transaction), or
// nil when the query skips it. A due entry that names no pending record is
// ErrCorrupt.
func (d *dueReader) read(id []byte) (*Record, error) {
	if d.skipID != nil && d.skipID(id) {
		return nil, nil
	}
	ek, v := d.events.Seek(id)
	if !bytes.Equal(ek, id) {
		return nil, fmt.Errorf("%w: due index names %q, which is not pending", ErrCorrupt, id)
	}
	r, err := decodeStored(id, v)
	if err != nil {
		return nil, err
	}
	if d.headOfKeyOnly && r.Key != "" {
		p := keyPrefix(r.indexKey())
		hk, _ := d.keys.Cursor().Seek(p)
		if hk == nil || !bytes.HasPrefix(hk, p) || len(hk) < len(p)+8 || string(hk[len(p)+8:]) != r.ID {
			return nil, nil
		}
	}
	if d.skip != nil && d.skip(r) {
		return nil, nil
	}
	return r, nil
}

// NextDue returns the earliest NextAttemptAt of any pending record; ok is
// false when there is none. It reads one key.
func (s *Store) NextDue() (t time.Time, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketDue).Cursor().First()
		if k == nil {
			return nil
		}
		if len(k) <= 8 {
			return fmt.Errorf("%w: due index key of %d bytes", ErrCorrupt, len(k))
		}
		t, ok = fromNanos(binary.BigEndian.Uint64(k)), true
		return nil
	})
	return t, ok, err
}

// Get returns the record with that ID and its state: a copy of the pending or
// dead record, or, while a tombstone is live, a nil record with
// StateDeleted when an operator dropped it and StateDelivered otherwise.
// ErrNotFound otherwise.
func (s *Store) Get(id string) (*Record, State, error) {
	var (
		r  *Record
		st State
	)
	err := s.view(func(tx *bolt.Tx) error {
		k := []byte(id)
		var v []byte
		if v = tx.Bucket(bucketEvents).Get(k); v != nil {
			st = StatePending
		} else if v = tx.Bucket(bucketDead).Get(k); v != nil {
			st = StateDead
		} else if t, ok, err := lookupTombstone(tx.Bucket(bucketTombs).Cursor(), tx.Bucket(bucketTombTime).Cursor(), k); err != nil {
			return err
		} else if ok {
			st = StateDelivered
			if t.kind == tombDeleted {
				st = StateDeleted
			}
			return nil
		} else {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		var err error
		r, err = decodeStored(id, v)
		return err
	})
	if err != nil {
		return nil, StateUnknown, err
	}
	return r, st, nil
}

// ListQuery selects a page of records of one state.
type ListQuery struct {
	// State is StatePending or StateDead.
	State State
	// After is the cursor: only IDs greater than After are listed.
	After string
	// Limit is the page size (default 100).
	Limit int
	// Filter, if set, keeps only the records it returns true for.
	Filter func(*Record) bool
}

// List returns records of one state in ID order, and the cursor for the next
// page ("" when the listing is complete). A page examines at most
// 10,000+10*Limit records, so a selective Filter may return a short (even
// empty) page with a non-empty cursor: continue from it.
func (s *Store) List(q ListQuery) (recs []*Record, next string, err error) {
	var name []byte
	switch q.State {
	case StatePending:
		name = bucketEvents
	case StateDead:
		name = bucketDead
	default:
		return nil, "", fmt.Errorf("%w: list of state %v", ErrInvalid, q.State)
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	maxScan := 10_000 + 10*q.Limit
	err = s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(name).Cursor()
		var k, v []byte
		if q.After == "" {
			k, v = c.First()
		} else if k, v = c.Seek([]byte(q.After)); k != nil && string(k) == q.After {
			k, v = c.Next()
		}
		for scanned := 0; k != nil; k, v = c.Next() {
			if len(recs) == q.Limit || scanned == maxScan {
				next = string(k)
				// The cursor is exclusive: resume after the last one seen.
				if pk, _ := c.Prev(); pk != nil {
					next = string(pk)
				}
				return nil
			}
			scanned++
			r, err := decodeStored(k, v)
			if err != nil {
				return err
			}
			if q.Filter == nil || q.Filter(r) {
				recs = append(recs, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return recs, next, nil
}

// Tombstone reports whether id has a live tombstone and when it was written.
// Get tells a delivered record's tombstone from a dropped one's.
func (s *Store) Tombstone(id string) (deletedAt time.Time, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		t, found, err := lookupTombstone(tx.Bucket(bucketTombs).Cursor(), tx.Bucket(bucketTombTime).Cursor(), []byte(id))
		deletedAt, ok = t.deletedAt, found
		return err
	})
	return deletedAt, ok, err
}

// Endpoints returns every stored endpoint state, by name.
func (s *Store) Endpoints() ([]EndpointState, error) {
	var out []EndpointState
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEndpoints).ForEach(func(k, v []byte) error {
			ep, err := decodeEndpoint(v)
			if err != nil {
				return fmt.Errorf("endpoint %q: %w", k, err)
			}
			out = append(out, ep)
			return nil
		})
	})
	return out, err
}

// EndpointsAfter returns up to limit stored endpoint states whose names
// sort after after, by name: a page read with one seek, whatever the
// number of endpoints stored. limit <= 0 returns none.
func (s *Store) EndpointsAfter(after string, limit int) ([]EndpointState, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []EndpointState
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEndpoints).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			ep, err := decodeEndpoint(v)
			if err != nil {
				return fmt.Errorf("endpoint %q: %w", k, err)
			}
			out = append(out, ep)
		}
		return nil
	})
	return out, err
}

// Endpoint returns the stored state of one endpoint; ok is false when none
// is stored.
func (s *Store) Endpoint(name string) (ep EndpointState, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEndpoints).Get([]byte(name))
		if v == nil {
			return nil
		}
		ep, err = decodeEndpoint(v)
		ok = err == nil
		return err
	})
	return ep, ok, err
}

// Changelog returns up to limit entries (default 1000) with LSN >= from, in
// LSN order, as copies.
func (s *Store) Changelog(from uint64, limit int) ([]*Entry, error) {
	if limit <= 0 {
		limit = 1000
	}
	var out []*Entry
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChangelog).Cursor()
		for k, v := c.Seek(u64(from)); k != nil && len(out) < limit; k, v = c.Next() {
			e, err := DecodeEntry(v)
			if err != nil {
				return fmt.Errorf("changelog at %x: %w", k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// ShippedLSN returns the LSN recorded by SetShippedLSN (0 if never set).
func (s *Store) ShippedLSN() (lsn uint64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		lsn = getU64(tx.Bucket(bucketMeta), metaShipped)
		return nil
	})
	return lsn, err
}

// History returns every changelog entry still kept for id, in LSN order. It
// scans the whole changelog (decoding only entry headers): an operator tool,
// not a hot path.
func (s *Store) History(id string) ([]*Entry, error) {
	var out []*Entry
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChangelog).ForEach(func(k, v []byte) error {
			e, rec, err := decodeEntryHead(v)
			if err != nil {
				return fmt.Errorf("changelog at %x: %w", k, err)
			}
			if e.ID != id {
				return nil
			}
			if len(rec) > 0 {
				if e.Record, err = DecodeRecord(rec); err != nil {
					return fmt.Errorf("changelog entry %d: %w", e.LSN, err)
				}
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// Stats are counts kept in the meta bucket and updated in every write
// transaction, so reading them costs no scan.
type Stats struct {
	Pending, Dead, Tombstones, Endpoints, ChangelogEntries int
	// Unrouted counts the pending records that are fan-out events kept
	// unrouted (Record.Unrouted); Pending counts them too.
	Unrouted int
	// FileSize is the database file's size in bytes.
	FileSize            int64
	LastLSN, ShippedLSN uint64
	// KeyIndex reports whether the file keeps its key index (see
	// Options.NoKeyIndex).
	KeyIndex bool
	// Archived counts the archived records (Options.Archive) and
	// ArchiveBytes what they count against TrimArchive's size limit.
	Archived     int
	ArchiveBytes int64
}

// Stats returns the store's counters and file size.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.view(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		st.Pending = int(getU64(m, metaPending))
		st.Unrouted = int(getU64(m, metaUnrouted))
		st.Dead = int(getU64(m, metaDead))
		st.Tombstones = int(getU64(m, metaTombs))
		st.Endpoints = int(getU64(m, metaEndpoints))
		st.ChangelogEntries = int(getU64(m, metaChangelogN))
		st.LastLSN = getU64(m, metaLastLSN)
		st.ShippedLSN = getU64(m, metaShipped)
		st.KeyIndex = schemaKeyIndex(getU64(m, metaSchema))
		st.Archived = int(getU64(m, metaArchiveN))
		st.ArchiveBytes = int64(getU64(m, metaArchiveBytes))
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	st.FileSize, err = fileSize(s.path)
	return st, err
}
