package httpapi

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// A key given twice, without regard to case, is refused however many keys
// come between, as bytes.EqualFold matches them (the Kelvin sign is a k).
func TestDuplicateKeysAmongManyAreRefused(t *testing.T) {
	for _, tc := range []struct {
		first, again string
		at           int
	}{
		{"X-Tenant", "x-tenant", 3},
		{"X-Tenant", "X-TENANT", 500},
		{"kind", "\u212aind", 40},
		{"straße", "STRASSE", -1}, // not a simple fold: two keys
		{"ſ", "S", 30},
	} {
		var body strings.Builder
		body.WriteString(`{`)
		for i := range 600 {
			switch i {
			case 0:
				fmt.Fprintf(&body, `%q: 1,`, tc.first)
			case tc.at:
				fmt.Fprintf(&body, `%q: 1,`, tc.again)
			}
			fmt.Fprintf(&body, `"k%d": 1,`, i)
		}
		if tc.at < 0 {
			fmt.Fprintf(&body, `%q: 1,`, tc.again)
		}
		body.WriteString(`"last": 1}`)
		err := checkRaw([]byte(body.String()), -1, "", "")
		if tc.at < 0 {
			if err != nil {
				t.Errorf("%q and %q: %v; want two keys", tc.first, tc.again, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Errorf("%q then %q after %d keys: %v; want a duplicate key", tc.first, tc.again, tc.at, err)
		}
	}
}

// foldKey agrees with bytes.EqualFold on pairs of keys.
func FuzzFoldKeyAgreesWithEqualFold(f *testing.F) {
	for _, p := range [][2]string{{"a", "A"}, {"k", "\u212a"}, {"ſ", "s"}, {"Σ", "ς"}, {"ß", "ss"}, {"x-a", "X-B"}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		if got, want := foldKey([]byte(a)) == foldKey([]byte(b)), bytes.EqualFold([]byte(a), []byte(b)); got != want {
			t.Fatalf("%q, %q: folded forms equal %v, EqualFold %v", a, b, got, want)
		}
	})
}
