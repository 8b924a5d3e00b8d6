package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/outboxd/outbox/outbox/authguard"
)

// Cookie names. With a token the session cookie names a server-side
// session; without one the browser cookie only binds CSRF tokens.
const (
	sessionCookie = "outbox_console_session"
	browserCookie = "outbox_console_browser"
)

// newID returns 32 random bytes in base64url.
func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// csrfFor is the CSRF token bound to a session (or browser) ID.
func (c *Console) csrfFor(id string) string {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte("csrf\x00"))
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether the form's csrf value is the one bound to id.
func (c *Console) checkCSRF(r *http.Request, id string) bool {
	got := r.PostFormValue("csrf")
	want := c.csrfFor(id)
	return id != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	ck := &http.Cookie{
		Name: name, Value: value, Path: c.cfg.Path,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.cfg.Guard.Secure(r),
	}
	if value == "" {
		ck.MaxAge = -1
	} else if !expires.IsZero() {
		ck.Expires = expires
		ck.MaxAge = max(1, int(expires.Sub(c.cfg.Now()).Seconds()))
	}
	http.SetCookie(w, ck)
}

// identity returns the ID CSRF tokens are bound to: the live session's
// with a token ("" when the request has none), the browser cookie's
// without one (set now when missing, when set is true).
func (c *Console) identity(w http.ResponseWriter, r *http.Request, set bool) string {
	if c.cfg.Token != "" {
		ck, err := r.Cookie(sessionCookie)
		if err != nil {
			return ""
		}
		now := c.cfg.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		exp, ok := c.sessions[ck.Value]
		if !ok {
			return ""
		}
		if !now.Before(exp) {
			delete(c.sessions, ck.Value)
			return ""
		}
		return ck.Value
	}
	if ck, err := r.Cookie(browserCookie); err == nil && len(ck.Value) == 43 {
		return ck.Value
	}
	if !set {
		return ""
	}
	id := newID()
	c.setCookie(w, r, browserCookie, id, time.Time{})
	return id
}

// tokenOK compares a submitted token with the configured one in constant
// time (hashes of equal length, so not even the length leaks).
func (c *Console) tokenOK(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], c.tokenSum[:]) == 1
}

// newSession stores a session and returns its ID, dropping expired ones
// and, past MaxSessions, the one closest to expiry.
func (c *Console) newSession() (string, time.Time) {
	id := newID()
	now := c.cfg.Now()
	exp := now.Add(c.cfg.SessionTTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= MaxSessions {
		var oldest string
		var oldestExp time.Time
		for k, e := range c.sessions {
			if !now.Before(e) {
				delete(c.sessions, k)
				continue
			}
			if oldest == "" || e.Before(oldestExp) {
				oldest, oldestExp = k, e
			}
		}
		if len(c.sessions) >= MaxSessions {
			delete(c.sessions, oldest)
		}
	}
	c.sessions[id] = exp
	return id, exp
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Token == "" || c.identity(w, r, false) != "" {
		http.Redirect(w, r, c.cfg.Path, http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", "", pageData{Title: "Log in"})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Token == "" {
		http.Redirect(w, r, c.cfg.Path, http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.PostFormValue("token")
	switch c.cfg.Guard.Check(r, func() bool { return c.tokenOK(tok) }) {
	case authguard.Refused:
		c.render(w, r, http.StatusUnauthorized, "login", "", pageData{Title: "Log in", Error: "That token is not the right one."})
		return
	case authguard.Throttled:
		w.Header().Set("Retry-After", "1")
		c.render(w, r, http.StatusUnauthorized, "login", "", pageData{Title: "Log in", Error: "Too many wrong tokens from your address: wait a few seconds and try again."})
		return
	}
	id, exp := c.newSession()
	c.setCookie(w, r, sessionCookie, id, exp)
	http.Redirect(w, r, c.cfg.Path, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	id := c.identity(w, r, false)
	if !c.checkCSRF(r, id) {
		c.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
		return
	}
	if c.cfg.Token != "" {
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
		c.setCookie(w, r, sessionCookie, "", time.Time{})
		http.Redirect(w, r, c.base+"/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, c.cfg.Path, http.StatusSeeOther)
}
