package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outboxd/outbox/internal/testkit"
)

// screenshotsEnv names the directory the console test writes its
// screenshots to (docs/console in this repository); unset, it writes none.
const screenshotsEnv = "OUTBOXD_UI_SCREENSHOTS"

// Must show 1 of the console with the real binary and a real Chromium: log
// in with the token; find an event posted through the API by its key and
// read its attempt timeline; replay it once dead and see it delivered;
// enable the endpoint a 410 disabled. One browser for the whole test.
func TestConsoleInBrowser(t *testing.T) {
	const token = "console-e2e-token"
	var broken atomic.Bool
	broken.Store(true)
	shop := newReceiver(t, func(r *http.Request, id string) int {
		if id == "order-42" && broken.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	var gone atomic.Bool
	gone.Store(true)
	legacy := newReceiver(t, func(r *http.Request, id string) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusNoContent
	})
	p := start(t, t.TempDir(), "--token", token,
		"--endpoint", shop.endpoint("shop"), "--endpoint", legacy.endpoint("legacy"),
		"--interval", "50ms", "--backoff-initial", "50ms", "--backoff-max", "100ms", "--max-attempts", "3")
	post := func(body string) {
		t.Helper()
		if code, m := call(t, "POST", p.url("/v1/events"), token, body); code != http.StatusAccepted {
			t.Fatalf("POST /v1/events: %d %v", code, m)
		}
	}
	post(`[{"id":"order-41","destination":"shop","key":"customer-6","payload":{"total":12}},
		{"id":"order-42","destination":"shop","key":"customer-7","payload":{"total":42,"items":["tea","cups"]}},
		{"id":"order-43","destination":"shop","key":"customer-8","payload":{"total":3}}]`)
	testkit.WaitFor(t, 30*time.Second, "order-42 to be dead", func() bool {
		_, m := call(t, "GET", p.url("/v1/events/order-42"), token, "")
		return m["state"] == "dead"
	})
	post(`[{"id":"signup-1","destination":"legacy","key":"user-1","payload":{"email":"a@example.com"}}]`)
	testkit.WaitFor(t, 30*time.Second, "the legacy endpoint to be disabled", func() bool {
		ep := endpointOf(t, p, token, "legacy")
		return ep != nil && ep["disabled"] == true
	})

	ctx, cancel := context.WithTimeout(testkit.Browser(t, 1366, 768), 2*time.Minute)
	defer cancel()
	shots := os.Getenv(screenshotsEnv)
	step := func(what string, acts ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, acts...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		for _, size := range []struct {
			suffix string
			w, h   int64
			mobile bool
		}{{"laptop", 1366, 768, false}, {"phone", 390, 844, true}} {
			var png []byte
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if size.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			step("screenshot "+name, chromedp.EmulateViewport(size.w, size.h, opts...), chromedp.CaptureScreenshot(&png))
			if err := os.WriteFile(filepath.Join(shots, name+"-"+size.suffix+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		step("back to the laptop size", chromedp.EmulateViewport(1366, 768, chromedp.EmulateScale(1)))
	}
	ui := p.url("/ui/")
	var text string

	step("open the console: only the login form", chromedp.Navigate(ui), chromedp.WaitVisible(`#token`, chromedp.ByID))
	shot("login")
	step("log in with the token",
		chromedp.SendKeys(`#token`, token, chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#dead`, chromedp.ByID), chromedp.Text(`#dead`, &text, chromedp.ByID))
	if text != "1" {
		t.Errorf("overview shows %q dead, want 1", text)
	}
	shot("overview")

	step("find the event by its key on the events page",
		chromedp.Navigate(p.url("/ui/events")), chromedp.WaitVisible(`select[name=state]`, chromedp.ByQuery),
		chromedp.SetValue(`select[name=state]`, "dead", chromedp.ByQuery),
		chromedp.SendKeys(`input[name=key]`, "customer-7", chromedp.ByQuery),
		chromedp.Submit(`input[name=key]`, chromedp.ByQuery),
		// The unfiltered page has rows too: wait for the page the form
		// loads, which echoes the key into the field's value attribute
		// (typing sets only the property), before reading its rows.
		chromedp.WaitVisible(`input[name=key][value="customer-7"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`a.id`, chromedp.ByQuery), chromedp.Text(`tbody`, &text, chromedp.ByQuery))
	if !strings.Contains(text, "order-42") || strings.Contains(text, "order-41") {
		t.Errorf("events filtered by key customer-7 show:\n%s", text)
	}
	shot("events")
	step("open it and read its attempt timeline",
		chromedp.Click(`a.id`, chromedp.ByQuery), chromedp.WaitVisible(`#timeline`, chromedp.ByID),
		chromedp.Text(`#timeline`, &text, chromedp.ByID))
	if n := strings.Count(text, "500 → retry"); n != 3 {
		t.Errorf("timeline shows %d attempts answered 500, want 3 (--max-attempts):\n%s", n, text)
	}
	step("read its history", chromedp.Text(`#history`, &text, chromedp.ByID))
	if !strings.Contains(text, "enqueued") || !strings.Contains(text, "dead letter") {
		t.Errorf("history does not tell the event's story:\n%s", text)
	}
	shot("event")

	step("see it among the dead letters",
		chromedp.Navigate(p.url("/ui/dead")), chromedp.WaitVisible(`tbody a.id`, chromedp.ByQuery))
	shot("dead")

	broken.Store(false)
	step("replay it, confirming",
		chromedp.Navigate(p.url("/ui/event?id=order-42")), chromedp.Click(`#replay`, chromedp.ByID),
		chromedp.WaitVisible(`#confirm`, chromedp.ByID))
	shot("confirm")
	step("confirm", chromedp.Click(`#confirm`, chromedp.ByID), chromedp.WaitVisible(`.notice`, chromedp.ByQuery))
	testkit.WaitFor(t, 30*time.Second, "order-42 to be delivered after the replay", func() bool {
		return shop.ackedCount("order-42") == 1
	})
	testkit.WaitFor(t, 30*time.Second, "the event page to show it delivered", func() bool {
		step("reload the event", chromedp.Navigate(p.url("/ui/event?id=order-42")),
			chromedp.Text(`#event-state`, &text, chromedp.ByID))
		return text == "delivered"
	})

	gone.Store(false)
	step("see the endpoint disabled",
		chromedp.Navigate(p.url("/ui/endpoints")), chromedp.WaitVisible(`#ep-legacy`, chromedp.ByID),
		chromedp.Text(`#ep-legacy .ep-state`, &text, chromedp.ByQuery))
	if !strings.Contains(text, "disabled") {
		t.Errorf("legacy's state shows %q, want disabled", text)
	}
	shot("endpoints")
	step("enable it, confirming",
		chromedp.Click(`#ep-legacy button.enable`, chromedp.ByQuery), chromedp.WaitVisible(`#confirm`, chromedp.ByID),
		chromedp.Click(`#confirm`, chromedp.ByID), chromedp.WaitVisible(`.notice`, chromedp.ByQuery),
		chromedp.Text(`#ep-legacy .ep-state`, &text, chromedp.ByQuery))
	if strings.Contains(text, "disabled") {
		t.Errorf("legacy's state after enabling shows %q", text)
	}
	testkit.WaitFor(t, 30*time.Second, "signup-1 to be delivered after enabling", func() bool {
		return legacy.ackedCount("signup-1") == 1
	})
}

// endpointOf returns the endpoint of GET /v1/endpoints with that name,
// sending token when it is not empty.
func endpointOf(t *testing.T, p *proc, token, name string) map[string]any {
	t.Helper()
	code, body := call(t, "GET", p.url("/v1/endpoints"), token, "")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/endpoints: %d %v", code, body)
	}
	eps, _ := body["endpoints"].([]any)
	for _, e := range eps {
		if m, _ := e.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

// With a token, the console answers only the login form without a session;
// with --ui=false it is not served at all.
func TestConsoleLoginOnlyAndOff(t *testing.T) {
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) *http.Response {
		t.Helper()
		resp, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	p := start(t, t.TempDir(), "--token", "console-login-token")
	for _, path := range []string{"/ui/", "/ui/events", "/ui/dead", "/ui/endpoints", "/ui/event?id=x"} {
		if resp := get(p.url(path)); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s: %d to %q, want 303 to /ui/login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp := get(p.url("/ui/login")); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/login: %d", resp.StatusCode)
	}
	off := start(t, t.TempDir(), "--ui=false")
	if resp := get(off.url("/ui/")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("--ui=false: GET /ui/: %d, want 404", resp.StatusCode)
	}
}
