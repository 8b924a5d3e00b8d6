package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The per-endpoint due index. Every pending record has one entry in
// due_by_endpoint, next to its entry in due, and every endpoint with
// pending records one entry in due_endpoints, at the earliest NextAttemptAt
// of its records (its head). A punctuation reads the heads that are due and
// then each chosen endpoint's own run of due entries, so an endpoint's
// backlog, held or saturated, costs the others nothing.
var (
	// bucketDueByEndpoint: len(Endpoint) (2 bytes) ‖ Endpoint ‖
	// NextAttemptAt (8 bytes) ‖ ID → empty.
	bucketDueByEndpoint = []byte("due_by_endpoint")
	// bucketDueEndpoints: head NextAttemptAt (8 bytes) ‖ Endpoint → empty.
	bucketDueEndpoints = []byte("due_endpoints")

	endpointBuckets = [][]byte{bucketDueByEndpoint, bucketDueEndpoints}
)

// dueByEndpointFill is the fill percent of due_by_endpoint: within one
// endpoint, entries mostly append at the right edge of its run, but the
// runs of other endpoints follow it, so a page must keep some room.
const dueByEndpointFill = 0.9

// endpointPrefix appends the prefix of one endpoint's due_by_endpoint
// entries to dst: len(Endpoint) (2 bytes) ‖ Endpoint.
func endpointPrefix(dst []byte, ep string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ep)))
	return append(dst, ep...)
}

// epDueKey appends the due_by_endpoint key of a pending record to dst.
func epDueKey(dst []byte, ep string, t time.Time, id string) []byte {
	dst = endpointPrefix(dst, ep)
	dst = binary.BigEndian.AppendUint64(dst, nanos(t))
	return append(dst, id...)
}

// epDueKeyLen is the length of a due_by_endpoint key.
func epDueKeyLen(ep, id string) int { return 2 + len(ep) + 8 + len(id) }

// headKey is the due_endpoints key of an endpoint whose head is at t
// (nanos).
func headKey(t uint64, ep []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(ep)), t), ep...)
}

// epHead is what a write transaction knows of one endpoint it touched: its
// head when the transaction first touched it.
type epHead struct {
	t  uint64 // nanos of the old head
	ok bool   // the endpoint had pending records
}

// touchEndpoint records the head of ep before the transaction first changes
// its entries (one seek), so that finishHeads can tell whether it moved.
func (w *wtx) touchEndpoint(ep string) {
	if w.touchedLast && w.lastTouched == ep {
		return
	}
	w.lastTouched, w.touchedLast = ep, true
	if _, ok := w.heads[ep]; ok {
		return
	}
	if w.heads == nil {
		w.heads = make(map[string]epHead, 4)
	}
	t, ok := w.endpointHead(ep)
	w.heads[ep] = epHead{t: t, ok: ok}
}

// endpointHead returns the earliest due time (nanos) among ep's entries in
// due_by_endpoint, ok false when it has none.
func (w *wtx) endpointHead(ep string) (uint64, bool) {
	w.epPrefix = endpointPrefix(w.epPrefix[:0], ep)
	k, _ := w.cursor(w.dueEP).Seek(w.epPrefix)
	if k == nil || !bytes.HasPrefix(k, w.epPrefix) || len(k) < len(w.epPrefix)+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(w.epPrefix):]), true
}

// putEndpointDue adds the due_by_endpoint entry of a pending record.
func (w *wtx) putEndpointDue(ep string, t time.Time, id string) {
	w.touchEndpoint(ep)
	w.put(w.dueEP, epDueKey(w.alloc(epDueKeyLen(ep, id)), ep, t, id), nil)
}

// delEndpointDue deletes the due_by_endpoint entry of a pending record.
func (w *wtx) delEndpointDue(ep string, t time.Time, id string) {
	w.touchEndpoint(ep)
	w.epKey = epDueKey(w.epKey[:0], ep, t, id)
	w.del(w.dueEP, w.epKey)
}

// finishHeads brings due_endpoints up to date for every endpoint the
// transaction touched: one seek each, and a delete and a put for those whose
// head moved. Its cost grows with the endpoints touched, not the records.
func (w *wtx) finishHeads() {
	for ep, old := range w.heads {
		t, ok := w.endpointHead(ep)
		if ok == old.ok && t == old.t {
			continue
		}
		if old.ok {
			w.del(w.dueHeads, headKey(old.t, []byte(ep)))
		}
		if ok {
			w.put(w.dueHeads, headKey(t, []byte(ep)), nil)
		}
	}
	clear(w.heads)
	w.lastTouched, w.touchedLast = "", false
}

