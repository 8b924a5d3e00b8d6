package httpsink

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// parseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// either delay-seconds ("120") or an HTTP-date ("Wed, 21 Oct 2015 07:28:00
// GMT", and the obsolete forms). It returns the wait from now, capped at max,
// and false when the value is missing, malformed, or not in the future.
func parseRetryAfter(v string, now time.Time, max time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(max/time.Second) {
			// Too many digits to parse means a very long wait: cap it.
			return max, max > 0
		}
		d := time.Duration(secs) * time.Second
		return d, d > 0
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return min(d, max), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
