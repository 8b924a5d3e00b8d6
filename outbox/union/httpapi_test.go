package union_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
	"github.com/outboxd/outbox/outbox/union"
)

var _ httpapi.Backend = (*union.View)(nil)

func TestHTTPAPIServesEveryStore(t *testing.T) {
	v, all, _ := newView(t, 3)
	put(t, all[2], false, "in-partition")
	put(t, all[1], true, "dead-in-partition")
	srv := httptest.NewServer(httpapi.New(v, httpapi.Config{}))
	defer srv.Close()
	do := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		return callAPI(t, srv, method, path, body)
	}

	code, m := do("GET", "/v1/events/in-partition", "")
	if code != http.StatusOK || m["id"] != "in-partition" || m["state"] != "pending" {
		t.Errorf("GET of an event in a partition store: %d %v", code, m)
	}
	if code, m := do("GET", "/v1/events/nowhere", ""); code != http.StatusNotFound || m["error"] != `event "nowhere" not found` {
		t.Errorf("GET of an unknown event: %d %v", code, m)
	}

	code, m = do("POST", "/v1/events", `{"id": "posted", "destination": "orders"}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	if _, err := all[0].Get(context.Background(), "posted"); err != nil {
		t.Errorf("the POSTed event is not in the primary: %v", err)
	}
	for _, o := range all[1:] {
		if _, err := o.Get(context.Background(), "posted"); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("the POSTed event is in another store too: %v", err)
		}
	}

	code, m = do("GET", "/v1/events?limit=1", "")
	if code != http.StatusOK || m["next"] != "in-partition" {
		t.Errorf("GET /v1/events?limit=1: %d %v, want in-partition first", code, m)
	}
	if code, m = do("GET", "/v1/events?after=in-partition&limit=1", ""); code != http.StatusOK || m["next"] != "" {
		t.Errorf("second page: %d %v, want posted and the end", code, m)
	} else if evs := m["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["id"] != "posted" {
		t.Errorf("second page: %v, want posted", evs)
	}

	if code, m := do("POST", "/v1/events/dead-in-partition/replay", ""); code != http.StatusAccepted {
		t.Errorf("replay of a dead event in a partition store: %d %v", code, m)
	}
	if code, _ := do("DELETE", "/v1/events/in-partition", ""); code != http.StatusNoContent {
		t.Errorf("DELETE of an event in a partition store: %d", code)
	}
	if ev, err := all[2].Get(context.Background(), "in-partition"); err != nil || ev.State != outbox.StateDeleted {
		t.Errorf("its store after DELETE: %+v %v", ev, err)
	}
	if code, m := do("GET", "/v1/stats", ""); code != http.StatusOK || m["pending"] != float64(2) {
		t.Errorf("stats: %d %v, want 2 pending (posted, dead-in-partition replayed)", code, m)
	}
}
