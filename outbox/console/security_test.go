package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

const token = "s3cret-token-for-tests"

// Without a session, every page sends to the login form and every action
// is refused; a wrong token gets no session.
func TestTokenShowsOnlyLogin(t *testing.T) {
	e := newEnv(t, console.Config{Token: token}, nil)
	c := client(t)
	for _, p := range []string{"/", "/events", "/event?id=x", "/dead", "/history", "/endpoints", "/partitions", "/nope"} {
		resp, body := do(t, c, http.MethodGet, e.base+p, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s: status %d, Location %q, want 303 to /ui/login; body:\n%s", p, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	resp, body := do(t, c, http.MethodGet, e.base+"/login", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="token"`) || strings.Contains(body, "Dead letters") {
		t.Errorf("GET /login: status %d, want 200 with the login form and no navigation:\n%s", resp.StatusCode, body)
	}
	resp, body = do(t, c, http.MethodPost, e.base+"/action", url.Values{"do": {"delete"}, "id": {"x"}, "confirm": {"yes"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `name="token"`) {
		t.Errorf("POST /action without a session: status %d, want 403 with the login form", resp.StatusCode)
	}
	resp, _ = do(t, c, http.MethodPost, e.base+"/login", url.Values{"token": {"wrong"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: status %d, cookies %v; want 401 and none", resp.StatusCode, resp.Cookies())
	}
	resp, _ = do(t, c, http.MethodPost, e.base+"/login", url.Values{"token": {token}})
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "outbox_console_session" {
			session = ck
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("right token: status %d, cookies %v; want 303 and a session", resp.StatusCode, resp.Cookies())
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" || session.MaxAge <= 0 || len(session.Value) < 40 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, an expiry and a long random value", session)
	}
	resp, body = do(t, c, http.MethodGet, e.base+"/", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Dead letters") {
		t.Errorf("overview after login: status %d:\n%s", resp.StatusCode, body)
	}
	if strings.Contains(body, token) {
		t.Error("a page shows the token")
	}
}

// An action is done only with the CSRF token of the session that posts it,
// and only after its confirmation step.
func TestActionsNeedTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t, console.Config{Token: token}, nil)
	ids, err := e.o.Enqueue(t.Context(), outbox.Event{ID: "ev-1", Destination: "hooks", Payload: []byte("{}"), DeliverAt: farAhead()})
	if err != nil {
		t.Fatal(err)
	}
	alice, mallory := client(t), client(t)
	aliceCSRF := login(t, e, alice, token)
	malloryCSRF := login(t, e, mallory, token)
	if aliceCSRF == malloryCSRF {
		t.Fatal("two sessions got the same CSRF token")
	}
	del := func(c *http.Client, csrf string) (int, string) {
		f := url.Values{"do": {"delete"}, "id": {ids[0]}, "confirm": {"yes"}}
		if csrf != "" {
			f.Set("csrf", csrf)
		}
		resp, body := do(t, c, http.MethodPost, e.base+"/action", f)
		return resp.StatusCode, body
	}
	for name, tc := range map[string]struct {
		c    *http.Client
		csrf string
	}{"no token": {alice, ""}, "another session's token": {alice, malloryCSRF}, "a made-up token": {alice, strings.Repeat("ab", 32)}} {
		if code, body := del(tc.c, tc.csrf); code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403:\n%s", name, code, body)
		}
	}
	if _, err := e.o.Get(t.Context(), ids[0]); err != nil {
		t.Fatalf("the event is gone after refused deletes: %v", err)
	}
	// Without confirm=yes, the right token gets the confirmation step.
	resp, body := do(t, alice, http.MethodPost, e.base+"/action", url.Values{"do": {"delete"}, "id": {ids[0]}, "csrf": {aliceCSRF}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("first step: status %d, want 200 with a confirmation:\n%s", resp.StatusCode, body)
	}
	if code, body := del(alice, aliceCSRF); code != http.StatusSeeOther {
		t.Fatalf("confirmed delete: status %d, want 303:\n%s", code, body)
	}
	if ev, err := e.o.Get(t.Context(), ids[0]); err != nil || ev.State != outbox.StateDeleted {
		t.Fatalf("after the delete: %v, %v; want StateDeleted", ev.State, err)
	}
	// Logging out ends the session: its CSRF token is refused from then on.
	do(t, alice, http.MethodPost, e.base+"/logout", url.Values{"csrf": {aliceCSRF}})
	if code, _ := del(alice, aliceCSRF); code != http.StatusForbidden {
		t.Errorf("after logout: status %d, want 403", code)
	}
}

// Without a token there is no login, but actions still need the CSRF token
// bound to the browser's cookie.
func TestNoTokenStillNeedsCSRF(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	a, b := client(t), client(t)
	_, pa := do(t, a, http.MethodGet, e.base+"/endpoints", nil)
	_, pb := do(t, b, http.MethodGet, e.base+"/endpoints", nil)
	ta, tb := csrfOf(t, pa), csrfOf(t, pb)
	if ta == tb {
		t.Fatal("two browsers got the same CSRF token")
	}
	f := url.Values{"do": {"enable"}, "name": {"hooks"}}
	resp, _ := do(t, a, http.MethodPost, e.base+"/action", f)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("no CSRF token: status %d, want 403", resp.StatusCode)
	}
	f.Set("csrf", tb)
	resp, _ = do(t, a, http.MethodPost, e.base+"/action", f)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another browser's CSRF token: status %d, want 403", resp.StatusCode)
	}
	f.Set("csrf", ta)
	resp, body := do(t, a, http.MethodPost, e.base+"/action", f)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Enable endpoint") {
		t.Errorf("own CSRF token: status %d, want the confirmation:\n%s", resp.StatusCode, body)
	}
}

// Every answer, static files and errors included, carries the security
// headers.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	c := client(t)
	for _, p := range []string{"/", "/events", "/static/console.css", "/nope", "/event?id=missing"} {
		resp, _ := do(t, c, http.MethodGet, e.base+p, nil)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", p, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: CSP allows inline code: %q", p, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", p, h)
		}
	}
}

// Filters that do not parse are refused naming the field.
func TestBadFilterNamesTheField(t *testing.T) {
	e := newEnv(t, console.Config{}, nil)
	c := client(t)
	for q, field := range map[string]string{"state=delivered": "state:", "from=yesterday": "from:", "to=2026-13-01": "to:"} {
		resp, body := do(t, c, http.MethodGet, e.base+"/events?"+q, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, field) {
			t.Errorf("GET /events?%s: status %d, want 400 naming %q:\n%s", q, resp.StatusCode, field, body)
		}
	}
}
