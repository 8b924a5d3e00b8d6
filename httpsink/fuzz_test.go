package httpsink

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseRetryAfter: the Retry-After header comes from the network. Any
// value gives a wait in [0, max], never a panic; a valid wait is positive.
func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range []string{"120", "0", "-1", "1.5", "", " 30 ", "99999999999999999999999",
		now.Add(time.Minute).Format(http.TimeFormat), "Friday, 02-Jan-26 03:05:05 GMT", "Fri Jan  2 03:05:05 2026", "soon"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		const max = time.Hour
		d, ok := parseRetryAfter(v, now, max)
		if d < 0 || d > max || ok != (d > 0) {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

// FuzzParsePolicy: rules come from configuration files. Any rule parses or
// gives a *PolicyError; a parsed table round-trips through Rules.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"404=retry", "4xx=dead", "429=throttle", "default=park", "error=throttle", "=", "6xx=dead", "404=success,500=dead"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(strings.Split(s, ",")...)
		if err != nil {
			if _, ok := err.(*PolicyError); !ok {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		q, err := ParsePolicy(p.Rules()...)
		if err != nil || q != p {
			t.Fatalf("round trip of %q: %v", s, err)
		}
		for _, code := range []int{0, 100, 200, 404, 999, 1000} {
			if a := p.Action(code); a < 1 || a > 6 {
				t.Fatalf("Action(%d) = %d", code, a)
			}
		}
	})
}

// FuzzRedactURL: destinations come from producers. The user information and
// query values never survive redaction.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://user:pass@example.com/p?token=abc#x", "http://tok@h/", "billing", "http://%zz", "https://h/?a=b&a=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := RedactURL(s)
		if !utf8.ValidString(r) && utf8.ValidString(s) {
			t.Fatalf("RedactURL(%q) = %q: invalid UTF-8", s, r)
		}
		u, err := parseHTTPURL(s)
		if err != nil {
			return
		}
		// The user information is replaced whole. (Looking for the password
		// in the result would also find it where the host happens to spell
		// it: "http://:pass@pass".)
		if u.User != nil {
			if ru, err := url.Parse(r); err == nil && ru.User != nil && ru.User.String() != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the user information", s, r)
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) > 5 && !strings.Contains(redacted, v) && strings.Contains(r, "="+v) {
					t.Fatalf("RedactURL(%q) = %q keeps query value %q", s, r, v)
				}
			}
		}
	})
}
