package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// While a new subscription's backfill runs (its commits held, so that it
// cannot end first), GET /v1/endpoints/{name} answers with the endpoint's
// backfill running and GET /v1/stats with the events still unrouted; then
// every event is delivered and both show what the backfill made.
func TestBackfillProgressInTheAPI(t *testing.T) {
	rc := statusReceiver(t, func(int) int { return http.StatusOK })
	e := newTopicEnv(t, map[string]*testkit.Receiver{"audit": rc}, nil)
	const n = 2000
	var ids []string
	for i := 0; i < n; i += 500 {
		var evs []outbox.Event
		for j := i; j < i+500; j++ {
			ids = append(ids, fmt.Sprintf("ev-%05d", j))
			evs = append(evs, outbox.Event{ID: ids[j], Topic: "user.deleted", Payload: []byte(`{}`)})
		}
		if _, err := e.o.Enqueue(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	held, release, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- e.o.Update(context.Background(), func(*outbox.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	if err := e.o.SetSubscriptions(t.Context(), []outbox.Subscription{{Endpoint: "audit", Topics: []string{"user.*"}}}); err != nil {
		t.Fatal(err)
	}
	code, ep := e.get(t, "/v1/endpoints/audit")
	_, st := e.get(t, "/v1/stats")
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if bf, _ := ep["backfill"].(map[string]any); code != http.StatusOK || ep["name"] != "audit" || bf["running"] != true {
		t.Errorf("GET the endpoint during the backfill: %d %v, want it with its backfill running", code, ep)
	}
	if bf, _ := st["backfill"].(map[string]any); st["unrouted"] != float64(n) || bf["running"] != true || bf["remaining"] != float64(n) {
		t.Errorf("stats during the backfill: %v, want %d unrouted, the backfill running", st, n)
	}
	testkit.WaitFor(t, 2*time.Minute, "every event delivered", func() bool { return len(rc.Missing(ids)) == 0 })
	testkit.WaitFor(t, 2*time.Minute, "the backfill to end", func() bool { return !e.o.Stats().Backfill.Running })
	_, ep = e.get(t, "/v1/endpoints/audit")
	if bf, _ := ep["backfill"].(map[string]any); bf["running"] != false || bf["deliveries"] != float64(n) {
		t.Errorf("the endpoint after the backfill: %v, want %d deliveries made", ep, n)
	}
	_, st = e.get(t, "/v1/stats")
	if bf, _ := st["backfill"].(map[string]any); bf["running"] != false || bf["routed"] != float64(n) || bf["deliveries"] != float64(n) || bf["remaining"] != 0.0 {
		t.Errorf("stats after the backfill: %v", st)
	}
}
