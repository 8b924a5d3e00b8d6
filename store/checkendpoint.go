package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"
)

// The checks of the per-endpoint due index (due_by_endpoint,
// due_endpoints), run only on a file whose schema says it keeps the index:
// a file of an older layout may hold a build of it cut short.

// epEvent checks that the pending record r has its per-endpoint due entry,
// and lowers its endpoint's head.
func (c *checker) epEvent(page uint64, r *Record) {
	if !c.endpointIndex {
		return
	}
	if t, ok := c.epHeads[r.Endpoint]; !ok || nanos(r.NextAttemptAt) < t {
		c.epHeads[r.Endpoint] = nanos(r.NextAttemptAt)
	}
	if _, ok := c.get("due_by_endpoint", epDueKey(nil, r.Endpoint, r.NextAttemptAt, r.ID)); !ok && c.sound["due_by_endpoint"] {
		c.problem("events", page, idKey([]byte(r.ID)), "no per-endpoint due index entry for endpoint %q at %s: the endpoint's reads would never return it",
			r.Endpoint, r.NextAttemptAt.Format(time.RFC3339Nano))
		c.epMissing = true
	}
}

// splitEpDue splits a due_by_endpoint key into endpoint, time and ID; ok is
// false when the key cannot hold them.
func splitEpDue(k []byte) (ep []byte, t uint64, id []byte, ok bool) {
	if len(k) < 2 {
		return nil, 0, nil, false
	}
	n := int(binary.BigEndian.Uint16(k))
	if len(k) < 2+n+8+1 {
		return nil, 0, nil, false
	}
	return k[2 : 2+n], binary.BigEndian.Uint64(k[2+n:]), k[2+n+8:], true
}

func epDueName(ep []byte, t uint64, id []byte) string {
	return fmt.Sprintf("endpoint %q, %s, ID %q", ep, fromNanos(t).Format(time.RFC3339Nano), id)
}

// epDue checks one due_by_endpoint entry: its shape, and that it names a
// pending record.
func (c *checker) epDue(page uint64, k, v []byte) {
	if !c.endpointIndex {
		return
	}
	ep, t, id, ok := splitEpDue(k)
	if !ok {
		c.problem("due_by_endpoint", page, fmt.Sprintf("key %x", k), "a per-endpoint due key of %d bytes cannot hold its endpoint, time and ID", len(k))
		return
	}
	if len(v) != 0 {
		c.problem("due_by_endpoint", page, epDueName(ep, t, id), "an entry with a %d-byte value", len(v))
	}
	if _, ok := c.get("events", id); !ok && c.sound["events"] {
		c.problem("due_by_endpoint", page, epDueName(ep, t, id), "names %q, which is not pending", id)
	}
}

// epDueOwner checks that a due_by_endpoint entry names the endpoint and time
// of its pending record. It decodes the record again, so it runs only when
// the index does not match the records (see endpointIndexAfter).
func (c *checker) epDueOwner(page uint64, k, _ []byte) {
	ep, t, id, ok := splitEpDue(k)
	if !ok {
		return
	}
	ev, ok := c.get("events", id)
	if !ok {
		return
	}
	if r, err := DecodeRecord(ev); err == nil && (r.Endpoint != string(ep) || nanos(r.NextAttemptAt) != t) {
		c.problem("due_by_endpoint", page, epDueName(ep, t, id), "the pending record is for endpoint %q at %s",
			r.Endpoint, r.NextAttemptAt.Format(time.RFC3339Nano))
	}
}

// epHead checks one due_endpoints entry against the heads the pending
// records give (events are walked first).
func (c *checker) epHead(page uint64, k, v []byte) {
	if !c.endpointIndex {
		return
	}
	if len(k) < 8 {
		c.problem("due_endpoints", page, fmt.Sprintf("key %x", k), "an endpoint head key of %d bytes", len(k))
		return
	}
	t, ep := binary.BigEndian.Uint64(k), string(k[8:])
	name := fmt.Sprintf("endpoint %q at %s", ep, fromNanos(t).Format(time.RFC3339Nano))
	if len(v) != 0 {
		c.problem("due_endpoints", page, name, "an entry with a %d-byte value", len(v))
	}
	if c.epSeen[ep] {
		c.problem("due_endpoints", page, name, "a second head entry of the endpoint")
	}
	c.epSeen[ep] = true
	if !c.sound["events"] {
		return
	}
	switch want, ok := c.epHeads[ep]; {
	case !ok:
		c.problem("due_endpoints", page, name, "the endpoint has no pending record")
	case want != t:
		c.problem("due_endpoints", page, name, "the endpoint's earliest record is due at %s: its records would be read late",
			fromNanos(want).Format(time.RFC3339Nano))
	}
}

// endpointIndexAfter runs the checks that need every bucket walked: the
// buckets exist, every endpoint with pending records has its head entry,
// and (when the entries do not match the records in number) each entry's
// endpoint and time.
func (c *checker) endpointIndexAfter() {
	if !c.endpointIndex {
		return
	}
	for _, name := range endpointBuckets {
		if !slices.ContainsFunc(c.tops, func(b bucketRef) bool { return bytes.Equal(b.name, name) }) {
			c.problem(string(name), 0, "", "the bucket is missing")
		}
	}
	if c.sound["events"] && c.sound["due_endpoints"] {
		for _, ep := range slices.Sorted(maps.Keys(c.epHeads)) {
			if !c.epSeen[ep] {
				c.problem("due_endpoints", 0, fmt.Sprintf("endpoint %q", ep), "no head entry, though it has pending records: they would never be read")
			}
		}
	}
	if c.sound["due_by_endpoint"] && c.sound["events"] && (c.epMissing || c.keys["due_by_endpoint"] != c.keys["events"]) {
		n := c.keys["due_by_endpoint"]
		c.walk("due_by_endpoint", c.epDueOwner)
		c.keys["due_by_endpoint"] = n
	}
}
