package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The archive keeps delivered records (Options.Archive). Apply moves a
// record that an OutcomeDelete answers into it, in the transaction of that
// outcome, next to the tombstone it leaves as before:
//
//	archive              deliveredAt (8 bytes) ‖ ID → record (framed like events)
//	archive_by_topic     esc(Topic) ‖ 00 01 ‖ deliveredAt ‖ ID → empty
//	archive_by_endpoint  esc(Endpoint) ‖ 00 01 ‖ deliveredAt ‖ ID → empty
//	archive_by_key       esc(Key) ‖ 00 01 ‖ deliveredAt ‖ ID → empty
//
// esc escapes each zero byte of a field as 00 FF, so that 00 01 ends it, one field's run of keys is in time order, and the escaped
// fields sort as the fields do: a prefix of a field is a prefix of its
// escape, and a run of keys under a field prefix is one range. An index
// entry is written only for a non-empty field.
//
// The unit archived is the record: one delivery. An event with one
// destination is archived once; a fan-out event is archived once per
// endpoint it was delivered to, each under its delivery's ID (GroupID ‖
// GroupSep ‖ Endpoint) and time, so the endpoint index holds one entry per
// endpoint that received it, and an endpoint that has not received it yet
// (or never will: a dead delivery) has none.
//
// Nothing in the archive is ever due: it is not in the due indexes, and no
// punctuation reads it. The archive is local history, as the attempt log
// is: the changelog does not carry it (the delivery's OpDelete entry is
// logged as before), so Restore brings none of it back. TrimArchive removes
// the oldest entries first. Open creates the buckets when the option is set
// and refuses a file whose application owns a bucket of those names; a
// store opened without the option leaves an archive it finds as it is.

var (
	bucketArchive         = []byte("archive")
	bucketArchiveTopic    = []byte("archive_by_topic")
	bucketArchiveEndpoint = []byte("archive_by_endpoint")
	bucketArchiveKey      = []byte("archive_by_key")
	archiveBuckets        = [][]byte{bucketArchive, bucketArchiveTopic, bucketArchiveEndpoint, bucketArchiveKey}

	// metaArchive marks a file whose archive buckets the store created.
	metaArchive      = []byte("archive")
	metaArchiveN     = []byte("count_archive")
	metaArchiveBytes = []byte("archive_bytes")
)

// Archived is one delivered record as the archive keeps it.
type Archived struct {
	Record
	// DeliveredAt is when the outcome that delivered it was committed
	// (Options.Now).
	DeliveredAt time.Time
}

// fieldEnd ends an escaped field in an archive index key.
var fieldEnd = []byte{0, 1}

// appendEscaped appends field to dst with every zero byte escaped as 00 FF.
func appendEscaped(dst []byte, field string) []byte {
	for i := 0; i < len(field); i++ {
		dst = append(dst, field[i])
		if field[i] == 0 {
			dst = append(dst, 0xFF)
		}
	}
	return dst
}

// archiveKey is the archive key of a record delivered at t.
func archiveKey(dst []byte, t time.Time, id string) []byte {
	return append(binary.BigEndian.AppendUint64(dst, nanos(t)), id...)
}

// splitArchiveKey returns the delivery time and the ID of an archive key.
func splitArchiveKey(ak []byte) (time.Time, []byte, bool) {
	if len(ak) <= 8 {
		return time.Time{}, nil, false
	}
	return fromNanos(binary.BigEndian.Uint64(ak)), ak[8:], true
}

// splitIndexKey returns the length of the escaped field of an archive index
// key (up to, not including, its end mark) and the archive key after it.
func splitIndexKey(k []byte) (fieldLen int, ak []byte, ok bool) {
	for i := 0; i+1 < len(k); i++ {
		if k[i] != 0 {
			continue
		}
		switch k[i+1] {
		case 0xFF:
			i++
		case 1:
			ak = k[i+2:]
			if _, _, ok := splitArchiveKey(ak); !ok {
				return 0, nil, false
			}
			return i, ak, true
		default:
			return 0, nil, false
		}
	}
	return 0, nil, false
}

// archiveSize is what one archived record counts against a size limit: its
// key and value, and the keys of its index entries.
func archiveSize(ak, frame []byte, r *Record) uint64 {
	n := 2*len(ak) + len(frame)
	for _, f := range []string{r.Topic, r.Endpoint, r.Key} {
		if f != "" {
			n += len(ak) + len(f) + len(fieldEnd)
		}
	}
	return uint64(n)
}

// archiveBuckets of one write transaction (nil unless the store archives).
type archiveTx struct {
	records, topic, endpoint, key *bolt.Bucket
	n, bytes                      uint64
}

// beginArchive loads the archive's buckets and counts into w.
func (w *wtx) beginArchive() {
	a := &archiveTx{
		records:  w.tx.Bucket(bucketArchive),
		topic:    w.tx.Bucket(bucketArchiveTopic),
		endpoint: w.tx.Bucket(bucketArchiveEndpoint),
		key:      w.tx.Bucket(bucketArchiveKey),
		n:        getU64(w.meta, metaArchiveN),
		bytes:    getU64(w.meta, metaArchiveBytes),
	}
	a.records.FillPercent = appendFill
	a.topic.FillPercent, a.endpoint.FillPercent, a.key.FillPercent = 0.9, 0.9, 0.9
	w.arch = a
}

