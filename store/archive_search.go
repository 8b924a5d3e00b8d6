package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ArchiveQuery selects archived records. Zero fields match everything.
//
// SearchArchive reads one range of one index: the key index when KeyPrefix
// is set, else the endpoint index when Endpoint is, else the topic index
// when Topic or TopicPrefix is, else the archive itself in time order.
// Within an index, the records of one field come in delivery time order,
// and fields in byte order. The other fields are checked on each record
// found in that range.
type ArchiveQuery struct {
	// Topic keeps the records of that topic; TopicPrefix those whose topic
	// starts with it (a subscription pattern "order.*" is the prefix
	// "order.").
	Topic, TopicPrefix string
	// Endpoint keeps the records delivered to that endpoint.
	Endpoint string
	// KeyPrefix keeps the records whose Key starts with it.
	KeyPrefix string
	// From and To keep the records delivered in [From, To).
	From, To time.Time
	// After is the Next of the previous page ("" for the first).
	After string
	// Limit is the most records a page holds. Default 100.
	Limit int
	// MaxRead is the most keys (index entries and records) one page reads
	// before it ends with the records found so far and a Next that goes
	// on from there. Default 10 × Limit, at least 1,000.
	MaxRead int
}

// ArchivePage is one page of SearchArchive.
type ArchivePage struct {
	Records []*Archived
	// Next continues the search after this page; "" when the range is
	// exhausted.
	Next string
	// Read counts the keys the page read: index entries and records.
	Read int
}

// Which range of which bucket a search reads.
const (
	indexTime     byte = 't'
	indexTopic    byte = 'p'
	indexEndpoint byte = 'e'
	indexKey      byte = 'k'
)

// archivePlan is the range a query reads: every key under prefix, in
// bucket; exact when the prefix ends with the field's end mark (one field's
// run, in time order).
type archivePlan struct {
	index  byte
	bucket []byte
	prefix []byte
	exact  bool
}

func (q *ArchiveQuery) plan() archivePlan {
	field := func(index byte, bucket []byte, f string, exact bool) archivePlan {
		p := appendEscaped(nil, f)
		if exact {
			p = append(p, fieldEnd...)
		}
		return archivePlan{index: index, bucket: bucket, prefix: p, exact: exact}
	}
	switch {
	case q.KeyPrefix != "":
		return field(indexKey, bucketArchiveKey, q.KeyPrefix, false)
	case q.Endpoint != "":
		return field(indexEndpoint, bucketArchiveEndpoint, q.Endpoint, true)
	case q.Topic != "":
		return field(indexTopic, bucketArchiveTopic, q.Topic, true)
	case q.TopicPrefix != "":
		return field(indexTopic, bucketArchiveTopic, q.TopicPrefix, false)
	}
	return archivePlan{index: indexTime, bucket: bucketArchive, exact: true}
}

// match reports whether a passes the fields of q that its plan's range
// does not already decide.
func (q *ArchiveQuery) match(a *Archived) bool {
	switch {
	case q.Topic != "" && a.Topic != q.Topic,
		q.TopicPrefix != "" && !strings.HasPrefix(a.Topic, q.TopicPrefix),
		q.Endpoint != "" && a.Endpoint != q.Endpoint,
		q.KeyPrefix != "" && !strings.HasPrefix(a.Key, q.KeyPrefix):
		return false
	}
	return true
}

// cursorVersion is the first byte of every search cursor.
const cursorVersion = 1

// encodeCursor returns the opaque cursor that resumes a search of index
// after the key k.
func encodeCursor(index byte, k []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion, index}, k...))
}

// decodeCursor returns the index and key a search cursor resumes after. It
// refuses (ErrInvalid) anything SearchArchive did not write.
func decodeCursor(s string) (index byte, k []byte, err error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	// Only the one text that encodes b: the decoder skips line breaks.
	if err != nil || len(b) < 3 || b[0] != cursorVersion || base64.RawURLEncoding.EncodeToString(b) != s {
		return 0, nil, fmt.Errorf("%w: not a cursor of this archive", ErrInvalid)
	}
	index, k = b[1], b[2:]
	switch index {
	case indexTime:
		_, _, ok := splitArchiveKey(k)
		if !ok {
			return 0, nil, fmt.Errorf("%w: not a cursor of this archive", ErrInvalid)
		}
	case indexTopic, indexEndpoint, indexKey:
		if _, _, ok := splitIndexKey(k); !ok {
			return 0, nil, fmt.Errorf("%w: not a cursor of this archive", ErrInvalid)
		}
	default:
		return 0, nil, fmt.Errorf("%w: not a cursor of this archive", ErrInvalid)
	}
	return index, k, nil
}

