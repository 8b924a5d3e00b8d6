package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// TestInputEncodingJSONWouldRewriteIsRefused: what encoding/json accepts
// but silently changes is a 400 naming the field: invalid UTF-8 (which it
// would turn into U+FFFD, so that distinct IDs collide), escapes of lone
// UTF-16 surrogates (the same), and a key given twice (the last would win).
func TestInputEncodingJSONWouldRewriteIsRefused(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	cases := []struct {
		name, body, want string
	}{
		{"id \\xfe", "{\"id\":\"k\xfe\",\"destination\":\"orders\"}", "id: is not valid UTF-8"},
		{"id \\xff", "{\"id\":\"k\xff\",\"destination\":\"orders\"}", "id: is not valid UTF-8"},
		{"id in a batch", "[{\"destination\":\"orders\"},{\"id\":\"k\xff\",\"destination\":\"orders\"}]", "events[1].id: is not valid UTF-8"},
		{"key", "{\"key\":\"\xc3\",\"destination\":\"orders\"}", "key: is not valid UTF-8"},
		{"destination", "{\"destination\":\"orders\xed\xa0\x80\"}", "destination: is not valid UTF-8"},
		{"header value", "[{\"destination\":\"orders\",\"headers\":{\"X-Tenant\":\"a\xffb\"}}]", "events[0].headers.X-Tenant: is not valid UTF-8"},
		{"header name", "{\"destination\":\"orders\",\"headers\":{\"X-\xff\":\"v\"}}", `headers: a key is not valid UTF-8: "X-\xff"`},
		{"lone high surrogate", `{"id":"k\ud800","destination":"orders"}`, `id: is not valid UTF-8 (the escape \ud800 is half of a UTF-16 pair)`},
		{"lone low surrogate", `{"id":"k\uDFFF","destination":"orders"}`, `id: is not valid UTF-8 (the escape \udfff`},
		{"high then not low", `{"id":"k\ud800\u0041","destination":"orders"}`, "id: is not valid UTF-8"},
		{"duplicate id", `{"id":"a","destination":"orders","id":"b"}`, `duplicate key "id"`},
		{"duplicate in a batch", `[{"destination":"orders"},{"destination":"orders","destination":"other"}]`, `events[1]: duplicate key "destination"`},
		{"same key in other case", `{"id":"a","ID":"b","destination":"orders"}`, `duplicate key "ID" (the same as "id"`},
		{"escaped duplicate", `{"id":"a","\u0069d":"b","destination":"orders"}`, `duplicate key "id"`},
		{"duplicate header", `{"destination":"orders","headers":{"X-A":"1","x-a":"2"}}`, `headers: duplicate key "x-a" (the same as "X-A"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, m := e.post(t, "/v1/events", []byte(c.body))
			if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
				t.Errorf("got %d %q, want 400 with %q", code, msg, c.want)
			}
		})
	}
	if s := e.o.Stats(); s.Pending != 0 || s.EnqueuedTotal != 0 || s.DuplicatesTotal != 0 {
		t.Fatalf("refused input changed the store: %+v", s)
	}
	// Valid input stays accepted: a surrogate pair, U+FFFD itself, and
	// repeated keys inside a payload, which is delivered as its bytes.
	for _, body := range []string{
		`{"id":"emoji-\ud83d\ude00","destination":"orders"}`,
		"{\"id\":\"given-\xef\xbf\xbd\",\"destination\":\"orders\",\"headers\":{\"X-Name\":\"caf\xc3\xa9\"}}",
		`{"id":"p","destination":"orders","payload":{"k":1,"k":2,"s":"\ud800"}}`,
	} {
		if code, m := e.post(t, "/v1/events", []byte(body)); code != http.StatusAccepted {
			t.Errorf("%s: %d %v, want 202", body, code, m)
		}
	}
	if code, m := e.get(t, "/v1/events/emoji-\U0001F600"); code != http.StatusOK {
		t.Errorf("GET the emoji ID: %d %v", code, m)
	}
}

// TestReplayFilterEncodingIsChecked: the replay filter follows the same
// rules.
func TestReplayFilterEncodingIsChecked(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	for body, want := range map[string]string{
		"{\"key_prefix\":\"a\xff\"}":            "key_prefix: is not valid UTF-8",
		`{"destination":"a","destination":"b"}`: `duplicate key "destination"`,
	} {
		code, m := e.post(t, "/v1/dead/replay", []byte(body))
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%q: got %d %q, want 400 with %q", body, code, msg, want)
		}
	}
}

// TestHeadersAndMethodsTheSinkWouldDropAreRefused: the API answers 400
// naming the event and the header or method that Enqueue refuses.
func TestHeadersAndMethodsTheSinkWouldDropAreRefused(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	for body, want := range map[string]string{
		`{"destination":"orders","headers":{"Host":"evil.example"}}`:                           `headers: header "Host" is set by the HTTP transport`,
		`[{"destination":"orders"},{"destination":"orders","headers":{"Content-Length":"9"}}]`: `events[1].headers: header "Content-Length" is set by the HTTP transport`,
		`{"destination":"orders","headers":{"transfer-encoding":"chunked"}}`:                   `header "transfer-encoding"`,
		`{"destination":"orders","headers":{"Webhook-Id":"x"}}`:                                `header "Webhook-Id" is set by the sink`,
		`{"destination":"orders","headers":{"Connection":"close"}}`:                            `header "Connection" is a hop-by-hop header`,
		`{"destination":"orders","headers":{"Upgrade":"h2c"}}`:                                 `header "Upgrade" is a hop-by-hop header`,
		`{"destination":"orders","method":"CONNECT"}`:                                          `method: "CONNECT" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`,
		`[{"destination":"orders","method":"TRACE"}]`:                                          `events[0].method: "TRACE" is not one of`,
		`{"destination":"orders","method":"GE T"}`:                                             `method: "GE T" is not one of`,
	} {
		code, m := e.post(t, "/v1/events", []byte(body))
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%s: got %d %q, want 400 with %q", body, code, msg, want)
		}
	}
	if s := e.o.Stats(); s.Pending != 0 || s.EnqueuedTotal != 0 {
		t.Fatalf("refused events were stored: %+v", s)
	}
	if n := len(rc.Requests()); n != 0 {
		t.Errorf("refused events reached the receiver %d times", n)
	}
}

// TestConflictInABatchNamesTheEventOnce: the 409 names events[i].id once,
// without the wrapping prefixes of the library's error.
func TestConflictInABatchNamesTheEventOnce(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	if code, m := e.post(t, "/v1/events", []byte(`{"id":"b","destination":"orders"}`)); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	cases := []struct{ body, want string }{
		{`[{"id":"x","destination":"orders"},{"id":"b","destination":"orders","payload":1}]`,
			`events[1].id: event "b" already exists with other content`},
		{`{"id":"b","destination":"orders","payload":1}`, `id: event "b" already exists with other content`},
		{`[{"id":"y","destination":"orders"},{"id":"z","destination":"orders"},{"id":"y","destination":"orders","payload":1}]`,
			`events[2].id: "y" is also the id of events[0], with other content`},
	}
	for _, c := range cases {
		code, m := e.post(t, "/v1/events", []byte(c.body))
		msg, _ := m["error"].(string)
		if code != http.StatusConflict || !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s: got %d %q, want 409 starting %q", c.body, code, msg, c.want)
		}
		for _, repeated := range []string{"outbox:", "store:", "events[1].events", "id: id"} {
			if strings.Contains(msg, repeated) {
				t.Errorf("%q repeats %q", msg, repeated)
			}
		}
	}
	if s := e.o.Stats(); s.Pending != 1 {
		t.Errorf("pending %d, want only the first event (a conflicting batch stores nothing)", s.Pending)
	}
}

// TestNumbersOutOfRangeSaySo: a number that does not fit is a 400 saying it
// is out of range, not a parse error.
func TestNumbersOutOfRangeSaySo(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	for path, want := range map[string]string{
		"/v1/events?limit=99999999999999999999": "limit: 99999999999999999999 is out of range: must be from 1 to 1000",
		"/v1/events?limit=1001":                 "limit: 1001 is out of range",
		"/v1/events?limit=-5":                   "limit: -5 is out of range",
		"/v1/events?limit=ten":                  `limit: must be a whole number from 1 to 1000, got "ten"`,
	} {
		code, m := e.get(t, path)
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("GET %s: got %d %q, want 400 with %q", path, code, msg, want)
		}
	}
	for body, want := range map[string]string{
		`{"limit":99999999999999999999}`: "limit: the number 99999999999999999999 is out of range (at most 9223372036854775807)",
		`{"limit":1e30}`:                 "limit: the number 1e30 is out of range",
		`{"limit":2.5}`:                  "limit: must be a whole number, got 2.5",
		`{"status":1e3}`:                 "status: must be a whole number written without a fraction or exponent, got 1e3",
		`{"status":5000}`:                "status: 5000 is out of range",
		`{"rate":1e400}`:                 "rate: the number 1e400 is out of range",
		`{"limit":-1}`:                   "limit: -1 is out of range",
	} {
		code, m := e.post(t, "/v1/dead/replay", []byte(body))
		if msg, _ := m["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("%s: got %d %q, want 400 with %q", body, code, msg, want)
		}
	}
}

// TestRawURLWithAnInvalidPortIsRefusedAtIngest: with raw URLs allowed, a
// destination whose port cannot be connected to is a 400, not an event
// that goes dead later.
func TestRawURLWithAnInvalidPortIsRefusedAtIngest(t *testing.T) {
	sink, err := httpsink.New(httpsink.Config{AllowRawURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(openapitest.Handler(t, httpapi.New(o, httpapi.Config{})))
	defer func() {
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = o.Stop(ctx)
		sink.Close()
	}()
	e := &env{o: o, api: api}
	for _, dest := range []string{"http://h:99999/", "http://h:abc/", "https://h:0/x"} {
		code, m := e.post(t, "/v1/events", []byte(`[{"destination":"http://h:80/"},{"destination":"`+dest+`"}]`))
		if msg, _ := m["error"].(string); code != http.StatusBadRequest ||
			!strings.Contains(msg, "events[1].destination:") || !strings.Contains(msg, "port must be a number from 1 to 65535") {
			t.Errorf("%s: got %d %q, want 400 on events[1].destination naming the port", dest, code, msg)
		}
	}
	if code, m := e.post(t, "/v1/events", []byte(`{"destination":"http://h:8080/"}`)); code != http.StatusAccepted {
		t.Errorf("a valid port: %d %v", code, m)
	}
}
