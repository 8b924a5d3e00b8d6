package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/httpapi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestEnqueueDeliversAndGetSaysDelivered(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	code, m := e.post(t, "/v1/events", map[string]any{
		"id": "order-1", "destination": "orders", "payload": map[string]any{"total": 42},
		"headers": map[string]string{"X-Tenant": "acme"},
	})
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	if got := ids(t, m); len(got) != 1 || got[0] != "order-1" {
		t.Fatalf("ids %v, want [order-1]", got)
	}
	testkit.WaitFor(t, 10*time.Second, "delivery", func() bool { return e.eventState(t, "order-1") == "delivered" })
	got := rc.Requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if string(r.Body) != `{"total":42}` {
		t.Errorf("payload %q, want the JSON text of the payload", r.Body)
	}
	if r.Header.Get("Idempotency-Key") != "order-1" || r.Header.Get("webhook-id") != "order-1" {
		t.Errorf("idempotency headers %v, want the event ID", r.Header)
	}
	if !strings.HasPrefix(r.Header.Get("webhook-signature"), "v1,") {
		t.Errorf("webhook-signature %q, want a v1 signature", r.Header.Get("webhook-signature"))
	}
	if r.Header.Get("X-Tenant") != "acme" {
		t.Errorf("event header lost: %v", r.Header)
	}
}

func TestBatchIsOneCallWithIDsInOrder(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	var batch []map[string]any
	for i := range 5 {
		ev := map[string]any{"destination": "orders", "key": "k"}
		if i == 2 {
			ev["id"] = "given"
			ev["payload_base64"] = base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})
		}
		batch = append(batch, ev)
	}
	code, m := e.post(t, "/v1/events", batch)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	got := ids(t, m)
	if len(got) != 5 || got[2] != "given" {
		t.Fatalf("ids %v, want 5 with the given one third", got)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("duplicate generated ID %s", id)
		}
		seen[id] = true
		if s := e.eventState(t, id); s != "pending" {
			t.Errorf("event %s is %s, want pending (receiver answers 503)", id, s)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "an attempt of the base64 event", func() bool {
		for _, r := range rc.Requests() {
			if r.Header.Get("webhook-id") == "given" {
				if !bytes.Equal(r.Body, []byte{0, 1, 2, 255}) {
					t.Fatalf("payload_base64 delivered as %q", r.Body)
				}
				return true
			}
		}
		return false
	})

}

func TestIdempotentByIDAndConflictOnOtherContent(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	ev := map[string]any{"id": "same", "destination": "orders", "payload": "a"}
	for range 2 {
		if code, m := e.post(t, "/v1/events", ev); code != http.StatusAccepted {
			t.Fatalf("POST: %d %v", code, m)
		}
	}
	if s := e.o.Stats(); s.Pending != 1 {
		t.Fatalf("pending %d after the same event twice, want 1", s.Pending)
	}
	ev["payload"] = "b"
	code, m := e.post(t, "/v1/events", ev)
	if code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), "same") {
		t.Fatalf("other content under the same ID: %d %v, want 409 naming the ID", code, m)
	}
}

