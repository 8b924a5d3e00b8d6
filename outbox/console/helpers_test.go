package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// env is an outbox on a file in a temp dir delivering to a loopback
// receiver, with the console served on loopback at /ui/.
type env struct {
	o    *outbox.Outbox
	rcv  *testkit.Receiver
	c    *console.Console
	srv  *httptest.Server
	base string // srv.URL + "/ui"
}

// newEnv starts an outbox with one endpoint, "hooks", answered by respond
// (204 when nil), and serves its console with cfg.
func newEnv(t *testing.T, cfg console.Config, respond testkit.Answer) *env {
	t.Helper()
	return newEnvWith(t, cfg, respond, nil)
}

// newEnvWith is newEnv with subscriptions: each subscription's endpoint
// other than "hooks" is an endpoint of its own, answered by the same
// receiver at the path "/" + its name.
func newEnvWith(t *testing.T, cfg console.Config, respond testkit.Answer, subs []outbox.Subscription) *env {
	t.Helper()
	return newEnvRetaining(t, cfg, respond, subs, 0)
}

// newEnvRetaining is newEnvWith whose outbox keeps delivered events for
// retain (outbox.Config.Retain; 0 keeps none).
func newEnvRetaining(t *testing.T, cfg console.Config, respond testkit.Answer, subs []outbox.Subscription, retain time.Duration) *env {
	t.Helper()
	rcv := testkit.NewReceiver(t, "webhook-id", respond)
	eps := []httpsink.Endpoint{{
		Name: "hooks", URL: rcv.URL, AllowPrivate: true, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
	}}
	for _, s := range subs {
		if s.Endpoint != "hooks" {
			eps = append(eps, httpsink.Endpoint{Name: s.Endpoint, URL: rcv.URL + "/" + s.Endpoint, AllowPrivate: true})
		}
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink: sink, Interval: 20 * time.Millisecond, BackoffInitial: 20 * time.Millisecond,
		BackoffMax: 100 * time.Millisecond, MaxAttempts: 2, NoSync: true, Subscriptions: subs, Retain: retain,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := console.New(o, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		c.Close()
		if err := o.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		sink.Close()
	})
	return &env{o: o, rcv: rcv, c: c, srv: srv, base: srv.URL + "/ui"}
}

// client is a browser-like HTTP client: it keeps cookies and does not
// follow redirects.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request and returns the status and body.
func do(t *testing.T, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrfOf returns the CSRF token of a rendered page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

// login logs c in with token and returns the CSRF token of its session.
func login(t *testing.T, e *env, c *http.Client, token string) string {
	t.Helper()
	resp, _ := do(t, c, http.MethodPost, e.base+"/login", url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	_, page := do(t, c, http.MethodGet, e.base+"/endpoints", nil)
	return csrfOf(t, page)
}

// confirmAction posts the action f to e's console and then confirms it:
// the first step must answer the confirmation page holding want, the
// confirmed one a redirect to the result.
func confirmAction(t *testing.T, e *env, c *http.Client, f url.Values, want string) {
	t.Helper()
	resp, body := do(t, c, http.MethodPost, e.base+"/action", f)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("%s, first step: %d, want the confirmation holding %q:\n%s", f.Get("do"), resp.StatusCode, want, body)
	}
	f.Set("confirm", "yes")
	if resp, body = do(t, c, http.MethodPost, e.base+"/action", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("%s confirmed: %d:\n%s", f.Get("do"), resp.StatusCode, body)
	}
}
