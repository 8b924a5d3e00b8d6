package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// wtx is the state of one write transaction of the committer: the buckets,
// the meta counters (read at the start, written back at the end) and the
// first write error, which aborts the whole transaction.
type wtx struct {
	tx  *bolt.Tx
	now time.Time

	events, due, dead, tombs, tombTime, keys, endpoints, changelog, meta *bolt.Bucket
	attempts                                                             *bolt.Bucket // set on first use (attemptsCursor)
	dueEP, dueHeads                                                      *bolt.Bucket // due_by_endpoint, due_endpoints
	arch                                                                 *archiveTx   // nil unless the store archives (Options.Archive)

	lsn                                          uint64
	pending, deadN, tombN, endpointsN, changeLen uint64
	unrouted                                     uint64 // pending records kept unrouted (Record.Unrouted)

	err      error
	inUser   bool
	keyIndex bool // the file keeps its key index (Store.keyIndex)

	arena   []byte // backing store for the keys and values of this transaction
	scratch []byte // reused for changelog entry heads (entryAround)

	cursors map[*bolt.Bucket]*bolt.Cursor

	// keyPuts are the key index entries this transaction added and has not
	// put yet. They are put in sorted order before the key index is read or
	// deleted from, and at the end: a batch of keyed inserts then walks the
	// index once, leaf by leaf, instead of jumping between the leaves of
	// its keys for every event (their entries cluster by key, not by time).
	keyPuts [][]byte

	// idMax is an upper bound of every ID in events, dead and tombstones
	// (valid when idMaxOK). Time-ordered IDs (UUIDv7) arrive above it, and an
	// ID above it needs no lookup to be known new. Writes other than inserts
	// clear idMaxOK; inserts raise idMax.
	idMax   []byte
	idMaxOK bool

	// heads holds, for every endpoint whose due_by_endpoint entries this
	// transaction changed, its head before the first change (touchEndpoint);
	// finish updates due_endpoints from it. lastTouched spares the map
	// lookup for a run of records of one endpoint.
	heads       map[string]epHead
	lastTouched string
	touchedLast bool
	epPrefix    []byte // reused for endpoint prefixes (endpointHead)
	epKey       []byte // reused for due_by_endpoint keys to delete
}

// knownNew reports whether id is certainly in none of events, dead and
// tombstones, without a lookup.
func (w *wtx) knownNew(id []byte) bool {
	if !w.idMaxOK {
		w.idMax = nil
		for _, b := range []*bolt.Bucket{w.events, w.dead, w.tombs} {
			if k := lastKey(b); bytes.Compare(k, w.idMax) > 0 {
				w.idMax = bytes.Clone(k)
			}
		}
		w.idMaxOK = true
	}
	return bytes.Compare(id, w.idMax) > 0
}

// lastKey returns the last key of b, nil when it has none.
//
// Deletes leave empty leaves in a bucket's tree until the commit rebalances
// it, and bbolt's Cursor.Last (v1.5.0) never returns on a branching tree
// whose leaves are all empty: it steps back to the first leaf, finds it
// empty, and starts over. First skips empty leaves forward and ends, so it
// answers whether there is any key; with one, Last finds it.
func lastKey(b *bolt.Bucket) []byte {
	c := b.Cursor()
	if k, _ := c.First(); k == nil {
		return nil
	}
	k, _ := c.Last()
	return k
}

// raiseIDMax records that id was just inserted.
func (w *wtx) raiseIDMax(id []byte) {
	if w.idMaxOK && bytes.Compare(id, w.idMax) > 0 {
		w.idMax = id
	}
}

// get is Bucket.Get through one cursor per bucket and transaction: a new
// cursor (which Bucket.Get makes each time) allocates its stack afresh, a
// reused one does not.
func (w *wtx) get(b *bolt.Bucket, k []byte) []byte {
	ck, v := w.cursor(b).Seek(k)
	if ck == nil || !bytes.Equal(ck, k) {
		return nil
	}
	return v
}

