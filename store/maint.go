package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// trimChunk is the most keys one maintenance transaction deletes, so a big
// trim never holds the writer for long.
const trimChunk = 10_000

// TrimTombstones removes the tombstones written before olderThan, in
// transactions of at most 10,000, and returns how many it removed. Its cost
// follows the number removed (a time index is kept).
func (s *Store) TrimTombstones(ctx context.Context, olderThan time.Time) (int, error) {
	end := nanos(olderThan)
	total := 0
	for {
		n := 0
		err := s.do(ctx, s.opts.MaxBatch, func(w *wtx) error {
			var idx [][]byte
			c := w.tombTime.Cursor()
			for k, _ := c.First(); k != nil && len(idx) < trimChunk; k, _ = c.Next() {
				if len(k) <= 8 {
					return fmt.Errorf("%w: tombstone index key of %d bytes", ErrCorrupt, len(k))
				}
				if binary.BigEndian.Uint64(k) >= end {
					break
				}
				idx = append(idx, bytes.Clone(k))
			}
			// Delete after iterating, never through the cursor; the index
			// keys are already sorted, the IDs are sorted before deleting.
			ids := make([][]byte, 0, len(idx))
			for _, k := range idx {
				w.del(w.tombTime, k)
				ids = append(ids, k[8:])
			}
			slices.SortFunc(ids, bytes.Compare)
			for _, id := range ids {
				w.del(w.tombs, id)
				dec(&w.tombN)
			}
			// The event's attempts go with its tombstone: one seek per ID.
			for _, id := range ids {
				if w.get(w.events, id) == nil && w.get(w.dead, id) == nil {
					w.dropAttempts(id)
				}
			}
			n = len(idx)
			return nil
		})
		if err != nil {
			// n is not ours to read: the transaction rolled back, or the
			// caller gave up waiting (ctx) and the op may still be running.
			return total, err
		}
		total += n
		if n < trimChunk {
			return total, nil
		}
	}
}

// TrimPolicy says which changelog entries TrimChangelog removes: those older
// than MaxAge (when > 0), and the oldest beyond the newest MaxEntries (when
// > 0). The zero policy removes nothing.
type TrimPolicy struct {
	MaxAge     time.Duration
	MaxEntries int
}

// TrimChangelog removes changelog entries by p, oldest first, in transactions
// of at most 10,000, and returns how many it removed. Once SetShippedLSN has
// been called it never removes an entry above the shipped LSN.
func (s *Store) TrimChangelog(ctx context.Context, p TrimPolicy) (int, error) {
	if p.MaxAge <= 0 && p.MaxEntries <= 0 {
		return 0, nil
	}
	total := 0
	for {
		n := 0
		err := s.do(ctx, s.opts.MaxBatch, func(w *wtx) error {
			floor := w.lsn
			if v := w.meta.Get(metaShipping); len(v) == 1 && v[0] == 1 {
				floor = getU64(w.meta, metaShipped)
			}
			cutoff := w.now.Add(-p.MaxAge)
			var keys [][]byte
			left := w.changeLen
			c := w.changelog.Cursor()
			for k, v := c.First(); k != nil && len(keys) < trimChunk; k, v = c.Next() {
				if len(k) != 8 || binary.BigEndian.Uint64(k) > floor {
					break
				}
				over := p.MaxEntries > 0 && left > uint64(p.MaxEntries)
				old := false
				if p.MaxAge > 0 && !over {
					e, _, err := decodeEntryHead(v)
					if err != nil {
						return fmt.Errorf("changelog at %x: %w", k, err)
					}
					old = e.Time.Before(cutoff)
				}
				if !over && !old {
					break
				}
				keys = append(keys, bytes.Clone(k))
				left--
			}
			for _, k := range keys {
				w.del(w.changelog, k)
				dec(&w.changeLen)
			}
			n = len(keys)
			return nil
		})
		if err != nil {
			// n is not ours to read: the transaction rolled back, or the
			// caller gave up waiting (ctx) and the op may still be running.
			return total, err
		}
		total += n
		if n < trimChunk {
			return total, nil
		}
	}
}