// metaEndpointBuild marks a file whose per-endpoint due index Open is
// building: its buckets are the store's, partly filled, and the next Open
// starts the build again. (Without the mark, buckets of those names in a
// file of an older schema are the application's.)
var metaEndpointBuild = []byte("due_by_endpoint_build")

// endpointBuildChunk is the most pending records one transaction of the
// build reads.
const endpointBuildChunk = 10_000

// ensureEndpointIndex builds the per-endpoint due index of a file written
// before it: empty buckets and the mark in one transaction, the entries of
// endpointBuildChunk pending records per transaction, then the heads and the
// new schema in the last. A crash leaves the old schema, which older builds
// still open (they see two buckets they do not know), and the next Open
// starts over. A damaged file is an error, not a crash.
func (s *Store) ensureEndpointIndex() (err error) {
	if s.endpointIndex {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, p)
		}
	}()
	if err := s.db.Update(startEndpointBuild); err != nil {
		return err
	}
	heads := map[string]uint64{}
	var after []byte
	for {
		var done bool
		err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			after, done, err = buildEndpointChunk(tx, after, heads)
			return err
		})
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDueEndpoints)
		for ep, t := range heads {
			if err := b.Put(headKey(t, []byte(ep)), nil); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(metaEndpointBuild); err != nil {
			return err
		}
		return meta.Put(metaSchema, u64(layoutSchema(s.keyIndex, true)))
	})
	if err == nil {
		s.endpointIndex = true
	}
	return err
}

// startEndpointBuild (re)creates the empty buckets of the per-endpoint due
// index and marks the build, refusing application buckets of those names.
func startEndpointBuild(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	building := meta.Get(metaEndpointBuild) != nil
	for _, name := range endpointBuckets {
		if tx.Bucket(name) == nil {
			continue
		}
		if !building {
			return fmt.Errorf("%w: the file holds an application bucket %q, where this version keeps its per-endpoint due index: move it to another name first", ErrNotDatabase, name)
		}
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	for _, name := range endpointBuckets {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	return meta.Put(metaEndpointBuild, []byte{1})
}

// buildEndpointChunk puts the due_by_endpoint entries of up to
// endpointBuildChunk pending records with IDs after after (all from the
// first when nil), in key order, and lowers heads to their times. It
// returns the last ID read, and done when no record is left.
func buildEndpointChunk(tx *bolt.Tx, after []byte, heads map[string]uint64) (last []byte, done bool, err error) {
	c := tx.Bucket(bucketEvents).Cursor()
	var k, v []byte
	if after == nil {
		k, v = c.First()
	} else if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	var entries [][]byte
	for ; k != nil && len(entries) < endpointBuildChunk; k, v = c.Next() {
		r, err := decodeStored(k, v)
		if err != nil {
			return nil, false, err
		}
		entries = append(entries, epDueKey(nil, r.Endpoint, r.NextAttemptAt, r.ID))
		if t, ok := heads[r.Endpoint]; !ok || nanos(r.NextAttemptAt) < t {
			heads[r.Endpoint] = nanos(r.NextAttemptAt)
		}
		last = bytes.Clone(k)
	}
	slices.SortFunc(entries, bytes.Compare)
	b := tx.Bucket(bucketDueByEndpoint)
	b.FillPercent = dueByEndpointFill
	for _, e := range entries {
		if err := b.Put(e, nil); err != nil {
			return nil, false, err
		}
	}
	return last, k == nil, nil
}

// DueHeads calls fn for every endpoint that has a due record: those whose
// earliest NextAttemptAt (the endpoint's head) is at or before now, earliest
// head first, until fn returns false. Records without an Endpoint (fan-out
// events kept unrouted) count as the endpoint "". It reads only the heads
// index, so its cost grows with the endpoints visited, not with their
// records: a punctuation passes over a held endpoint's backlog at the cost
// of one call of fn.
//
// fn runs inside one short read transaction, closed before DueHeads
// returns: it must be quick and do no I/O (collect, then act). A read-only
// store of a file written before this index fails with ErrNoEndpointIndex.
func (s *Store) DueHeads(now time.Time, fn func(endpoint string, head time.Time) bool) error {
	if !s.endpointIndex {
		return ErrNoEndpointIndex
	}
	end := nanos(now)
	return s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDueEndpoints).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) < 8 {
				return fmt.Errorf("%w: endpoint head key of %d bytes", ErrCorrupt, len(k))
			}
			t := binary.BigEndian.Uint64(k)
			if t > end || !fn(string(k[8:]), fromNanos(t)) {
				return nil
			}
		}
		return nil
	})
}