// TestBadInputIsRefusedAndStoresNothing covers every bad input with its
// status and a message naming what is wrong.
func TestBadInputIsRefusedAndStoresNothing(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{Token: "s3cret", MaxBodyBytes: 4096, MaxPayloadBytes: 100, MaxBatch: 3},
		map[string]string{"orders": rc.URL})
	ok := `{"destination":"orders"}`
	cases := []struct {
		name         string
		method, path string
		ctype        string
		body         string
		status       int
		want         string
	}{
		{"malformed JSON", "POST", "/v1/events", "application/json", `{"destination":`, 400, "malformed JSON"},
		{"syntax error", "POST", "/v1/events", "application/json", `{"destination" "orders"}`, 400, "malformed JSON at byte"},
		{"trailing data", "POST", "/v1/events", "application/json", ok + ` {}`, 400, "trailing data"},
		{"not an object", "POST", "/v1/events", "application/json", `"orders"`, 400, "event object"},
		{"destination type", "POST", "/v1/events", "application/json", `{"destination":5}`, 400, "destination: must be a string, got number"},
		{"headers type", "POST", "/v1/events", "application/json", `{"destination":"orders","headers":{"X":1}}`, 400, "headers"},
		{"element type", "POST", "/v1/events", "application/json", `[` + ok + `,7]`, 400, "events[1]: must be an event object, got number"},
		{"unknown field", "POST", "/v1/events", "application/json", `{"destination":"orders","colour":"red"}`, 400, `unknown field "colour"`},
		{"missing destination", "POST", "/v1/events", "application/json", `{"payload":1}`, 400, "destination: is required"},
		{"missing destination in batch", "POST", "/v1/events", "application/json", `[` + ok + `,` + ok + `,{}]`, 400, "events[2].destination: is required"},
		{"unknown endpoint", "POST", "/v1/events", "application/json", `{"destination":"nowhere"}`, 400, "destination"},
		{"unknown endpoint in batch", "POST", "/v1/events", "application/json", `[` + ok + `,{"destination":"nowhere"}]`, 400, "events[1].destination"},
		{"raw URL not allowed", "POST", "/v1/events", "application/json", `{"destination":"http://127.0.0.1:1/x"}`, 400, "destination"},
		{"both payload forms", "POST", "/v1/events", "application/json", `{"destination":"orders","payload":1,"payload_base64":"AA=="}`, 400, "payload_base64: give one of the two"},
		{"bad base64", "POST", "/v1/events", "application/json", `{"destination":"orders","payload_base64":"***"}`, 400, "payload_base64: not valid"},
		{"bad method", "POST", "/v1/events", "application/json", `{"destination":"orders","method":"GE T"}`, 400, "method"},
		{"bad header name", "POST", "/v1/events", "application/json", `{"destination":"orders","headers":{"a b":"c"}}`, 400, "headers"},
		{"header injection", "POST", "/v1/events", "application/json", `{"destination":"orders","headers":{"X":"a\r\nB: c"}}`, 400, `headers: invalid value for header "X"`},
		{"id too long", "POST", "/v1/events", "application/json", `{"destination":"orders","id":"` + strings.Repeat("i", 201) + `"}`, 400, "id: 201 bytes"},
		{"id control char", "POST", "/v1/events", "application/json", `{"destination":"orders","id":"a\u0000b"}`, 400, "id: must be"},
		{"empty body", "POST", "/v1/events", "application/json", ``, 400, "empty body"},
		{"empty batch", "POST", "/v1/events", "application/json", `[]`, 400, "empty batch"},
		{"oversize body", "POST", "/v1/events", "application/json", `{"destination":"orders","payload":"` + strings.Repeat("x", 5000) + `"}`, 413, "over the limit of 4096 bytes"},
		{"oversize payload", "POST", "/v1/events", "application/json", `{"destination":"orders","payload":"` + strings.Repeat("x", 200) + `"}`, 413, "payload: 202 bytes is over the limit of 100"},
		{"oversize batch", "POST", "/v1/events", "application/json", `[` + strings.Repeat(ok+`,`, 3) + ok + `]`, 413, "batch of 4 events is over the limit of 3"},
		{"no content type", "POST", "/v1/events", "", ok, 415, "Content-Type must be application/json"},
		{"wrong content type", "POST", "/v1/events", "text/plain", ok, 415, "text/plain"},
		{"missing token", "POST", "/v1/events", "application/json", ok, 401, "missing bearer token"},
		{"bad token", "POST", "/v1/events", "application/json", ok, 401, "invalid bearer token"},
		{"basic auth", "POST", "/v1/events", "application/json", ok, 401, "Bearer scheme"},
		{"unknown route", "GET", "/v1/nothing", "", ``, 404, "no route for GET /v1/nothing"},
		{"unknown method", "PUT", "/v1/events", "application/json", ok, 405, "method PUT not allowed on /v1/events"},
		{"unknown method on event", "PATCH", "/v1/events/x", "application/json", ok, 405, "allowed: GET, HEAD, DELETE"},
		{"bad state", "GET", "/v1/events?state=gone", "", ``, 400, "state: must be pending, dead or unrouted"},
		{"bad limit", "GET", "/v1/events?limit=0", "", ``, 400, "limit: 0 is out of range"},
		{"unknown query", "GET", "/v1/events?sort=id", "", ``, 400, `unknown query parameter "sort"`},
		{"bad replay filter", "POST", "/v1/dead/replay", "application/json", `{"from":"yesterday"}`, 400, "from: must be an RFC 3339 time"},
		{"replay filter field", "POST", "/v1/dead/replay", "application/json", `{"dest":"orders"}`, 400, `unknown field "dest"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, e.api.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			switch c.name {
			case "missing token":
			case "bad token":
				req.Header.Set("Authorization", "Bearer s3cre")
			case "basic auth":
				req.Header.Set("Authorization", "Basic czNjcmV0")
			default:
				req.Header.Set("Authorization", "Bearer s3cret")
			}
			resp, err := e.api.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatalf("status %d, body is not a JSON error: %v", resp.StatusCode, err)
			}
			t.Logf("%d %s", resp.StatusCode, m["error"])
			if resp.StatusCode != c.status || !strings.Contains(m["error"], c.want) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, m["error"], c.status, c.want)
			}
			if c.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			if c.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	if s := e.o.Stats(); s.Pending != 0 || s.Dead != 0 || s.EnqueuedTotal != 0 {
		t.Errorf("bad input changed the store: %+v", s)
	}
	if st := e.o.Stats(); st.LastLSN != 0 {
		t.Errorf("bad input wrote %d changelog entries", st.LastLSN)
	}
	if n := len(rc.Requests()); n != 0 {
		t.Errorf("bad input reached the receiver %d times", n)
	}
}

func TestListPaginationIsStableWhileEventsComeAndGo(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	var batch []map[string]any
	for i := range 30 {
		batch = append(batch, map[string]any{"id": fmt.Sprintf("ev-%02d", i), "destination": "orders"})
	}
	if code, m := e.post(t, "/v1/events", batch); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	var seen []string
	after := ""
	for page := 0; ; page++ {
		code, m := e.get(t, "/v1/events?state=pending&limit=7&after="+after)
		if code != http.StatusOK {
			t.Fatalf("list: %d %v", code, m)
		}
		for _, ev := range m["events"].([]any) {
			seen = append(seen, ev.(map[string]any)["id"].(string))
		}
		if page == 1 {
			// Between pages: delete one not yet listed, one already
			// listed, and add one before and one after the cursor.
			for _, id := range []string{"ev-20", "ev-01"} {
				if code, m := e.do(t, http.MethodDelete, "/v1/events/"+id, "", nil); code != http.StatusNoContent {
					t.Fatalf("DELETE %s: %d %v", id, code, m)
				}
			}
			e.post(t, "/v1/events", []map[string]any{{"id": "ev-00a", "destination": "orders"}, {"id": "ev-99", "destination": "orders"}})
		}
		next, _ := m["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	want := map[string]bool{}
	for i := range 30 {
		want[fmt.Sprintf("ev-%02d", i)] = true
	}
	delete(want, "ev-20")
	want["ev-99"] = true
	count := map[string]int{}
	for i, id := range seen {
		count[id]++
		if i > 0 && seen[i-1] >= id {
			t.Errorf("not in ID order: %s after %s", id, seen[i-1])
		}
	}
	for id := range want {
		if count[id] != 1 && id != "ev-01" {
			t.Errorf("%s listed %d times, want once", id, count[id])
		}
	}
	if count["ev-20"] != 0 {
		t.Error("deleted ev-20 listed")
	}
}

func TestGetDeleteAndReplayAnswers(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusBadRequest }) // dead by policy
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL, "other": rc.URL})
	if code, _ := e.get(t, "/v1/events/nope"); code != http.StatusNotFound {
		t.Errorf("GET unknown: %d, want 404", code)
	}
	if code, _ := e.do(t, http.MethodDelete, "/v1/events/nope", "", nil); code != http.StatusNotFound {
		t.Errorf("DELETE unknown: %d, want 404", code)
	}
	if code, _ := e.post(t, "/v1/events/nope/replay", []byte(nil)); code != http.StatusNotFound {
		t.Errorf("replay unknown: %d, want 404", code)
	}
	e.post(t, "/v1/events", []map[string]any{
		{"id": "d1", "destination": "orders", "key": "a/1"},
		{"id": "d2", "destination": "orders", "key": "b/1"},
		{"id": "d3", "destination": "other"},
	})
	testkit.WaitFor(t, 10*time.Second, "three dead letters", func() bool { return e.o.Stats().Dead == 3 })
	code, m := e.get(t, "/v1/events/d1")
	if code != 200 || m["state"] != "dead" || m["last_status"] != float64(400) || m["attempts"] == nil || m["created_at"] == "" {
		t.Fatalf("GET dead event: %d %v", code, m)
	}
	code, m = e.get(t, "/v1/events?state=dead")
	if code != 200 || len(m["events"].([]any)) != 3 {
		t.Fatalf("list dead: %d %v", code, m)
	}
	rc.setRespond(func(*http.Request) int { return http.StatusServiceUnavailable })
	if code, m := e.post(t, "/v1/events/d3/replay", []byte(nil)); code != http.StatusAccepted {
		t.Fatalf("replay d3: %d %v", code, m)
	}
	if code, m := e.post(t, "/v1/events/d3/replay", []byte(nil)); code != http.StatusConflict || !strings.Contains(fmt.Sprint(m["error"]), "not dead") {
		t.Errorf("replay of a pending event: %d %v, want 409", code, m)
	}
	code, m = e.post(t, "/v1/dead/replay", map[string]any{"destination": "orders", "key_prefix": "a/", "rate": 1000})
	if code != http.StatusAccepted || m["replayed"] != float64(1) {
		t.Fatalf("replay by filter: %d %v, want 1 replayed", code, m)
	}
	if s := e.eventState(t, "d1"); s != "pending" {
		t.Errorf("d1 is %s after the filtered replay, want pending", s)
	}
	if s := e.eventState(t, "d2"); s != "dead" {
		t.Errorf("d2 is %s, want still dead (other key prefix)", s)
	}
	if code, _ := e.do(t, http.MethodDelete, "/v1/events/d2", "", nil); code != http.StatusNoContent {
		t.Errorf("DELETE dead: %d, want 204", code)
	}
	if code, _ := e.do(t, http.MethodDelete, "/v1/events/d2", "", nil); code != http.StatusNotFound {
		t.Errorf("DELETE twice: %d, want 404", code)
	}
}

func TestEndpointDisabledBy410IsEnabledAgain(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusGone })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	e.post(t, "/v1/events", map[string]any{"id": "g1", "destination": "orders"})
	var ep map[string]any
	testkit.WaitFor(t, 10*time.Second, "the endpoint to be disabled", func() bool {
		_, m := e.get(t, "/v1/endpoints")
		for _, x := range m["endpoints"].([]any) {
			if x := x.(map[string]any); x["name"] == "orders" && x["disabled"] == true {
				ep = x
				return true
			}
		}
		return false
	})

	if ep["last_status"] != float64(410) || ep["disabled_reason"] == "" {
		t.Errorf("disabled endpoint %v, want status 410 and a reason", ep)
	}
	if s := e.eventState(t, "g1"); s != "pending" {
		t.Errorf("event of a disabled endpoint is %s, want pending", s)
	}
	rc.setRespond(nil)
	code, m := e.post(t, "/v1/endpoints/orders/enable", []byte(nil))
	if code != http.StatusOK || m["disabled"] != false {
		t.Fatalf("enable: %d %v", code, m)
	}
	testkit.WaitFor(t, 10*time.Second, "delivery after enable", func() bool { return e.eventState(t, "g1") == "delivered" })
	if code, _ := e.post(t, "/v1/endpoints/nowhere/enable", []byte(nil)); code != http.StatusNotFound {
		t.Errorf("enable unknown endpoint: %d, want 404", code)
	}
}

func TestStats(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	e.post(t, "/v1/events", []map[string]any{{"destination": "orders"}, {"destination": "orders"}})
	code, m := e.get(t, "/v1/stats")
	if code != 200 || m["pending"] != float64(2) {
		t.Fatalf("stats: %d %v", code, m)
	}
	for _, k := range []string{"pending", "dead", "in_flight", "delivered_total", "failed_total", "oldest_pending_age_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("stats without %q: %v", k, m)
		}
	}
}

// GET /v1/endpoints pages by name with limit and after.
func TestEndpointsPages(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusOK })
	e := newEnv(t, httpapi.Config{}, map[string]string{"c": rc.URL, "a": rc.URL, "b": rc.URL})
	var got []any
	for _, want := range []struct{ path, next string }{
		{"/v1/endpoints?limit=2", "b"},
		{"/v1/endpoints?limit=2&after=b", ""},
	} {
		code, m := e.get(t, want.path)
		if code != http.StatusOK || m["next"] != want.next {
			t.Fatalf("GET %s: %d %v, want next %q", want.path, code, m, want.next)
		}
		for _, x := range m["endpoints"].([]any) {
			got = append(got, x.(map[string]any)["name"])
		}
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Errorf("pages %v, want a, b, c", got)
	}
	if code, m := e.get(t, "/v1/endpoints?limit=1001"); code != http.StatusBadRequest || !strings.HasPrefix(m["error"].(string), "limit:") {
		t.Errorf("limit=1001: %d %v", code, m)
	}
}
