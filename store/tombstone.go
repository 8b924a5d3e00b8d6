package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A tombstone is what the store keeps of a record that left it, for the
// tombstone retention: the ID in the tombstones bucket with the time it left
// (deletedAt, 8 bytes, as nanos), and the entry deletedAt ‖ ID in
// tombstones_by_time, whose value says why it left: empty for a delivery (or
// a coalescing supersede), tombDeletedMark for a drop by an operator.
//
// The reason lives in the time index, not in the tombstone's value, because
// builds that predate it read every tombstone value as exactly 8 bytes (and
// call anything else corrupt) but never read the values of the time index.
// A file with reasons therefore stays fully usable by them, with no schema
// change: they see every tombstone as a delivery, as they always did. Every
// tombstone they wrote has an empty index value, so it decodes here as a
// delivery.

// tombKind says why a record left the store.
type tombKind uint8

const (
	// tombDelivered: delivered (OpDelete), superseded by a coalescing
	// upsert (OpSupersede), or written before tombstones recorded why.
	tombDelivered tombKind = iota
	// tombDeleted: dropped by an operator (Drop, OpDrop).
	tombDeleted
)

// tombDeletedMark is the time index value of a tombDeleted tombstone.
const tombDeletedMark = 'o'

// tombDeletedValue is the time index value of a tombDeleted tombstone, as
// written; it is never modified.
var tombDeletedValue = []byte{tombDeletedMark}

// indexValue returns the time index value that records k.
func (k tombKind) indexValue() []byte {
	if k == tombDeleted {
		return tombDeletedValue
	}
	return nil
}

// tombKindOf returns the kind of tombstone a deleting op leaves.
func tombKindOf(op Op) tombKind {
	if op == OpDrop {
		return tombDeleted
	}
	return tombDelivered
}

// tombstone is a decoded tombstone.
type tombstone struct {
	deletedAt time.Time
	kind      tombKind
}

// decodeTombstone decodes the tombstone of id from v, its value in the
// tombstones bucket, and why, the value of its entry in tombstones_by_time
// (indexed is false when that entry is missing). It is the one decoder of
// tombstones: everything that reads one goes through it. Anything this
// package did not write is ErrCorrupt.
func decodeTombstone(id, v, why []byte, indexed bool) (tombstone, error) {
	if len(v) != 8 {
		return tombstone{}, fmt.Errorf("%w: tombstone of %q has %d bytes", ErrCorrupt, id, len(v))
	}
	if !indexed {
		return tombstone{}, fmt.Errorf("%w: tombstone of %q has no entry in the tombstone time index", ErrCorrupt, id)
	}
	t := tombstone{deletedAt: fromNanos(binary.BigEndian.Uint64(v))}
	switch {
	case len(why) == 0:
		t.kind = tombDelivered
	case len(why) == 1 && why[0] == tombDeletedMark:
		t.kind = tombDeleted
	default:
		return tombstone{}, fmt.Errorf("%w: tombstone of %q has an unknown reason %x in the time index", ErrCorrupt, id, why)
	}
	return t, nil
}

// tombIndexKey is the tombstones_by_time key of id's tombstone, whose value
// in the tombstones bucket is v.
func tombIndexKey(v, id []byte) []byte {
	return append(append(make([]byte, 0, len(v)+len(id)), v...), id...)
}

// lookupTombstone reads id's tombstone through cursors on the tombstones and
// tombstones_by_time buckets. ok is false when id has none; a tombstone that
// does not decode is an error.
func lookupTombstone(tombs, index *bolt.Cursor, id []byte) (t tombstone, ok bool, err error) {
	k, v := tombs.Seek(id)
	if k == nil || !bytes.Equal(k, id) {
		return tombstone{}, false, nil
	}
	var (
		why     []byte
		indexed bool
	)
	if len(v) == 8 {
		ik := tombIndexKey(v, id)
		var k2 []byte
		k2, why = index.Seek(ik)
		indexed = k2 != nil && bytes.Equal(k2, ik)
	}
	t, err = decodeTombstone(id, v, why, indexed)
	if err != nil {
		return tombstone{}, false, err
	}
	return t, true, nil
}

// lookupTombstone is lookupTombstone in the write transaction.
func (w *wtx) lookupTombstone(id []byte) (tombstone, bool, error) {
	return lookupTombstone(w.cursor(w.tombs), w.cursor(w.tombTime), id)
}

// tombstone records that id left the store at w.now, for the reason kind.
func (w *wtx) tombstone(id string, kind tombKind) {
	w.idMaxOK = false
	if old := w.tombs.Get([]byte(id)); len(old) == 8 {
		w.del(w.tombTime, tombIndexKey(old, []byte(id)))
	} else {
		w.tombN++
	}
	t := u64(nanos(w.now))
	w.put(w.tombs, []byte(id), t)
	w.put(w.tombTime, append(t, id...), kind.indexValue())
}

// untombstone removes id's tombstone, if any.
func (w *wtx) untombstone(id string) {
	old := w.tombs.Get([]byte(id))
	if old == nil {
		return
	}
	if len(old) == 8 {
		w.del(w.tombTime, tombIndexKey(old, []byte(id)))
	}
	w.del(w.tombs, []byte(id))
	dec(&w.tombN)
}