// Restore applies changelog entries to this store (meant for a fresh one) as
// the latest state per ID: the entry with the highest LSN per ID wins (the
// later one in entries on a tie). A deleting op removes the record and
// writes a tombstone (dated by the entry's Time) that says why, as the
// original did: OpDrop one of a drop by an operator (StateDeleted), OpDelete
// and OpSupersede one of a delivery; OpDead stores the record as
// a dead letter; every other op stores it pending. Each change gets this
// store's own changelog entry and version. Records are applied in batches of
// MaxBatch, each its own transaction, in the entries' LSN order; calling
// Restore again with the following entries of a stream continues it.
func (s *Store) Restore(ctx context.Context, entries []*Entry) error {
	last := make(map[string]int, len(entries))
	for i, e := range entries {
		if e == nil || e.ID == "" || len(e.ID) > MaxIDLen || e.Op == opInvalid || e.Op >= opLimit {
			return fmt.Errorf("%w: restore entry %d: bad entry", ErrInvalid, i)
		}
		if !e.Op.Deleting() {
			if e.Record == nil || e.Record.ID != e.ID {
				return fmt.Errorf("%w: restore entry %d (%v %q) without its record", ErrInvalid, i, e.Op, e.ID)
			}
			if err := validateRecord(e.Record); err != nil {
				return fmt.Errorf("restore entry %d: %w", i, err)
			}
		}
		if j, ok := last[e.ID]; !ok || entries[j].LSN <= e.LSN {
			last[e.ID] = i
		}
	}
	final := make([]*Entry, 0, len(last))
	for _, i := range last {
		final = append(final, entries[i])
	}
	slices.SortFunc(final, func(a, b *Entry) int {
		if a.LSN != b.LSN {
			if a.LSN < b.LSN {
				return -1
			}
			return 1
		}
		return bytes.Compare([]byte(a.ID), []byte(b.ID))
	})
	for len(final) > 0 {
		chunk := final[:min(len(final), s.opts.MaxBatch)]
		final = final[len(chunk):]
		err := s.do(ctx, len(chunk), func(w *wtx) error {
			cur := make([]*Record, len(chunk))
			dead := make([]*Record, len(chunk))
			for i, e := range chunk {
				var err error
				if cur[i], err = w.getPending(e.ID); err != nil {
					return err
				}
				if dead[i], err = w.getDead(e.ID); err != nil {
					return err
				}
			}
			for i, e := range chunk {
				w.restoreOne(e, cur[i], dead[i])
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *wtx) restoreOne(e *Entry, cur, dead *Record) {
	lsn := w.next()
	reason := fmt.Sprintf("restored from LSN %d", e.LSN)
	if cur != nil {
		w.removePending(cur)
	}
	if dead != nil {
		w.removeDead(dead)
	}
	if e.Op.Deleting() {
		now := w.now
		if !e.Time.IsZero() {
			w.now = e.Time
		}
		w.tombstone(e.ID, tombKindOf(e.Op))
		w.now = now
		w.log(lsn, e.Op, e.ID, nil, reason)
		return
	}
	w.untombstone(e.ID)
	r := e.Record.clone()
	r.Version = lsn
	if e.Op == OpDead || r.DeadReason != "" {
		r.seq = 0
		if r.DeadReason == "" {
			r.DeadReason = "dead"
		}
		if r.DeadAt.IsZero() {
			r.DeadAt = e.Time
		}
		frame := EncodeRecord(r)
		w.putDead(r, frame, false)
		w.log(lsn, OpDead, r.ID, frame, reason)
		return
	}
	r.DeadAt, r.DeadReason = time.Time{}, ""
	r.seq = lsn
	frame := EncodeRecord(r)
	w.putPending(r, nil, frame)
	w.log(lsn, OpEnqueue, r.ID, frame, reason)
}