// finishArchive writes the archive's counts back.
func (w *wtx) finishArchive() {
	if w.arch != nil {
		w.putU64(metaArchiveN, w.arch.n)
		w.putU64(metaArchiveBytes, w.arch.bytes)
	}
}

// indexEntries returns the index keys of the record r archived under ak,
// each with its bucket.
func (a *archiveTx) indexEntries(w *wtx, ak []byte, r *Record) (bs []*bolt.Bucket, keys [][]byte) {
	for _, f := range []struct {
		b     *bolt.Bucket
		field string
	}{{a.topic, r.Topic}, {a.endpoint, r.Endpoint}, {a.key, r.Key}} {
		if f.field == "" {
			continue
		}
		k := appendEscaped(w.alloc(len(f.field)+2+len(ak)+4), f.field)
		k = append(append(k, fieldEnd...), ak...)
		bs, keys = append(bs, f.b), append(keys, k)
	}
	return bs, keys
}

// archive moves the delivered record r (already removed from the pending
// records) into the archive, delivered now.
func (w *wtx) archive(r *Record) {
	a := w.arch
	ak := archiveKey(w.alloc(8+len(r.ID)), w.now, r.ID)
	frame := EncodeRecord(r)
	w.put(a.records, ak, frame)
	bs, keys := a.indexEntries(w, ak, r)
	for i := range bs {
		w.put(bs[i], keys[i], nil)
	}
	a.n++
	a.bytes += archiveSize(ak, frame, r)
}

// archivedRecord returns r as it is archived after the outcome o delivered it.
func archivedRecord(r *Record, o *Outcome) *Record {
	a := r.clone()
	a.Attempts, a.Deliveries = max(a.Attempts, o.Attempts), max(a.Deliveries, o.Deliveries)
	a.LastStatus, a.LastError = o.LastStatus, ""
	a.seq = 0
	return a
}

// decodeArchived decodes the archive value v stored under ak.
func decodeArchived(ak, v []byte) (*Archived, error) {
	t, id, ok := splitArchiveKey(ak)
	if !ok {
		return nil, fmt.Errorf("%w: archive key of %d bytes", ErrCorrupt, len(ak))
	}
	r, err := decodeStored(id, v)
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	return &Archived{Record: *r, DeliveredAt: t}, nil
}

// ensureArchive creates the archive buckets of a store that archives, and
// refuses a file whose buckets of those names are the application's. It
// runs once at Open, before the committer starts.
func (s *Store) ensureArchive() error {
	var mine bool
	err := s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta).Get(metaArchive) != nil {
			mine = true
			return nil
		}
		for _, name := range archiveBuckets {
			if tx.Bucket(name) != nil {
				return fmt.Errorf("%w: the file holds an application bucket %q, where this version keeps its archive: move it to another name first", ErrNotDatabase, name)
			}
		}
		return nil
	})
	if err != nil || mine {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range archiveBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaArchive, []byte{1})
	})
}

// isArchiveBucket reports whether name is one of the archive's buckets.
func isArchiveBucket(name string) bool {
	for _, b := range archiveBuckets {
		if string(b) == name {
			return true
		}
	}
	return false
}

// bytesAfter returns the smallest key that sorts after every key with prefix
// p (nil when there is none: p is all 0xFF).
func bytesAfter(p []byte) []byte {
	q := bytes.Clone(p)
	for i := len(q) - 1; i >= 0; i-- {
		if q[i] < 0xFF {
			q[i]++
			return q[:i+1]
		}
	}
	return nil
}

// RequeueOptions change what Requeue skips.
type RequeueOptions struct {
	// SkipDelivered skips a record whose ID has a live tombstone too: a
	// backfill queues a delivery that was never made, and no other.
	SkipDelivered bool
}

// Requeue stores each of recs as a new pending delivery, due at now: the
// replay of an archived record (to its own endpoint, or to another under
// the ID of that delivery). A record whose ID is pending or dead already is
// skipped, so a delivery is never queued twice; one whose ID has a
// tombstone loses it (the ID is pending again), unless
// opt.SkipDelivered. Attempts, the last answer
// and the dead reason start afresh; DeliverAt is set to now, so the
// delivery's max age counts from its replay. Each stored record gets an
// OpEnqueue changelog entry. It reports, per record, whether it was
// stored.
func (s *Store) Requeue(ctx context.Context, recs []*Record, now time.Time, opt RequeueOptions) ([]bool, error) {
	for i, r := range recs {
		if err := validateRecord(r); err != nil {
			return nil, fmt.Errorf("requeue %d: %w", i, err)
		}
	}
	stored := make([]bool, len(recs))
	err := s.do(ctx, len(recs), func(w *wtx) error {
		for i, r := range recs {
			id := []byte(r.ID)
			if w.get(w.events, id) != nil || w.get(w.dead, id) != nil || (opt.SkipDelivered && w.get(w.tombs, id) != nil) {
				continue
			}
			w.requeue(r, now)
			stored[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// requeue stores a copy of r pending, due at now (see Requeue).
func (w *wtx) requeue(r *Record, now time.Time) {
	lsn := w.next()
	p := r.clone()
	p.Attempts, p.LastStatus, p.LastError = 0, 0, ""
	p.DeadAt, p.DeadReason = time.Time{}, ""
	p.NextAttemptAt, p.DeliverAt = now, now
	p.Version, p.seq = lsn, lsn
	frame := EncodeRecord(p)
	w.untombstone(p.ID)
	w.putPending(p, nil, frame)
	w.log(lsn, OpEnqueue, p.ID, frame, "replayed from the archive")
}
