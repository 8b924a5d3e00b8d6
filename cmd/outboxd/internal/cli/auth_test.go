package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/authguard"
	"github.com/outboxd/outbox/outbox/console"
)

const goodToken = "correct-horse-battery-staple"

// authServer serves the routes of s with goodToken, the console, and a
// Guard configured by gc logging to the returned buffer.
func authServer(t *testing.T, gc authguard.Config, tweak func(s *server)) (*server, *httptest.Server, *testkit.Buffer) {
	t.Helper()
	s := newReadyServer(t, nil)
	s.cfg.Token = goodToken
	if tweak != nil {
		tweak(s)
	}
	log := &testkit.Buffer{}
	gc.Logger = slog.New(slog.NewTextHandler(log, nil))
	s.guard = authguard.New(gc)
	if err := s.startMetrics(context.Background()); err != nil {
		t.Fatal(err)
	}
	ui, err := console.New(s.o, console.Config{Token: goodToken, Guard: s.guard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Close() })
	s.ui = ui
	srv := httptest.NewServer(s.routes(s.reg))
	t.Cleanup(srv.Close)
	return s, srv, log
}

// noRedirects is a client of one connection that shows redirects.
func noRedirects() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxConnsPerHost: 1},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func consoleLogin(t *testing.T, c *http.Client, base, tok string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func bearerGet(t *testing.T, c *http.Client, u, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestWrongTokensAreDelayedAtConsoleAndAPI: 1,000 wrong tokens from one
// address, at the console's login and at the API, are each answered no
// sooner than the delay once it reached its cap; the log has one line per
// burst (the right token ends one), naming the address and none of the
// guesses; outbox_auth_failures_total counts them.
func TestWrongTokensAreDelayedAtConsoleAndAPI(t *testing.T) {
	const maxDelay = 8 * time.Millisecond
	_, srv, log := authServer(t, authguard.Config{BaseDelay: time.Millisecond, MaxDelay: maxDelay}, nil)
	c := noRedirects()
	guess := func(i int) string { return fmt.Sprintf("guess-%04d-xyzzy", i) }
	var slowest time.Duration = 1 << 62
	for i := range 1000 {
		start := time.Now()
		if i%2 == 0 {
			if resp := consoleLogin(t, c, srv.URL, guess(i)); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("console guess %d: %d, want 401", i, resp.StatusCode)
			}
		} else if code := bearerGet(t, c, srv.URL+"/v1/stats", guess(i)); code != http.StatusUnauthorized {
			t.Fatalf("API guess %d: %d, want 401", i, code)
		}
		if i >= 990 {
			slowest = min(slowest, time.Since(start))
		}
	}
	if slowest < maxDelay {
		t.Errorf("one of the last ten wrong tokens was answered after %v, sooner than the delay %v", slowest, maxDelay)
	}

	if code := bearerGet(t, c, srv.URL+"/v1/stats", goodToken); code != http.StatusOK {
		t.Errorf("right token at the API after the guesses: %d, want 200", code)
	}
	// The right token started the address over: a new burst.
	bearerGet(t, c, srv.URL+"/v1/stats", "one-more-wrong-token")

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Errorf("%d log lines, want 2 (one per burst):\n%s", len(lines), log.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "addr=127.0.0.1") {
			t.Errorf("log line does not name the address: %s", l)
		}
	}
	for _, g := range []string{"guess-", "xyzzy", "one-more-wrong-token", goodToken} {
		if strings.Contains(log.String(), g) {
			t.Errorf("the log holds a token (%q):\n%s", g, log.String())
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+goodToken)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte("outbox_auth_failures_total 1001")) {
		t.Errorf("metrics do not count the 1,001 wrong tokens:\n%s", grepLines(body, "outbox_auth"))
	}
}

