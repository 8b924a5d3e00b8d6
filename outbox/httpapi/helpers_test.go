package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// receiver is a loopback webhook receiver that records what it got, by
// webhook-id, and answers with the status its respond func picks (204
// without one).
type receiver struct{ *testkit.Receiver }

func newReceiver(t *testing.T, respond func(r *http.Request) int) receiver {
	t.Helper()
	return receiver{testkit.NewReceiver(t, "webhook-id", answer(respond))}
}

func (rc receiver) setRespond(fn func(r *http.Request) int) { rc.SetAnswer(answer(fn)) }

func answer(respond func(r *http.Request) int) testkit.Answer {
	if respond == nil {
		return nil
	}
	return func(r *http.Request, _ string, _ int) testkit.Reply { return testkit.Reply{Status: respond(r)} }
}

// env is an outbox on a file in a temp dir with the API served on loopback.
type env struct {
	o   *outbox.Outbox
	api *httptest.Server
	cfg httpapi.Config
}

// newEnv starts an outbox delivering to the named endpoints (name -> URL)
// and serves its API.
func newEnv(t *testing.T, cfg httpapi.Config, endpoints map[string]string) *env {
	t.Helper()
	var eps []httpsink.Endpoint
	for name, u := range endpoints {
		eps = append(eps, httpsink.Endpoint{Name: name, URL: u, AllowPrivate: true,
			Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink:           sink,
		Interval:       20 * time.Millisecond,
		ParkInterval:   50 * time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, o, sink, cfg)
}

// serve starts o and serves its API with cfg; the API, o and its sink are
// closed at cleanup.
func serve(t *testing.T, o *outbox.Outbox, sink *httpsink.Sink, cfg httpapi.Config) *env {
	t.Helper()
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	// Every answer, and every request the API accepts, is checked against
	// the OpenAPI document.
	api := httptest.NewServer(openapitest.Handler(t, httpapi.New(o, cfg)))
	t.Cleanup(func() {
		api.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := o.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		sink.Close()
	})
	return &env{o: o, api: api, cfg: cfg}
}

// do sends a request and returns the status and decoded JSON body (nil when
// the body is empty).
func (e *env) do(t *testing.T, method, path, contentType string, body []byte, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.api.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if e.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.cfg.Token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, b, err)
	}
	return resp.StatusCode, m
}

func (e *env) post(t *testing.T, path string, v any) (int, map[string]any) {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	return e.do(t, http.MethodPost, path, "application/json", b)
}

func (e *env) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	return e.do(t, http.MethodGet, path, "", nil)
}

// eventState returns GET /v1/events/{id}'s state.
func (e *env) eventState(t *testing.T, id string) string {
	t.Helper()
	code, m := e.get(t, "/v1/events/"+id)
	if code != http.StatusOK {
		t.Fatalf("GET event %s: %d %v", id, code, m)
	}
	s, _ := m["state"].(string)
	return s
}

func ids(t *testing.T, m map[string]any) []string {
	t.Helper()
	raw, ok := m["ids"].([]any)
	if !ok {
		t.Fatalf("no ids in %v", m)
	}
	out := make([]string, len(raw))
	for i, v := range raw {
		out[i] = v.(string)
	}
	return out
}