// cursor returns the transaction's cursor of bucket b.
func (w *wtx) cursor(b *bolt.Bucket) *bolt.Cursor {
	c := w.cursors[b]
	if c == nil {
		if w.cursors == nil {
			w.cursors = make(map[*bolt.Bucket]*bolt.Cursor, 4)
		}
		c = b.Cursor()
		w.cursors[b] = c
	}
	return c
}

// alloc returns an empty slice with capacity n carved from the transaction's
// arena: bbolt needs keys and values to stay valid until the commit, and one
// big allocation costs the collector far less than one per value. Chunks
// start small and double up to 256 KiB, so that a transaction of a few
// outcomes does not allocate (and zero) 256 KiB for a few hundred bytes.
func (w *wtx) alloc(n int) []byte {
	if cap(w.arena)-len(w.arena) < n {
		w.arena = make([]byte, 0, max(n, min(2*cap(w.arena), 256<<10), 4<<10))
	}
	l := len(w.arena)
	w.arena = w.arena[:l+n]
	return w.arena[l : l : l+n]
}

// u64 is u64 from the arena.
func (w *wtx) u64(v uint64) []byte { return binary.BigEndian.AppendUint64(w.alloc(8), v) }

// dueKey is dueKey from the arena.
func (w *wtx) dueKey(t time.Time, id string) []byte {
	return append(binary.BigEndian.AppendUint64(w.alloc(8+len(id)), nanos(t)), id...)
}

// appendFill is the fill percent of the buckets whose keys are sequential
// (UUIDv7 IDs, due times, LSNs) and append at the right edge of their trees:
// fill pages up instead of splitting them in half.
const appendFill = 1.0

func (s *Store) begin(tx *bolt.Tx) *wtx {
	w := &wtx{
		tx:        tx,
		now:       s.opts.Now(),
		events:    tx.Bucket(bucketEvents),
		due:       tx.Bucket(bucketDue),
		dead:      tx.Bucket(bucketDead),
		tombs:     tx.Bucket(bucketTombs),
		tombTime:  tx.Bucket(bucketTombTime),
		keys:      tx.Bucket(bucketKeys),
		endpoints: tx.Bucket(bucketEndpoints),
		changelog: tx.Bucket(bucketChangelog),
		meta:      tx.Bucket(bucketMeta),
		dueEP:     tx.Bucket(bucketDueByEndpoint),
		dueHeads:  tx.Bucket(bucketDueEndpoints),
		keyIndex:  s.keyIndex,
	}
	w.events.FillPercent = appendFill
	w.due.FillPercent = appendFill
	w.dueEP.FillPercent = dueByEndpointFill
	w.dead.FillPercent = 0.9
	w.tombs.FillPercent = 0.9
	w.tombTime.FillPercent = 0.95
	w.changelog.FillPercent = appendFill
	w.lsn = getU64(w.meta, metaLastLSN)
	w.pending = getU64(w.meta, metaPending)
	w.deadN = getU64(w.meta, metaDead)
	w.tombN = getU64(w.meta, metaTombs)
	w.endpointsN = getU64(w.meta, metaEndpoints)
	w.changeLen = getU64(w.meta, metaChangelogN)
	w.unrouted = getU64(w.meta, metaUnrouted)
	if s.archive {
		w.beginArchive()
	}
	return w
}

// putKeyIndex adds the key index entry of a pending record (see keyPuts),
// when the file keeps its key index; without it the entry is not even built.
func (w *wtx) putKeyIndex(key string, seq uint64, id string) {
	if w.keyIndex {
		w.keyPuts = append(w.keyPuts, keyIndex(key, seq, id))
	}
}

// delKeyIndex deletes the key index entry of a pending record, when the
// file keeps its key index.
func (w *wtx) delKeyIndex(key string, seq uint64, id string) {
	if !w.keyIndex {
		return
	}
	w.flushKeyPuts()
	w.del(w.keys, keyIndex(key, seq, id))
}

