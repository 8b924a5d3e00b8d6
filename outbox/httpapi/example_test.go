package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// A Go service mounts the sidecar's API on its own mux, next to its own
// routes, for an outbox it embeds.
func ExampleNew() {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "orders", URL: receiver.URL, AllowPrivate: true},
	}})
	if err != nil {
		panic(err)
	}
	defer sink.Close()
	o, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink})
	if err != nil {
		panic(err)
	}
	defer o.Stop(context.Background())
	if err := o.Start(); err != nil {
		panic(err)
	}

	mux := http.NewServeMux()
	mux.Handle("/v1/", httpapi.New(o, httpapi.Config{Token: "s3cret", MaxBatch: 100}))
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Print(resp.StatusCode, " ", string(b))
	}
	post(`{"id": "order-1", "destination": "orders", "payload": {"total": 42}}`)
	post(`[{"id": "order-2", "destination": "orders"}, {"id": "order-3", "destination": "billing"}]`)
	// Output:
	// 202 {"ids":["order-1"]}
	// 400 {"error":"events[1].destination: unknown endpoint: \"billing\""}
}

// The routes of the API, as the OpenAPI document (httpapi.OpenAPI, served
// at GET /v1/openapi.json) describes them.
func ExampleRoutes() {
	for _, r := range httpapi.Routes() {
		fmt.Println(r)
	}
	// Output:
	// POST /v1/events
	// GET /v1/events
	// GET /v1/events/{id}
	// DELETE /v1/events/{id}
	// POST /v1/events/{id}/replay
	// GET /v1/events/{id}/attempts
	// POST /v1/dead/replay
	// GET /v1/endpoints
	// GET /v1/endpoints/{name}
	// POST /v1/endpoints/{name}
	// PUT /v1/endpoints/{name}
	// DELETE /v1/endpoints/{name}
	// POST /v1/endpoints/{name}/rotate-secret
	// POST /v1/endpoints/{name}/enable
	// POST /v1/endpoints/{name}/retry
	// GET /v1/archive
	// POST /v1/archive/replay
	// GET /v1/archive/replay/{id}
	// DELETE /v1/archive/replay/{id}
	// GET /v1/stats
	// GET /v1/openapi.json
}
