package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// refusingBackend is an outbox whose Enqueue a downstream refuses.
type refusingBackend struct {
	*outbox.Outbox
	err error
}

func (b refusingBackend) Enqueue(context.Context, ...outbox.Event) ([]string, error) {
	return nil, b.err
}

// A Backend that cannot take the events now says why: a 503 with its
// reason and Retry-After, checked against the OpenAPI document.
func TestUnavailableBackendIsA503WithItsReason(t *testing.T) {
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": "http://127.0.0.1:1/"})
	cause := errors.New("broker said no")
	b := refusingBackend{Outbox: e.o, err: &httpapi.UnavailableError{Reason: "Kafka did not acknowledge the events: not authorised",
		RetryAfter: 1500 * time.Millisecond, Err: cause}}
	api := httptest.NewServer(openapitest.Handler(t, httpapi.New(b, httpapi.Config{})))
	defer api.Close()
	e.api = api
	code, body := e.post(t, "/v1/events", map[string]any{"destination": "orders", "payload": 1})
	if code != http.StatusServiceUnavailable || body["error"] != "Kafka did not acknowledge the events: not authorised" {
		t.Fatalf("%d %v; want 503 with the backend's reason", code, body)
	}
	resp, err := api.Client().Post(api.URL+"/v1/events", "application/json", strings.NewReader(`{"destination":"orders"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2 (1.5s rounded up)", got)
	}
}
