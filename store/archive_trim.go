package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bounds of one transaction of TrimArchive: it deletes at most
// archiveTrimCount archived records, and stops early once their sizes
// (archiveSize) pass archiveTrimBytes, so that the writer is never held
// long (BenchmarkTrimArchive measures its longest transaction).
const (
	archiveTrimCount = 128
	archiveTrimBytes = 1 << 20
)

// TrimArchive removes archived records, oldest first: those delivered
// before olderThan, and then the oldest until the archive's size
// (Stats.ArchiveBytes) is at most maxBytes (when maxBytes > 0). It works in
// transactions of at most 1,000 records, each removing its records with
// their index entries, and returns how many it removed. A store without an
// archive removes nothing.
func (s *Store) TrimArchive(ctx context.Context, olderThan time.Time, maxBytes int64) (int, error) {
	total := 0
	for {
		n, more, err := s.trimArchiveChunk(ctx, olderThan, maxBytes)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// trimArchiveChunk runs one transaction of TrimArchive and reports whether
// another may find more to remove.
func (s *Store) trimArchiveChunk(ctx context.Context, olderThan time.Time, maxBytes int64) (n int, more bool, err error) {
	if !s.archive {
		return 0, false, nil
	}
	end := nanos(olderThan)
	err = s.do(ctx, archiveTrimCount, func(w *wtx) error {
		a := w.arch
		left := a.bytes
		var aks [][]byte
		var recs []*Record
		var size uint64
		c := a.records.Cursor()
		for k, v := c.First(); k != nil && len(aks) < archiveTrimCount && size < archiveTrimBytes; k, v = c.Next() {
			over := maxBytes > 0 && left > uint64(maxBytes)
			if !over && nanosOf(k) >= end {
				break
			}
			ar, err := decodeArchived(k, v)
			if err != nil {
				return err
			}
			sz := archiveSize(k, v, &ar.Record)
			left, size = left-min(left, sz), size+sz
			aks, recs = append(aks, bytes.Clone(k)), append(recs, &ar.Record)
		}
		w.unarchive(aks, recs, size)
		n = len(aks)
		return nil
	})
	if err != nil {
		// n is not ours to read: the transaction rolled back, or the
		// caller gave up waiting (ctx) and the op may still be running.
		return 0, false, err
	}
	return n, n > 0, nil
}

// nanosOf returns the time prefix of an archive key (0 for a short key,
// which decodeArchived then refuses).
func nanosOf(ak []byte) uint64 {
	if len(ak) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(ak)
}

// unarchive deletes the archived records recs, stored under the sorted keys
// aks and counting size in all, with their index entries: each index's
// keys sorted, so that every tree is walked once.
func (w *wtx) unarchive(aks [][]byte, recs []*Record, size uint64) {
	a := w.arch
	for _, k := range aks {
		w.del(a.records, k)
	}
	byBucket := map[*bolt.Bucket][][]byte{}
	for i, r := range recs {
		bs, keys := a.indexEntries(w, aks[i], r)
		for j := range bs {
			byBucket[bs[j]] = append(byBucket[bs[j]], keys[j])
		}
	}
	for _, b := range []*bolt.Bucket{a.topic, a.endpoint, a.key} {
		keys := byBucket[b]
		slices.SortFunc(keys, bytes.Compare)
		for _, k := range keys {
			w.del(b, k)
		}
	}
	a.n -= min(a.n, uint64(len(aks)))
	a.bytes -= min(a.bytes, size)
}