// flushKeyPuts puts the pending key index entries, in key order.
func (w *wtx) flushKeyPuts() {
	if len(w.keyPuts) == 0 {
		return
	}
	slices.SortFunc(w.keyPuts, bytes.Compare)
	for _, k := range w.keyPuts {
		w.put(w.keys, k, nil)
	}
	w.keyPuts = w.keyPuts[:0]
}

func (w *wtx) finish() error {
	w.flushKeyPuts()
	w.finishHeads()
	w.putU64(metaLastLSN, w.lsn)
	w.putU64(metaPending, w.pending)
	w.putU64(metaDead, w.deadN)
	w.putU64(metaTombs, w.tombN)
	w.putU64(metaEndpoints, w.endpointsN)
	w.putU64(metaChangelogN, w.changeLen)
	if w.unrouted != 0 || w.meta.Get(metaUnrouted) != nil {
		w.putU64(metaUnrouted, w.unrouted)
	}
	w.finishArchive()
	return w.err
}

func (w *wtx) putU64(k []byte, v uint64) { w.put(w.meta, k, u64(v)) }

func (w *wtx) put(b *bolt.Bucket, k, v []byte) {
	if w.err == nil {
		w.err = b.Put(k, v)
	}
}

// del is Bucket.Delete through the bucket's cursor of this transaction
// (see get): no new cursor, and no allocation, per delete.
func (w *wtx) del(b *bolt.Bucket, k []byte) {
	if w.err != nil {
		return
	}
	c := w.cursor(b)
	if ck, _ := c.Seek(k); ck != nil && bytes.Equal(ck, k) {
		w.err = c.Delete()
	}
}

// user runs caller code; a panic in it is raised again in the caller's
// goroutine (see wtx.call).
func (w *wtx) user(fn func() error) error {
	was := w.inUser
	w.inUser = true
	err := fn()
	w.inUser = was
	return err
}

func dec(n *uint64) {
	if *n > 0 {
		*n--
	}
}

