package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// An event published on a topic becomes one delivery per subscribed
// endpoint: GET shows each, and a call with ?endpoint= acts on one. (The
// outbox is not started here, so nothing is delivered meanwhile.)
func ExampleNew_topics() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "billing", URL: "https://billing.example/hooks"},
		{Name: "crm", URL: "https://crm.example/hooks"},
	}})
	if err != nil {
		panic(err)
	}
	defer sink.Close()
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink, Subscriptions: []outbox.Subscription{
		{Endpoint: "billing", Topics: []string{"order.paid"}},
		{Endpoint: "crm", Topics: []string{"order.*"}},
	}})
	if err != nil {
		panic(err)
	}
	defer o.Stop(context.Background())
	srv := httptest.NewServer(httpapi.New(o, httpapi.Config{}))
	defer srv.Close()

	call := func(method, path, body string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		return resp
	}
	show := func() {
		resp := call("GET", "/v1/events/pay-1", "")
		defer resp.Body.Close()
		var ev struct {
			Topic, State string
			Deliveries   []struct{ Endpoint, State string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
			panic(err)
		}
		fmt.Println(ev.Topic, ev.State, ev.Deliveries)
	}
	resp := call("POST", "/v1/events", `{"id": "pay-1", "topic": "order.paid", "payload": {"total": 42}}`)
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	show()
	resp = call("DELETE", "/v1/events/pay-1?endpoint=crm", "")
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	show()
	// Output:
	// 202
	// order.paid pending [{billing pending} {crm pending}]
	// 204
	// order.paid pending [{billing pending} {crm deleted}]
}
