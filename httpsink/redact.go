package httpsink

import (
	"net/url"
	"strings"
)

// redacted replaces secrets in URLs.
const redacted = "xxxxx"

// RedactURL returns rawURL fit for errors and logs: the user information
// (user name and password: either may be a token) and every query value are
// replaced by "xxxxx", and the fragment is dropped. Text that does not parse as
// a URL but may hold credentials is reduced to a placeholder; any other text
// is returned as is (an endpoint name, for instance), cut to 200 bytes.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		if strings.ContainsAny(rawURL, "@?#") || strings.Contains(rawURL, "://") {
			return "<unparseable URL>"
		}
		return clip(rawURL, 200)
	}
	return redactURL(u)
}

func redactURL(u *url.URL) string {
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return clip(u.String(), 2048)
	}
	r := *u
	if r.User != nil {
		r.User = url.User(redacted)
	}
	if r.RawQuery != "" {
		q := r.Query()
		for k, vs := range q {
			for i := range vs {
				vs[i] = redacted
			}
			q[k] = vs
		}
		r.RawQuery = q.Encode()
	}
	r.Fragment, r.RawFragment = "", ""
	return clip(r.String(), 2048)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
