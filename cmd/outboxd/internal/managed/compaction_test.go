package managed

import (
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// A member that reads the topic after compaction, which keeps only the
// last record of each key, holds what a member that read every record
// holds: the last record of a name is taken as it is, and after a change
// that did not apply comes a restatement of the one in force.
func TestCompactedTopicGivesTheSameEndpoints(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := newSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	def := func(url, secret string) *endpoint {
		return &endpoint{name: "billing", spec: spec{URL: url}, managed: true, secret: secret, createdAt: at, updatedAt: at}
	}
	rec := func(c *change) []byte { c.name = "billing"; return encodeChange(c, s) }
	full := [][]byte{
		rec(&change{op: opPut, rev: 1, ep: def("https://a.example.com/", "whsec_a")}),                         // created
		rec(&change{op: opPut, rev: 1, ep: def("https://b.example.com/", "whsec_b")}),                         // a concurrent create: ignored
		rec(&change{op: opPut, restate: true, rev: 1, prev: 1, ep: def("https://a.example.com/", "whsec_a")}), // restated
		rec(&change{op: opPut, rev: 2, prev: 1, ep: def("https://c.example.com/", "whsec_a")}),                // replaced
		rec(&change{op: opPut, rev: 2, prev: 1, ep: def("https://d.example.com/", "whsec_a")}),                // a concurrent replace: ignored
		rec(&change{op: opPut, restate: true, rev: 2, prev: 2, ep: def("https://c.example.com/", "whsec_a")}),
	}
	for name, records := range map[string][][]byte{"every record": full, "compacted": full[len(full)-1:]} {
		r := newMember(t, key)
		for i, v := range records {
			if err := r.ApplyRecord(int64(i), recordKey("billing"), v); err != nil {
				t.Fatalf("%s: record %d: %v", name, i, err)
			}
		}
		e := r.eps["billing"]
		if e == nil || e.spec.URL != "https://c.example.com/" || e.secret != "whsec_a" || r.grp.revs["billing"] != 2 {
			t.Fatalf("%s: holds %+v at revision %d; want the replacement at revision 2", name, e, r.grp.revs["billing"])
		}
		// A change made on top of revision 2 applies on either.
		next := rec(&change{op: opDelete, rev: 3, prev: 2})
		if err := r.ApplyRecord(99, recordKey("billing"), next); err != nil || r.eps["billing"] != nil {
			t.Fatalf("%s: the deletion on top: %v, still %+v", name, err, r.eps["billing"])
		}
	}
}

// newMember returns a group registry with its own sink and no stores.
func newMember(t *testing.T, key []byte) *Registry {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	limits, _ := outbox.NewRateLimits(nil)
	r, err := NewGroup(GroupConfig{Sink: sink, Limits: limits, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
