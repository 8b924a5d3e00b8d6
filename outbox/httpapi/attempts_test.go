package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// GET /v1/events/{id}/attempts lists the attempts in order, a text excerpt
// as body and a binary one as body_base64, with the safe headers only;
// an unknown event is a 404, another method a 405.
func TestAttemptsRoute(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", func(_ *http.Request, _ string, n int) testkit.Reply {
		h := http.Header{"Content-Type": {"text/plain"}, "Set-Cookie": {"s=1"}}
		if n == 0 {
			return testkit.Reply{Status: 404, Header: h, Body: "not yet"}
		}
		return testkit.Reply{Status: 200, Header: h, Body: "\xff\x00ok"}
	})
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL + "/orders"})
	if code, m := e.post(t, "/v1/events", map[string]any{"id": "evt-1", "destination": "orders"}); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "evt-1 delivered", func() bool { return e.eventState(t, "evt-1") == "delivered" })
	code, m := e.get(t, "/v1/events/evt-1/attempts")
	if code != http.StatusOK || m["id"] != "evt-1" {
		t.Fatalf("GET attempts: %d %v", code, m)
	}
	as, _ := m["attempts"].([]any)
	if len(as) != 2 {
		t.Fatalf("attempts %v, want 2", m["attempts"])
	}
	first, second := as[0].(map[string]any), as[1].(map[string]any)
	resp1, _ := first["response"].(map[string]any)
	if first["attempt"] != 1.0 || first["delivery"] != 1.0 || first["outcome"] != "park" || first["status"] != 404.0 ||
		resp1["body"] != "not yet" || resp1["body_base64"] != nil || first["started_at"] == "" || first["duration_ms"] == nil {
		t.Errorf("first attempt %v", first)
	}
	if hs, _ := resp1["headers"].(map[string]any); hs["Content-Type"] != "text/plain" || hs["Set-Cookie"] != nil {
		t.Errorf("first attempt's headers %v, want Content-Type and no Set-Cookie", resp1["headers"])
	}
	resp2, _ := second["response"].(map[string]any)
	if second["attempt"] != 2.0 || second["outcome"] != "success" || second["status"] != 200.0 ||
		resp2["body"] != nil || resp2["body_base64"] != base64.StdEncoding.EncodeToString([]byte("\xff\x00ok")) {
		t.Errorf("second attempt %v", second)
	}
	if code, m := e.get(t, "/v1/events/nowhere/attempts"); code != http.StatusNotFound || m["error"] != `event "nowhere" not found` {
		t.Errorf("unknown event: %d %v", code, m)
	}
	if code, _ := e.post(t, "/v1/events/evt-1/attempts", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST attempts: %d, want 405", code)
	}
}