// EndpointLimit asks DueByEndpoint for up to Limit due records of one
// endpoint.
type EndpointLimit struct {
	Endpoint string
	// Limit is the most records returned for the endpoint (default 100).
	Limit int
	// From, if set, is where to start in the endpoint's run of the index:
	// the Resume of an earlier answer. Without it the read starts at the
	// endpoint's earliest entry.
	From []byte
}

// DueByEndpointQuery selects due records endpoint by endpoint.
type DueByEndpointQuery struct {
	// Now: records with NextAttemptAt <= Now are due.
	Now time.Time
	// Endpoints lists the endpoints to read, in the order of the answer
	// (one EndpointDue each; an endpoint listed twice is read twice).
	Endpoints []EndpointLimit
	// SkipID, if set, is asked before a record is read (e.g. in flight).
	// The id is only valid during the call.
	SkipID func(id []byte) bool
	// Skip, if set, is asked after a record is decoded (busy key).
	Skip func(r *Record) bool
	// HeadOfKeyOnly returns only records that are the oldest pending record
	// of their Key, as in DueQuery; without the key index it fails with
	// ErrNoKeyIndex.
	HeadOfKeyOnly bool
	// MaxScan bounds the index entries examined per endpoint (default
	// 4*Limit of that endpoint).
	MaxScan int
}

// EndpointDue is DueByEndpoint's answer for one endpoint.
type EndpointDue struct {
	Endpoint string
	// Records are copies of its due records in NextAttemptAt order.
	Records []*Record
	// More reports that the read stopped (at Limit or MaxScan) before an
	// entry that is due: the endpoint has due records not examined.
	More bool
	// Resume, with More, is the position of the first entry not examined,
	// for EndpointLimit.From: a reader whose entries at the front of the
	// run are all skipped (followers of a key whose head is not due,
	// events in flight) reaches the rest by resuming there.
	Resume []byte
}

// DueByEndpoint returns, for each endpoint of q, up to its Limit due records
// in NextAttemptAt order, read from that endpoint's run of the per-endpoint
// due index in one short read transaction that is closed before it returns.
// Its cost grows with the entries examined (at most MaxScan per endpoint),
// not with any endpoint's backlog. SkipID and Skip run inside the read
// transaction: keep them fast. A read-only store of a file written before
// this index fails with ErrNoEndpointIndex (Due still reads it).
func (s *Store) DueByEndpoint(q DueByEndpointQuery) ([]EndpointDue, error) {
	switch {
	case !s.endpointIndex:
		return nil, ErrNoEndpointIndex
	case q.HeadOfKeyOnly && !s.keyIndex:
		return nil, ErrNoKeyIndex
	}
	end := nanos(q.Now)
	out := make([]EndpointDue, len(q.Endpoints))
	err := s.view(func(tx *bolt.Tx) error {
		d := newDueReader(tx, q.SkipID, q.Skip, q.HeadOfKeyOnly)
		c := tx.Bucket(bucketDueByEndpoint).Cursor()
		var prefix []byte
		for i, el := range q.Endpoints {
			limit := cmp.Or(max(el.Limit, 0), 100)
			maxScan := cmp.Or(max(q.MaxScan, 0), 4*limit)
			prefix = endpointPrefix(prefix[:0], el.Endpoint)
			res := EndpointDue{Endpoint: el.Endpoint}
			scanned := 0
			for k, _ := c.Seek(append(prefix, el.From...)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				if len(k) <= len(prefix)+8 {
					return fmt.Errorf("%w: per-endpoint due index key of %d bytes for endpoint %q", ErrCorrupt, len(k), el.Endpoint)
				}
				if binary.BigEndian.Uint64(k[len(prefix):]) > end {
					break
				}
				if len(res.Records) == limit || scanned == maxScan {
					res.More, res.Resume = true, slices.Clone(k[len(prefix):])
					break
				}
				scanned++
				r, err := d.read(k[len(prefix)+8:])
				if err != nil {
					return err
				}
				if r != nil && r.Endpoint != el.Endpoint {
					return fmt.Errorf("%w: per-endpoint due index lists %q under endpoint %q, its endpoint is %q", ErrCorrupt, r.ID, el.Endpoint, r.Endpoint)
				}
				if r != nil {
					res.Records = append(res.Records, r)
				}
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