// TestRightTokenWhileThrottled: while the answer to a wrong token from an
// address is held back (for a minute), the right token from the same
// address is answered, at the console and at the API; the held request
// ends when its client goes away.
func TestRightTokenWhileThrottled(t *testing.T) {
	s, srv, _ := authServer(t, authguard.Config{BaseDelay: time.Minute, MaxDelay: time.Minute}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/stats", nil)
		req.Header.Set("Authorization", "Bearer wrong-token-held-back")
		resp, err := (&http.Client{}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		held <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the wrong token held back", func() bool { return s.guard.Waiting() == 1 })
	c := noRedirects()
	if resp := consoleLogin(t, c, srv.URL, goodToken); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Errorf("right token at the console while throttled: %d, want 303 with a session", resp.StatusCode)
	}
	if code := bearerGet(t, c, srv.URL+"/v1/stats", goodToken); code != http.StatusOK {
		t.Errorf("right token at the API while throttled: %d, want 200", code)
	}
	if s.guard.Waiting() != 1 {
		t.Error("the wrong token was answered before its delay")
	}
	cancel()
	if err := <-held; err == nil {
		t.Error("the held request was answered, want it cancelled")
	}
	testkit.WaitFor(t, 10*time.Second, "the cancelled request to stop waiting", func() bool { return s.guard.Waiting() == 0 })
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMetricsBehindTheToken: with a token, /metrics asks for it unless
// metrics_open is on.
func TestMetricsBehindTheToken(t *testing.T) {
	_, srv, _ := authServer(t, authguard.Config{BaseDelay: time.Millisecond}, nil)
	c := noRedirects()
	if code := bearerGet(t, c, srv.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", code)
	}
	if code := bearerGet(t, c, srv.URL+"/metrics", "wrong-token-for-metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", code)
	}
	if code := bearerGet(t, c, srv.URL+"/metrics", goodToken); code != http.StatusOK {
		t.Errorf("/metrics with the token: %d, want 200", code)
	}
	_, open, _ := authServer(t, authguard.Config{}, func(s *server) { s.cfg.MetricsOpen = true })
	if code := bearerGet(t, c, open.URL+"/metrics", ""); code != http.StatusOK {
		t.Errorf("/metrics without the token, metrics_open: %d, want 200", code)
	}
	if code := bearerGet(t, c, open.URL+"/v1/stats", ""); code != http.StatusUnauthorized {
		t.Errorf("/v1/stats without the token, metrics_open: %d, want 401 still", code)
	}
}

// TestSessionCookieBehindAProxy: the session cookie is Secure when a
// trusted proxy says the request came over HTTPS, not when an untrusted
// peer says so.
func TestSessionCookieBehindAProxy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted string
		secure  bool
	}{
		{"trusted proxy", "127.0.0.0/8", true},
		{"untrusted peer", "10.0.0.0/8", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, _ := authServer(t, authguard.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix(tc.trusted)}}, nil)
			resp := consoleLogin(t, noRedirects(), srv.URL, goodToken, "X-Forwarded-Proto", "https", "X-Forwarded-For", "198.51.100.7")
			var found bool
			for _, ck := range resp.Cookies() {
				if ck.Name == "outbox_console_session" {
					found = true
					if ck.Secure != tc.secure {
						t.Errorf("session cookie Secure = %v, want %v", ck.Secure, tc.secure)
					}
				}
			}
			if !found {
				t.Fatalf("login: %d without a session cookie", resp.StatusCode)
			}
			if plain := consoleLogin(t, noRedirects(), srv.URL, goodToken); plain.Cookies()[0].Secure {
				t.Error("a login without X-Forwarded-Proto got a Secure cookie")
			}
		})
	}
}

// TestTokenCommandPrintsARandomToken: outboxd token prints 32 random bytes
// in base64url, a new one each time, which serve accepts.
func TestTokenCommandPrintsARandomToken(t *testing.T) {
	var got []string
	for range 2 {
		var out, errOut bytes.Buffer
		e := Env{Args: []string{"token"}, Getenv: func(string) (string, bool) { return "", false }, Stdout: &out, Stderr: &errOut, Exit: func(int) {}}
		if code := Main(e); code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		tok := strings.TrimSuffix(out.String(), "\n")
		if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
			t.Fatalf("token %q: %d bytes, %v; want 32 in base64url", tok, len(b), err)
		}
		got = append(got, tok)
	}
	if got[0] == got[1] {
		t.Error("two runs printed the same token")
	}
}
