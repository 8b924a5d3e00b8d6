package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/examples/internal/console"
	"github.com/outboxd/outbox/outbox"
)

// newTestRelay is the relay's handler over an outbox that is not started
// (what is stored stays pending, for the test to look at).
func newTestRelay(t *testing.T, maxBody int) (http.Handler, *outbox.Outbox) {
	t.Helper()
	cfg := &Config{
		MaxBody: maxBody,
		DB:      filepath.Join(t.TempDir(), "relay.db"),
		Targets: map[string]*Target{
			"a": {URL: "https://a.internal/hooks"},
			"b": {URL: "https://b.internal/hooks"},
		},
		Sources: map[string]*Source{"gh": {Scheme: SchemeGitHub, Secrets: []string{"s"}, Targets: []string{"a", "b"}}},
	}
	if err := cfg.prepare(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	sink, err := newSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	box, err := outbox.Open(cfg.DB, outbox.Config{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Stop(context.Background()) })
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{source}", &relay{cfg: cfg, box: box, out: console.New(io.Discard), now: time.Now})
	return mux, box
}

func TestRelayAnswers(t *testing.T) {
	h, box := newTestRelay(t, 64)
	post := func(source, delivery, body string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/"+source, strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hexMAC([]byte("s"), body))
		if delivery != "" {
			req.Header.Set("X-GitHub-Delivery", delivery)
		}
		req.Header.Set("X-GitHub-Event", "push")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	cases := []struct {
		what, source, delivery, body string
		status                       int
		mentions                     string
	}{
		{"stored", "gh", "d-1", `{"n":1}`, http.StatusAccepted, `"stored"`},
		{"redelivered", "gh", "d-1", `{"n":1}`, http.StatusOK, `"duplicate"`},
		{"same ID, other body", "gh", "d-1", `{"n":2}`, http.StatusConflict, "another body"},
		{"unknown source", "stripe", "d-2", `{}`, http.StatusNotFound, "unknown source"},
		{"too large", "gh", "d-3", strings.Repeat("x", 65), http.StatusRequestEntityTooLarge, "too large"},
		{"no delivery ID", "gh", "", `{}`, http.StatusBadRequest, "no delivery ID"},
		{"delivery ID too long", "gh", strings.Repeat("d", maxDeliveryID+1), `{}`, http.StatusBadRequest, "too long"},
	}
	for _, c := range cases {
		code, body := post(c.source, c.delivery, c.body)
		if code != c.status || !strings.Contains(body, c.mentions) {
			t.Errorf("%s: %d %s; want %d mentioning %s", c.what, code, strings.TrimSpace(body), c.status, c.mentions)
		}
	}

	// One event per target, carrying the provider's body and what the
	// targets need to know; nothing else was stored.
	events, _, err := box.List(context.Background(), outbox.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Fatalf("%d events stored, want 2: %+v", len(events), events)
	}
	for i, target := range []string{"a", "b"} {
		ev := events[i]
		if ev.ID != "gh:d-1:"+target || ev.Destination != target || string(ev.Payload) != `{"n":1}` {
			t.Errorf("event %d: %s to %s with %s", i, ev.ID, ev.Destination, ev.Payload)
		}
		if ev.Headers["X-Relay-Source"] != "gh" || ev.Headers["X-Relay-Delivery"] != "d-1" || ev.Headers["X-Relay-Event-Type"] != "push" {
			t.Errorf("event %d headers: %v", i, ev.Headers)
		}
	}
}

func TestRelayUnavailableOnceStopped(t *testing.T) {
	h, box := newTestRelay(t, 1<<10)
	if err := box.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	body := `{"n":1}`
	req := httptest.NewRequest(http.MethodPost, "/hooks/gh", strings.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hexMAC([]byte("s"), body))
	req.Header.Set("X-GitHub-Delivery", "d-9")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("after stop: %d %s; want 503 so that the provider retries", rec.Code, rec.Body)
	}
}
