package managed

import (
	"reflect"
	"testing"
	"time"
)

// FuzzDecode: decode never panics on the bytes of a damaged file, and what
// it accepts encodes back to a value that decodes to the same endpoint.
// The seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	f.Add(encode(&endpoint{name: "billing", spec: spec{URL: "https://example.com/hook", Topics: []string{"order.*"},
		Filter: map[string]string{"X-Region": "eu"}, Headers: map[string]string{"X-Team": "billing"},
		Timeout: 10 * time.Second, MaxInFlight: 4, Rate: 50, Burst: 5},
		managed: true, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", createdAt: at, updatedAt: at,
		retiring: []retiring{{Secret: "whsec_c2VjcmV0LXR3by0zMi1ieXRlcy1sb25nLXh5eno=", Until: at.Add(time.Hour)}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode("x", b)
		if err != nil {
			return
		}
		again, err := decode("x", encode(e))
		if err != nil {
			t.Fatalf("an accepted value does not decode after encoding: %v", err)
		}
		if !reflect.DeepEqual(normalized(e), normalized(again)) {
			t.Fatalf("decode(encode(e)) = %+v, want %+v", again, e)
		}
	})
}

// normalized returns e with its times in UTC and empty collections nil, as
// an encoding round trip gives them.
func normalized(e *endpoint) endpoint {
	c := *e
	c.spec = normalize(c.spec)
	c.createdAt, c.updatedAt = c.createdAt.UTC(), c.updatedAt.UTC()
	if len(c.retiring) == 0 {
		c.retiring = nil
	}
	for i := range c.retiring {
		c.retiring[i].Until = c.retiring[i].Until.UTC()
	}
	return c
}

// FuzzDecodeChange: a record of the group's endpoints topic that does not
// decode is an error, never a panic; one that decodes encodes back to a
// record that decodes to the same change, secrets included.
func FuzzDecodeChange(f *testing.F) {
	s, err := newSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	ep := &endpoint{name: "billing", spec: spec{URL: "https://example.com/hook", Topics: []string{"order.*"}, Rate: 5, Burst: 2},
		managed: true, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", createdAt: at, updatedAt: at,
		retiring: []retiring{{Secret: "whsec_c2VjcmV0LXR3by0zMi1ieXRlcy1sb25nLXh5eno=", Until: at.Add(time.Hour)}}}
	f.Add([]byte("endpoint/billing"), encodeChange(&change{name: "billing", op: opPut, rev: 1, origin: "ab", ep: ep}, s))
	f.Add([]byte("endpoint/billing"), encodeChange(&change{name: "billing", op: opDelete, rev: 3, prev: 2}, s))
	f.Add([]byte("endpoint/billing"), encodeChange(&change{name: "billing", op: opPut, restate: true, rev: 2, prev: 2, ep: ep}, s))
	f.Add([]byte("endpoint/"), []byte(`{"v":1,"op":"delete","rev":1}`))
	f.Add([]byte("endpoint/x"), []byte(`{"v":1,"op":"put","rev":1,"endpoint":{"v":1,"url":"u","secret":"whsec_x"},"sealed":"AAAA"}`))
	f.Add([]byte("endpoint/x"), []byte("garbage"))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c, err := decodeChange(key, value, s)
		if err != nil {
			return
		}
		again, err := decodeChange(key, encodeChange(c, s), s)
		if c.sealErr != nil {
			return // its secrets are not known: it cannot be written again
		}
		if err != nil {
			t.Fatalf("an accepted record does not decode after encoding: %v", err)
		}
		if c.name != again.name || c.op != again.op || c.rev != again.rev || c.prev != again.prev || c.origin != again.origin || c.restate != again.restate {
			t.Fatalf("decode(encode(c)) = %+v, want %+v", again, c)
		}
		if c.ep != nil && !reflect.DeepEqual(normalized(c.ep), normalized(again.ep)) {
			t.Fatalf("endpoint %+v, want %+v", again.ep, c.ep)
		}
	})
}
