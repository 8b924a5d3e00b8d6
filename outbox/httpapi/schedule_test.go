package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox/httpapi"
)

// An event object's "deliver_at" (RFC 3339) or "delay" (a duration) makes it
// scheduled: it is stored pending, due then, and the API returns its
// deliver_at.
func TestScheduledEventOverAPI(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	before := time.Now()
	code, m := e.post(t, "/v1/events", []map[string]any{
		{"id": "at", "destination": "orders", "deliver_at": at.In(time.FixedZone("X", 2*3600)).Format(time.RFC3339)},
		{"id": "delay", "destination": "orders", "delay": "90m"},
	})
	after := time.Now()
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	code, m = e.get(t, "/v1/events/at")
	if code != http.StatusOK || m["state"] != "pending" || m["deliver_at"] != at.Format(time.RFC3339Nano) ||
		m["next_attempt_at"] != m["deliver_at"] {
		t.Fatalf("GET at: %d %v; want pending, deliver_at and next_attempt_at %s", code, m, at.Format(time.RFC3339))
	}
	code, m = e.get(t, "/v1/events/delay")
	got, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["deliver_at"]))
	if code != http.StatusOK || err != nil || got.Before(before.Add(90*time.Minute)) || got.After(after.Add(90*time.Minute)) {
		t.Fatalf("GET delay: %d %v; want deliver_at 90m after the POST", code, m)
	}
	code, m = e.get(t, "/v1/events?state=pending")
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 2 || evs[0].(map[string]any)["deliver_at"] == nil {
		t.Fatalf("list: %d %v", code, m)
	}
}

// Bad schedules are a 400 naming the field, and nothing of the request is
// stored.
func TestBadScheduleIsRefused(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	far := time.Now().Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		name, body, want string
	}{
		{"unparseable deliver_at", `{"id":"a","destination":"orders","deliver_at":"tomorrow"}`, `deliver_at: "tomorrow" is not an RFC 3339 time`},
		{"deliver_at without zone", `{"id":"a","destination":"orders","deliver_at":"2026-01-02T15:04:05"}`, "deliver_at: "},
		{"deliver_at a number", `{"id":"a","destination":"orders","deliver_at":1767366245}`, "deliver_at: must be a string"},
		{"beyond the horizon", `{"id":"a","destination":"orders","deliver_at":"` + far + `"}`, "deliver_at: " + far + " is more than 720h0m0s ahead"},
		{"delay beyond the horizon", `{"id":"a","destination":"orders","delay":"745h"}`, "delay: puts the event at "},
		{"delay beyond the horizon in a batch", `[{"id":"a","destination":"orders"},{"id":"b","destination":"orders","delay":"745h"}]`, "events[1].delay: puts the event at "},
		{"both", `{"id":"a","destination":"orders","delay":"2s","deliver_at":"2026-01-02T15:04:05Z"}`, "deliver_at, delay: give one of the two, not both"},
		{"unparseable delay", `{"id":"a","destination":"orders","delay":"2 seconds"}`, `delay: "2 seconds" is not a duration`},
		{"delay without unit", `{"id":"a","destination":"orders","delay":"2"}`, `delay: "2" is not a duration`},
		{"negative delay", `{"id":"a","destination":"orders","delay":"-5s"}`, `delay: "-5s" is negative`},
		{"in a batch", `[{"id":"a","destination":"orders"},{"id":"b","destination":"orders","delay":"x"}]`, `events[1].delay: "x" is not a duration`},
		{"beyond the horizon in a batch", `[{"id":"a","destination":"orders"},{"id":"b","destination":"orders","deliver_at":"` + far + `"}]`, "events[1].deliver_at: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, m := e.post(t, "/v1/events", []byte(c.body))
			if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
				t.Errorf("got %d %q, want 400 with %q", code, msg, c.want)
			}
			for _, id := range []string{"a", "b"} {
				if code, m := e.get(t, "/v1/events/"+id); code != http.StatusNotFound {
					t.Errorf("GET %s after a refused request: %d %v, want 404", id, code, m)
				}
			}
		})
	}
	code, m := e.get(t, "/v1/events?state=pending")
	if evs, _ := m["events"].([]any); code != http.StatusOK || len(evs) != 0 {
		t.Fatalf("list after refused requests: %d %v", code, m)
	}
	if s := e.o.Stats(); s.Pending != 0 || s.EnqueuedTotal != 0 {
		t.Fatalf("refused input changed the store: %+v", s)
	}
}