// nanos maps t to an order-preserving unsigned key: the zero time and times
// before 1678 sort first, times after 2262 last.
func nanos(t time.Time) uint64 {
	var n int64
	switch {
	case t.IsZero():
		n = math.MinInt64
	case t.Year() < 1678:
		n = math.MinInt64 + 1
	case t.Year() > 2261:
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	return uint64(n) ^ (1 << 63)
}

func fromNanos(u uint64) time.Time {
	n := int64(u ^ (1 << 63))
	if n == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// dueKey is the due index key: due time (8 bytes) ‖ ID.
func dueKey(t time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, nanos(t))
	return append(k, id...)
}

// keyPrefix is the prefix of the key index entries of one Key: its length
// (2 bytes) ‖ Key.
func keyPrefix(key string) []byte {
	p := make([]byte, 2, 2+len(key)+8)
	binary.BigEndian.PutUint16(p, uint16(len(key)))
	return append(p, key...)
}

// keyIndex is the key index entry of a pending record: keyPrefix ‖ seq (8
// bytes) ‖ ID, so the oldest pending record of a Key comes first.
func keyIndex(key string, seq uint64, id string) []byte {
	k := keyPrefix(key)
	k = binary.BigEndian.AppendUint64(k, seq)
	return append(k, id...)
}

// next assigns the next LSN.
func (w *wtx) next() uint64 {
	w.lsn++
	return w.lsn
}

// log appends a changelog entry for a change of id under lsn. frame is the
// record's encoding after the change, nil for a deleting op.
func (w *wtx) log(lsn uint64, op Op, id string, frame []byte, reason string) {
	e := Entry{LSN: lsn, Op: op, ID: id, Version: lsn, Time: w.now, Reason: reason}
	buf := w.alloc(frameMin + 64 + len(id) + len(reason) + len(frame))
	w.put(w.changelog, w.u64(lsn), appendEntry(buf, &e, frame))
	w.changeLen++
}

// getPending returns the pending record with id, or nil.
func (w *wtx) getPending(id string) (*Record, error) {
	v := w.get(w.events, []byte(id))
	if v == nil {
		return nil, nil
	}
	return decodeStored(id, v)
}

// decodeStored decodes the value stored under key id and checks that it is
// the record of that key: every later delete uses the key bytes, and a value
// under the wrong key is damage, not a record. (Generic so that a key read
// from a cursor is not copied into a string first.)
func decodeStored[K string | []byte](id K, v []byte) (*Record, error) {
	r, err := DecodeRecord(v)
	if err != nil {
		return nil, fmt.Errorf("record %q: %w", id, err)
	}
	if r.ID != string(id) {
		return nil, fmt.Errorf("%w: key %q holds record %q", ErrCorrupt, id, r.ID)
	}
	return r, nil
}

func (w *wtx) getDead(id string) (*Record, error) {
	v := w.get(w.dead, []byte(id))
	if v == nil {
		return nil, nil
	}
	return decodeStored(id, v)
}

// putPending writes r (Version set) as pending with its indexes, replacing
// old (the stored version of the same ID, or nil).
func (w *wtx) putPending(r, old *Record, frame []byte) {
	w.idMaxOK = false
	if old != nil {
		if !old.NextAttemptAt.Equal(r.NextAttemptAt) {
			w.del(w.due, dueKey(old.NextAttemptAt, old.ID))
		}
		if !old.NextAttemptAt.Equal(r.NextAttemptAt) || old.Endpoint != r.Endpoint {
			w.delEndpointDue(old.Endpoint, old.NextAttemptAt, old.ID)
		}
		if old.indexKey() != r.indexKey() || old.seq != r.seq {
			if old.Key != "" {
				w.delKeyIndex(old.indexKey(), old.seq, old.ID)
			}
		}
		if old.Unrouted() {
			dec(&w.unrouted)
		}
	} else {
		w.pending++
	}
	if r.Unrouted() {
		w.unrouted++
	}
	w.put(w.events, []byte(r.ID), frame)
	if old == nil || !old.NextAttemptAt.Equal(r.NextAttemptAt) {
		w.put(w.due, w.dueKey(r.NextAttemptAt, r.ID), nil)
	}
	if old == nil || !old.NextAttemptAt.Equal(r.NextAttemptAt) || old.Endpoint != r.Endpoint {
		w.putEndpointDue(r.Endpoint, r.NextAttemptAt, r.ID)
	}
	if r.Key != "" && (old == nil || old.indexKey() != r.indexKey() || old.seq != r.seq) {
		w.putKeyIndex(r.indexKey(), r.seq, r.ID)
	}
}

// putNewPending writes a new pending record from its parts (Insert's path,
// which encoded the record before the transaction), all but its due index
// entry and its due_by_endpoint entry.
func (w *wtx) putNewPending(id []byte, key string, seq uint64, frame []byte) {
	w.pending++
	w.raiseIDMax(id)
	w.put(w.events, id, frame)
	if key != "" && w.keyIndex {
		w.putKeyIndex(key, seq, string(id))
	}
}

// removePending deletes the stored pending record old and its indexes.
func (w *wtx) removePending(old *Record) {
	w.del(w.events, []byte(old.ID))
	w.del(w.due, dueKey(old.NextAttemptAt, old.ID))
	w.delEndpointDue(old.Endpoint, old.NextAttemptAt, old.ID)
	if old.Key != "" {
		w.delKeyIndex(old.indexKey(), old.seq, old.ID)
	}
	dec(&w.pending)
	if old.Unrouted() {
		dec(&w.unrouted)
	}
}

func (w *wtx) removeDead(old *Record) {
	w.del(w.dead, []byte(old.ID))
	dec(&w.deadN)
}

func (w *wtx) putDead(r *Record, frame []byte, existed bool) {
	w.idMaxOK = false
	w.put(w.dead, []byte(r.ID), frame)
	if !existed {
		w.deadN++
	}
}
