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
