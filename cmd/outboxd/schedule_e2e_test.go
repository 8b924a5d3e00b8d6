package main

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Must show 4: an event POSTed with "delay": "2s" is attempted no earlier
// than 2 s after it was enqueued (a lower bound: the receiver notes when each
// event arrives), while an event without a delay goes at once. The event is
// pending with its deliver_at meanwhile.
func TestDelayedEventIsNotAttemptedEarly(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	rc := newReceiver(t, func(_ *http.Request, id string) int {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := arrived[id]; !ok {
			arrived[id] = time.Now()
		}
		return http.StatusNoContent
	})
	p := start(t, dir, "--endpoint", rc.endpoint("orders"))

	before := time.Now()
	code, m := call(t, "POST", p.url("/v1/events"), "", `[{"id":"delayed","destination":"orders","delay":"2s"},{"id":"now","destination":"orders"}]`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	code, m = call(t, "GET", p.url("/v1/events/delayed"), "", "")
	at, err := time.Parse(time.RFC3339Nano, stringOf(m["deliver_at"]))
	if code != http.StatusOK || err != nil || at.Before(before.Add(2*time.Second)) {
		t.Fatalf("GET delayed: %d %v; want its deliver_at at least 2s after the POST began", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "both events delivered", func() bool {
		return rc.ackedCount("delayed") > 0 && rc.ackedCount("now") > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if waited := arrived["delayed"].Sub(before); waited < 2*time.Second {
		t.Errorf("the delayed event arrived %s after its POST began, want at least 2s", waited)
	}
	if n := rc.attemptCount("delayed"); n != 1 {
		t.Errorf("the delayed event was attempted %d times, want once", n)
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

// Must show 6 (scheduling): a deliver_at that does not parse or lies beyond
// the horizon (--max-schedule), delay and deliver_at together, and a bad or
// negative delay are each a 400 naming the field, and nothing is stored; a
// negative horizon stops serve naming the setting.
func TestBadScheduleOverHTTPStoresNothing(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	p := start(t, dir, "--max-schedule", "1h", "--endpoint", rc.endpoint("orders"))
	beyond := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, body, want string
	}{
		{"unparseable deliver_at", `{"id":"e1","destination":"orders","deliver_at":"next tuesday"}`, `deliver_at: "next tuesday" is not an RFC 3339 time`},
		{"deliver_at beyond the horizon", `{"id":"e2","destination":"orders","deliver_at":"` + beyond + `"}`, "deliver_at: " + beyond + " is more than 1h0m0s ahead"},
		{"delay beyond the horizon", `{"id":"e3","destination":"orders","delay":"2h"}`, "delay: puts the event at "},
		{"both", `{"id":"e4","destination":"orders","delay":"2s","deliver_at":"` + beyond + `"}`, "deliver_at, delay: give one of the two, not both"},
		{"bad delay", `{"id":"e5","destination":"orders","delay":"soon"}`, `delay: "soon" is not a duration`},
		{"negative delay", `{"id":"e6","destination":"orders","delay":"-2s"}`, `delay: "-2s" is negative`},
		{"in a batch", `[{"id":"e7","destination":"orders","delay":"1s"},{"id":"e8","destination":"orders","deliver_at":"` + beyond + `"}]`, "events[1].deliver_at: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, m := call(t, "POST", p.url("/v1/events"), "", c.body)
			if msg := stringOf(m["error"]); code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
				t.Errorf("got %d %q, want 400 with %q", code, msg, c.want)
			}
		})
	}
	for i := 1; i <= 8; i++ {
		id := "e" + string(rune('0'+i))
		if code, m := call(t, "GET", p.url("/v1/events/"+id), "", ""); code != http.StatusNotFound {
			t.Errorf("GET %s after its refusal: %d %v, want 404", id, code, m)
		}
	}
	code, m := call(t, "GET", p.url("/v1/events?state=pending"), "", "")
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 0 {
		t.Errorf("pending events after refusals: %d %v", code, m)
	}
	if len(rc.Requests()) != 0 {
		t.Errorf("the receiver got %d requests", len(rc.Requests()))
	}

	code, out := run(t, t.TempDir(), "serve", "--max-schedule", "-1h")
	if code != 2 || !strings.Contains(out, "delivery.max_schedule (--max-schedule, OUTBOXD_MAX_SCHEDULE): must not be negative") {
		t.Errorf("serve --max-schedule -1h: exit %d, %q", code, out)
	}
}
