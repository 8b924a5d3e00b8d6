package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/authguard"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// TestWrongTokensPastTheBoundAreNotCompared: while an address has as many
// wrong tokens held back as it may, its next request is answered at once,
// 401 with Retry-After, whatever its token (so a flood of connections
// learns nothing faster); the held ones end with their clients.
func TestWrongTokensPastTheBoundAreNotCompared(t *testing.T) {
	g := authguard.New(authguard.Config{BaseDelay: time.Minute, MaxDelay: time.Minute})
	e := newEnv(t, httpapi.Config{Token: "the-right-token-0123", Guard: g}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.api.URL+"/v1/stats", nil)
			req.Header.Set("Authorization", "Bearer a-wrong-token")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("a held wrong token was answered %d before its delay", resp.StatusCode)
			}
		})
	}
	testkit.WaitFor(t, 10*time.Second, "eight wrong tokens held back", func() bool { return g.Waiting() == 8 })
	for _, tok := range []string{"another-wrong-token", "the-right-token-0123"} {
		code, m := e.do(t, http.MethodGet, "/v1/stats", "", nil, "Authorization", "Bearer "+tok)
		if code != http.StatusUnauthorized || m["error"] != "too many wrong tokens from this address: try again in a few seconds" {
			t.Errorf("token %q past the bound: %d %v, want 401 saying to try again", tok, code, m)
		}
	}
	if g.Failures() != 8 {
		t.Errorf("Failures = %d, want 8 (the tokens past the bound are not compared)", g.Failures())
	}
	cancel()
	wg.Wait()
	testkit.WaitFor(t, 10*time.Second, "the held requests to end", func() bool { return g.Waiting() == 0 })
	if code, _ := e.do(t, http.MethodGet, "/v1/stats", "", nil, "Authorization", "Bearer the-right-token-0123"); code != http.StatusOK {
		t.Errorf("the right token once nothing is held: %d, want 200", code)
	}
}

// TestProtectAsksForTheToken: a handler behind Protect answers only with
// the token; without a token configured it is served as it is.
func TestProtectAsksForTheToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := httpapi.Protect(ok, httpapi.Config{Token: "the-right-token-0123", Guard: authguard.New(authguard.Config{BaseDelay: time.Millisecond})})
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"Bearer the-right-token-0123", http.StatusTeapot},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = "192.0.2.1:4000"
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want || (tc.want == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "") {
			t.Errorf("Authorization %q: %d, want %d (with WWW-Authenticate on 401)", tc.auth, w.Code, tc.want)
		}
	}
	w := httptest.NewRecorder()
	httpapi.Protect(ok, httpapi.Config{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusTeapot {
		t.Errorf("without a token configured: %d, want the handler's answer", w.Code)
	}
}
