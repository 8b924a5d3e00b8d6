package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// newArchiveEnv starts an outbox that keeps delivered events for an hour,
// delivering to rc as endpoint "billing", subscribed to every topic.
func newArchiveEnv(t *testing.T, rc *testkit.Receiver) *env {
	t.Helper()
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "billing", URL: rc.URL, AllowPrivate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink:          sink,
		Subscriptions: []outbox.Subscription{{Endpoint: "billing", Topics: []string{"*"}}},
		Interval:      10 * time.Millisecond,
		Retain:        time.Hour,
		NoSync:        true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, o, sink, httpapi.Config{})
}

// archivePages pages through GET /v1/archive with query q and returns the
// events found and the number of pages.
func archivePages(t *testing.T, e *env, q url.Values) ([]map[string]any, int) {
	t.Helper()
	var all []map[string]any
	for pages := 1; ; pages++ {
		code, m := e.get(t, "/v1/archive?"+q.Encode())
		if code != http.StatusOK {
			t.Fatalf("GET /v1/archive?%s: %d %v", q.Encode(), code, m)
		}
		for _, ev := range m["events"].([]any) {
			all = append(all, ev.(map[string]any))
		}
		next, _ := m["next"].(string)
		if next == "" {
			return all, pages
		}
		q.Set("cursor", next)
	}
}

func TestArchiveSearchPagesThroughTheMatchingDeliveries(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	e := newArchiveEnv(t, rc)
	from := time.Now().UTC()
	var batch []map[string]any
	for i := range 60 {
		topic := []string{"order.created", "order.paid", "invoice.sent"}[i%3]
		ev := map[string]any{"topic": topic, "key": fmt.Sprintf("cust-%d", i%5), "payload": map[string]any{"n": i}}
		if i == 59 {
			delete(ev, "payload")
			ev["payload_base64"] = "/w==" // not JSON: comes back as base64
		}
		batch = append(batch, ev)
	}
	if code, m := e.post(t, "/v1/events", batch); code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %v", code, m)
	}
	testkit.WaitFor(t, time.Minute, "60 deliveries archived", func() bool { return e.o.Stats().Archived == 60 })

	orders, pages := archivePages(t, e, url.Values{"topic": {"order.*"}, "from": {from.Format(time.RFC3339Nano)}, "limit": {"7"}})
	if len(orders) != 40 || pages != 6 {
		t.Fatalf("order.*: %d events in %d pages, want 40 in 6", len(orders), pages)
	}
	for _, ev := range orders {
		if ev["state"] != "delivered" || ev["endpoint"] != "billing" || ev["delivered_at"] == "" || ev["payload"] == nil {
			t.Fatalf("archived event %v", ev)
		}
	}
	keyed, _ := archivePages(t, e, url.Values{"key_prefix": {"cust-4"}, "topic": {"invoice.sent"}})
	if len(keyed) != 4 { // i%5 == 4 and i%3 == 2: 14, 29, 44, 59
		t.Fatalf("key cust-4 on invoice.sent: %d events", len(keyed))
	}
	for _, ev := range keyed {
		if ev["payload_base64"] == "/w==" {
			return
		}
	}
	t.Fatalf("the non-JSON payload is not base64 in %v", keyed)
}

func TestArchiveSearchRefusesBadQueries(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	e := newArchiveEnv(t, rc)
	for _, q := range []string{
		"topic=order.**",
		"from=yesterday",
		"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
		"cursor=not-a-cursor",
		"limit=0",
		"state=delivered",
	} {
		if code, m := e.get(t, "/v1/archive?"+q); code != http.StatusBadRequest || m["error"] == "" {
			t.Errorf("GET /v1/archive?%s: %d %v, want 400 with the reason", q, code, m)
		}
	}
}

func TestArchiveReplayOverHTTP(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	e := newArchiveEnv(t, rc)
	var batch []map[string]any
	for i := range 20 {
		batch = append(batch, map[string]any{"topic": "order.paid", "key": fmt.Sprintf("cust-%d", i%2), "payload": map[string]any{"n": i}})
	}
	code, m := e.post(t, "/v1/events", batch)
	if code != http.StatusAccepted {
		t.Fatalf("enqueue: %d %v", code, m)
	}
	evIDs := ids(t, m)
	testkit.WaitFor(t, time.Minute, "20 deliveries archived", func() bool { return e.o.Stats().Archived == 20 })
	code, m = e.post(t, "/v1/archive/replay", map[string]any{"topic": "order.*", "key_prefix": "cust-1", "rate": 1000})
	if code != http.StatusAccepted || m["id"] == "" || m["state"] != "running" {
		t.Fatalf("POST /v1/archive/replay: %d %v", code, m)
	}
	path := "/v1/archive/replay/" + m["id"].(string)
	testkit.WaitFor(t, time.Minute, "the replay to end", func() bool {
		code, m = e.get(t, path)
		return code == http.StatusOK && m["state"] != "running"
	})
	if m["state"] != "done" || m["replayed"] != 10.0 || m["skipped"] != 0.0 || m["ended_at"] == nil {
		t.Fatalf("GET %s: %v", path, m)
	}
	testkit.WaitFor(t, time.Minute, "the replayed deliveries made", func() bool { return e.o.Stats().Archived == 30 })
	for i, id := range evIDs {
		if want := 1 + i%2; rc.Attempts(id) != want {
			t.Fatalf("%s (cust-%d) sent %d times, want %d", id, i%2, rc.Attempts(id), want)
		}
	}
	if code, m = e.do(t, http.MethodDelete, path, "", nil); code != http.StatusOK || m["state"] != "done" {
		t.Fatalf("DELETE of an ended replay: %d %v", code, m)
	}
	if code, _ = e.get(t, "/v1/archive/replay/nope"); code != http.StatusNotFound {
		t.Fatalf("GET of an unknown replay: %d", code)
	}
	for _, body := range []string{`[]`, `{"rate": -1}`, `{"topic": "a.**"}`, `{"from": "soon"}`, `{"limit": -1}`, `{"target": "nobody"}`, `{"x": 1}`} {
		if code, m := e.post(t, "/v1/archive/replay", []byte(body)); code != http.StatusBadRequest {
			t.Errorf("POST /v1/archive/replay %s: %d %v, want 400", body, code, m)
		}
	}
}