// SearchArchive returns one page of the archived records q selects (see
// ArchiveQuery for the order). A page reads at most q.MaxRead keys, so it
// may hold fewer than q.Limit records and still have a Next. A cursor of
// another query's index is refused with ErrInvalid.
func (s *Store) SearchArchive(q ArchiveQuery) (*ArchivePage, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.MaxRead <= 0 {
		q.MaxRead = max(10*q.Limit, 1000)
	}
	p := q.plan()
	var after []byte
	if q.After != "" {
		index, k, err := decodeCursor(q.After)
		if err != nil {
			return nil, err
		}
		if index != p.index || !bytes.HasPrefix(k, p.prefix) {
			return nil, fmt.Errorf("%w: the cursor belongs to another search", ErrInvalid)
		}
		after = k
	}
	page := &ArchivePage{}
	err := s.view(func(tx *bolt.Tx) error {
		records, b := tx.Bucket(bucketArchive), tx.Bucket(p.bucket)
		if records == nil || b == nil {
			return nil // no archive: nothing was ever kept
		}
		sc := archiveScan{q: &q, p: p, records: records, c: b.Cursor(), page: page}
		return sc.run(after)
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// archiveScan is one page of a search under way.
type archiveScan struct {
	q       *ArchiveQuery
	p       archivePlan
	records *bolt.Bucket
	c       *bolt.Cursor
	page    *ArchivePage
}

// run reads the plan's range from after (or its start) until the page is
// full, MaxRead keys were read, or the range ends.
func (sc *archiveScan) run(after []byte) error {
	from, to := nanos(sc.q.From), nanos(sc.q.To)
	if sc.q.To.IsZero() {
		to = ^uint64(0)
	}
	var k, v []byte
	switch {
	case after != nil:
		if k, v = sc.c.Seek(after); bytes.Equal(k, after) {
			k, v = sc.c.Next()
		}
	case sc.p.exact:
		k, v = sc.c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(sc.p.prefix), from))
	default:
		k, v = sc.c.Seek(sc.p.prefix)
	}
	var last []byte
	for k != nil && bytes.HasPrefix(k, sc.p.prefix) {
		if sc.page.Read >= sc.q.MaxRead {
			sc.page.Next = encodeCursor(sc.p.index, last)
			return nil
		}
		sc.page.Read++
		ak, fieldLen := k, 0
		if sc.p.index != indexTime {
			var ok bool
			if fieldLen, ak, ok = splitIndexKey(k); !ok {
				return fmt.Errorf("%w: archive index key %x", ErrCorrupt, k)
			}
		}
		last = bytes.Clone(k)
		// The run of one field ends at its end mark and time: k[:fieldLen+2].
		run := k[:fieldLen+len(fieldEnd)]
		if sc.p.index == indexTime {
			run = nil
		}
		switch t := nanosOf(ak); {
		case t < from:
			k, v = sc.c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(run), from))
			continue
		case t >= to && sc.p.exact:
			return nil
		case t >= to: // on to the next field of the prefix range
			k, v = sc.c.Seek(append(bytes.Clone(k[:fieldLen]), 0, 2))
			continue
		}
		a, err := sc.read(ak, v)
		if err != nil {
			return err
		}
		if sc.q.match(a) {
			sc.page.Records = append(sc.page.Records, a)
			if len(sc.page.Records) == sc.q.Limit {
				sc.page.Next = encodeCursor(sc.p.index, last)
				return nil
			}
		}
		k, v = sc.c.Next()
	}
	return nil
}

// read returns the archived record under ak: v itself when the scan reads
// the archive, else the record the index entry names.
func (sc *archiveScan) read(ak, v []byte) (*Archived, error) {
	if sc.p.index != indexTime {
		if v = sc.records.Get(ak); v == nil {
			return nil, fmt.Errorf("%w: archive index entry names no record %x", ErrCorrupt, ak)
		}
		sc.page.Read++
	}
	return decodeArchived(ak, v)
}
