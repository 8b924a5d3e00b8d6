package httpsink

import (
	"net/http"
	"net/url"
	"strconv"
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

// FuzzCheckEndpoint: endpoint definitions come from the API and from
// settings files. Any definition gives nil or a *ConfigError, never a
// panic, and one accepted is within the limits: a name an URL path can
// address, at most MaxHeaders headers of at most MaxHeaderBytes, a URL of
// at most MaxURLBytes whose host is not loopback by name or number, and a
// timeout from MinTimeout to MaxTimeout (or none).
func FuzzCheckEndpoint(f *testing.F) {
	f.Add("orders", "https://example.com/hook", "X-Tenant", "t1", 3, int64(10*time.Second))
	f.Add("..", "https://example.com/", "X-A", "b", 1, int64(0))
	f.Add("orders", "http://0x7f000001/", "X-A", "b", 1, int64(0))
	f.Add("orders", "http://LOCALHOST./", "", "", 0, int64(0))
	f.Add("orders", "http://127.1:8080/", "X-A", "b", 1, int64(time.Second))
	f.Add("orders", "https://example.com/", "X-A", strings.Repeat("v", 200), 70, int64(time.Nanosecond))
	f.Add("o", "https://example.com/"+strings.Repeat("p", 3000), "Host", "x", 1, int64(100000*time.Hour))
	f.Add("orders", "https://example.com/", "X-A\r\n", "b\n", 2, int64(-1))
	s, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, name, rawURL, header, value string, headers int, timeout int64) {
		h := make(map[string]string)
		for i := range min(max(headers, 0), 2*MaxHeaders) {
			h[header+strconv.Itoa(i)] = value
		}
		e := Endpoint{Name: name, URL: rawURL, Headers: h, Timeout: time.Duration(timeout)}
		err := s.CheckEndpoint(e)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		size := 0
		for k, v := range h {
			size += len(k) + len(v)
		}
		switch {
		case name == "" || name[0] == '.':
			t.Fatalf("name %q accepted", name)
		case len(h) > MaxHeaders || size > MaxHeaderBytes:
			t.Fatalf("%d headers of %d bytes accepted", len(h), size)
		case len(rawURL) > MaxURLBytes:
			t.Fatalf("a URL of %d bytes accepted", len(rawURL))
		case e.Timeout != 0 && (e.Timeout < MinTimeout || e.Timeout > MaxTimeout):
			t.Fatalf("timeout %s accepted", e.Timeout)
		}
		u, _ := url.Parse(rawURL)
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			t.Fatalf("host %q accepted", u.Hostname())
		}
		if addr, ok := parseInetAton(host); ok && blockedReason(addr) != "" {
			t.Fatalf("host %q (%s) accepted", u.Hostname(), addr)
		}
	})
}
