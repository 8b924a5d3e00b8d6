package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheckExitsByTheAnswer(t *testing.T) {
	alive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer alive.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	for _, c := range []struct {
		name   string
		args   []string
		listen string
		code   int
		stderr string
	}{
		{"alive by --url", []string{"--url", alive.URL + "/healthz"}, "", exitOK, ""},
		{"alive by OUTBOXD_LISTEN", nil, strings.TrimPrefix(alive.URL, "http://"), exitOK, ""},
		{"answers 503", []string{"--url", failing.URL + "/healthz"}, "", exitError, "503"},
		{"not running", []string{"--url", gone.URL + "/healthz"}, "", exitError, "connection refused"},
		{"stray argument", []string{"now"}, "", exitUsage, `unexpected argument "now"`},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(Env{
			Args: append([]string{"healthcheck"}, c.args...),
			Getenv: func(k string) (string, bool) {
				if k == "OUTBOXD_LISTEN" && c.listen != "" {
					return c.listen, true
				}
				return "", false
			},
			Stdout: &stdout, Stderr: &stderr,
		})
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d mentioning %q", c.name, code, stderr.String(), c.code, c.stderr)
		}
	}
}

func TestHealthzURLReachesAWildcardListenerOnLoopback(t *testing.T) {
	for addr, want := range map[string]string{
		"":               "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		":9000":          "http://127.0.0.1:9000/healthz",
		"[::]:8080":      "http://127.0.0.1:8080/healthz",
		"10.0.0.7:8080":  "http://10.0.0.7:8080/healthz",
		"[::1]:8080":     "http://[::1]:8080/healthz",
		"localhost:8080": "http://localhost:8080/healthz",
	} {
		if got := healthzURL(addr); got != want {
			t.Errorf("healthzURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
