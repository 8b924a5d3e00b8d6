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
			"a": {URL: "https://a.internal/hooks", Topics: []string{"gh.*"}},
			"b": {URL: "https://b.internal/hooks", Topics: []string{"gh.push"}},
			"c": {URL: "https://c.internal/hooks", Topics: []string{"gh.issues"}},
		},
		Sources: map[string]*Source{"gh": {Scheme: SchemeGitHub, Secrets: []string{"s"}}},
	}
	if err := cfg.prepare(func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	sink, err := newSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	box, err := outbox.Open(cfg.DB, outbox.Config{Sink: sink, Subscriptions: subscriptions(cfg)})
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

	// One event on the topic gh.push, with one delivery to each target
	// subscribed to it (a and b, not c), carrying the provider's body and
	// what the targets need to know; nothing else was stored.
	events, _, err := box.List(context.Background(), outbox.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Fatalf("%d deliveries stored, want 2: %+v", len(events), events)
	}
	for i, target := range []string{"a", "b"} {
		ev := events[i]
		if ev.ID != "gh:d-1" || ev.Topic != "gh.push" || ev.Endpoint != target || string(ev.Payload) != `{"n":1}` {
			t.Errorf("delivery %d: %s on %s to %s with %s", i, ev.ID, ev.Topic, ev.Endpoint, ev.Payload)
		}
		if ev.Headers["X-Relay-Source"] != "gh" || ev.Headers["X-Relay-Delivery"] != "d-1" || ev.Headers["X-Relay-Event-Type"] != "push" ||
			ev.Headers["X-Relay-Topic"] != "gh.push" {
			t.Errorf("delivery %d headers: %v", i, ev.Headers)
		}
	}
}

// A provider's event type becomes the second part of the topic, with what
// a topic cannot hold replaced.
func TestTopicOf(t *testing.T) {
	for _, c := range []struct{ source, typ, want string }{
		{"stripe", "invoice.paid", "stripe.invoice.paid"},
		{"github", "pull_request", "github.pull_request"},
		{"acme", "", "acme.untyped"},
		{"acme", "a..b", "acme.a._.b"},
		{"acme", "user created/v2", "acme.user_created_v2"},
		{"acme", ".x.", "acme._.x._"},
	} {
		got := topicOf(c.source, c.typ)
		if got != c.want || outbox.ValidateTopic(got) != nil {
			t.Errorf("topicOf(%q, %q) = %q (valid: %v), want %q", c.source, c.typ, got, outbox.ValidateTopic(got), c.want)
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
