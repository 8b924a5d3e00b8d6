package httpapi_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// An event deleted through the API is reported as deleted, and posting its
// ID again answers 409 saying so (and when), distinct from the conflict of
// other content under a pending ID; a batch holding it stores nothing. A
// delivered ID posted again stays a silent duplicate (202).
func TestDeletedEventIsReportedAndItsIDRefused(t *testing.T) {
	rc := newReceiver(t, func(r *http.Request) int {
		if r.Header.Get("webhook-id") == "sent" {
			return http.StatusNoContent
		}
		return http.StatusServiceUnavailable // the others stay pending
	})
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	gone := map[string]any{"id": "gone", "destination": "orders", "payload": "a"}
	if code, m := e.post(t, "/v1/events", gone); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	before := time.Now().UTC()
	if code, m := e.do(t, http.MethodDelete, "/v1/events/gone", "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %v", code, m)
	}
	after := time.Now().UTC()
	if s := e.eventState(t, "gone"); s != "deleted" {
		t.Errorf("GET after DELETE: state %q, want deleted", s)
	}

	msgRE := regexp.MustCompile(`^id "gone" was deleted by an operator at (\S+); its ID stays reserved for the tombstone retention$`)
	checkMsg := func(what, prefix string, m map[string]any) {
		t.Helper()
		msg := fmt.Sprint(m["error"])
		if !strings.HasPrefix(msg, prefix) {
			t.Errorf("%s: error %q does not start with %q", what, msg, prefix)
			return
		}
		sub := msgRE.FindStringSubmatch(strings.TrimPrefix(msg, prefix))
		if sub == nil {
			t.Errorf("%s: error %q does not say the event was deleted", what, msg)
			return
		}
		at, err := time.Parse(time.RFC3339Nano, sub[1])
		if err != nil || at.Before(before) || at.After(after) {
			t.Errorf("%s: deletion time %q (%v), want an RFC 3339 time in [%v, %v]", what, sub[1], err, before, after)
		}
	}
	code, m := e.post(t, "/v1/events", gone)
	if code != http.StatusConflict {
		t.Fatalf("POST of a deleted ID: %d %v, want 409", code, m)
	}
	checkMsg("single", "", m)
	code, m = e.post(t, "/v1/events", []map[string]any{{"id": "fresh", "destination": "orders"}, gone})
	if code != http.StatusConflict {
		t.Fatalf("POST of a batch with a deleted ID: %d %v, want 409", code, m)
	}
	checkMsg("batch", "events[1]: ", m)
	if code, m := e.get(t, "/v1/events/fresh"); code != http.StatusNotFound {
		t.Errorf("a refused batch stored its other event: %d %v", code, m)
	}
	if s := e.eventState(t, "gone"); s != "deleted" {
		t.Errorf("GET after the refused POST: state %q, want deleted", s)
	}

	// Other content under a pending ID is a conflict of another kind.
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "kept", "destination": "orders", "payload": "a"}); code != http.StatusAccepted {
		t.Fatalf("POST kept: %d %v", code, m)
	}
	code, m = e.post(t, "/v1/events", map[string]any{"id": "kept", "destination": "orders", "payload": "b"})
	if msg := fmt.Sprint(m["error"]); code != http.StatusConflict || strings.Contains(msg, "deleted") {
		t.Errorf("content conflict: %d %q, want a 409 that does not speak of a deletion", code, msg)
	}

	// A delivered ID is a duplicate: accepted, not delivered again.
	sent := map[string]any{"id": "sent", "destination": "orders", "payload": "s"}
	if code, m := e.post(t, "/v1/events", sent); code != http.StatusAccepted {
		t.Fatalf("POST sent: %d %v", code, m)
	}
	testkit.WaitFor(t, 10*time.Second, "sent delivered", func() bool { return e.eventState(t, "sent") == "delivered" })
	if code, m := e.post(t, "/v1/events", sent); code != http.StatusAccepted || ids(t, m)[0] != "sent" {
		t.Errorf("POST of a delivered ID: %d %v, want 202", code, m)
	}
	if s := e.eventState(t, "sent"); s != "delivered" {
		t.Errorf("delivered event re-posted: state %q, want delivered", s)
	}
	n := 0
	for _, r := range rc.Requests() {
		if r.Header.Get("webhook-id") == "sent" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("sent delivered %d times, want once", n)
	}
}
