package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// newTestService opens the service on files in a temporary directory, with
// an outbox that is not started (events stay pending, so the test can look
// at them).
func newTestService(t *testing.T) (*service, *outbox.Outbox) {
	t.Helper()
	dir := t.TempDir()
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: destOrders, URL: "http://127.0.0.1:1/orders", AllowPrivate: true},
		{Name: destRooms, URL: "http://127.0.0.1:1/rooms", AllowPrivate: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	box, err := outbox.Open(filepath.Join(dir, "outbox.db"), outbox.Config{Sink: sink, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Stop(context.Background()) })
	svc, err := openService(box)
	if err != nil {
		t.Fatal(err)
	}
	return svc, box
}

func TestServiceAnswersBadRequestsClearly(t *testing.T) {
	svc, box := newTestService(t)
	h := svc.routes()
	do := func(method, path, body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	steps := []struct {
		method, path, body string
		status             int
		mentions           string
	}{
		{"POST", "/orders", `{"id":"o-1","customer":"ada","total_cents":1999}`, 201, `"status":"created"`},
		{"POST", "/orders", `{"id":"o-1","customer":"ada","total_cents":1999}`, 201, `"status":"created"`}, // a client retry
		{"POST", "/orders", `{"id":"o-1","customer":"bob","total_cents":5}`, 409, "other details"},
		{"POST", "/orders", `{"id":"o 2","customer":"ada","total_cents":1}`, 400, "id:"},
		{"POST", "/orders", `{"id":"o-2","customer":"","total_cents":1}`, 400, "customer is required"},
		{"POST", "/orders", `{"id":"o-2","customer":"ada","total_cents":-1}`, 400, "must not be negative"},
		{"POST", "/orders", `{"id":"o-2","customer":"ada","colour":"red"}`, 400, "unknown field"},
		{"POST", "/orders", `not json`, 400, "bad JSON"},
		{"POST", "/orders/o-1/ship", ``, 409, "is created: it cannot become shipped"},
		{"POST", "/orders/o-1/pay", ``, 200, `"status":"paid"`},
		{"POST", "/orders/o-1/pay", ``, 200, `"status":"paid"`}, // a client retry
		{"POST", "/orders/nope/pay", ``, 404, "not found"},
		{"GET", "/orders/o-1", ``, 200, `"status":"paid"`},
		{"POST", "/rooms/lobby/join", `{"user":"ada"}`, 200, `"members":["ada"]`},
		{"POST", "/rooms/lobby/join", `{"user":"ada"}`, 200, `"revision":1`},  // already a member
		{"POST", "/rooms/lobby/leave", `{"user":"bob"}`, 200, `"revision":1`}, // not a member
		{"POST", "/rooms/lobby/leave", `{"user":"ada"}`, 200, `"members":[]`},
		{"POST", "/rooms/lobby/join", `{"user":""}`, 400, "room and user"},
		{"GET", "/rooms/empty", ``, 200, `"members":[]`},
	}
	for _, s := range steps {
		code, body := do(s.method, s.path, s.body)
		if code != s.status || !strings.Contains(body, s.mentions) {
			t.Fatalf("%s %s %s: %d %s; want %d mentioning %s", s.method, s.path, s.body, code, body, s.status, s.mentions)
		}
	}

	// The retried requests stored their events once; the room has one
	// pending snapshot, the latest.
	pending, _, err := box.List(context.Background(), outbox.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range pending {
		ids = append(ids, ev.ID)
	}
	want := "order:o-1:created order:o-1:paid room:lobby:r2"
	if got := strings.Join(ids, " "); got != want {
		t.Fatalf("pending events %q, want %q", got, want)
	}
	if ev, err := box.Get(context.Background(), "room:lobby:r2"); err != nil || !strings.Contains(string(ev.Payload), `"members":[]`) {
		t.Fatalf("room snapshot %s, %v", ev.Payload, err)
	}
}

func TestServiceRefusesWhenTheOutboxIsClosed(t *testing.T) {
	svc, box := newTestService(t)
	if err := box.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	svc.routes().ServeHTTP(rec, httptest.NewRequest("POST", "/rooms/lobby/join", strings.NewReader(`{"user":"ada"}`)))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "retry the request") {
		t.Fatalf("join with a closed outbox: %d %s", rec.Code, rec.Body.String())
	}
	_, err := box.Enqueue(context.Background(), outbox.Event{Destination: destOrders})
	if !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("enqueue after stop: %v", err)
	}
}

// A request is one transaction: when its event cannot be stored, neither is
// its change. Here an operator deleted the event of o-9's creation before
// the order existed, so the outbox refuses that event ID, and the order is
// not created either.
func TestServiceStoresAChangeOnlyWithItsEvent(t *testing.T) {
	svc, box := newTestService(t)
	ctx := context.Background()
	if _, err := box.Enqueue(ctx, outbox.Event{ID: "order:o-9:created", Destination: destOrders}); err != nil {
		t.Fatal(err)
	}
	if err := box.Delete(ctx, "order:o-9:created"); err != nil {
		t.Fatal(err)
	}
	h := svc.routes()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/orders", strings.NewReader(`{"id":"o-9","customer":"ada","total_cents":5}`)))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "nothing was stored") {
		t.Fatalf("create with a refused event: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/orders/o-9", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("the order whose event was refused: %d %s, want 404", rec.Code, rec.Body.String())
	}
}
