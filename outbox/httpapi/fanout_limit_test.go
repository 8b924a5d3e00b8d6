package httpapi_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// newFanOutEnv serves an outbox whose n endpoints (all at rc) subscribe to
// every topic, with MaxDeliveriesPerCall limit (0: the default).
func newFanOutEnv(t *testing.T, rc *testkit.Receiver, n, limit int, cfg httpapi.Config) *env {
	t.Helper()
	var eps []httpsink.Endpoint
	var subs []outbox.Subscription
	for i := range n {
		name := fmt.Sprintf("e%d", i)
		eps = append(eps, httpsink.Endpoint{Name: name, URL: rc.URL + "/" + name, AllowPrivate: true})
		subs = append(subs, outbox.Subscription{Endpoint: name, Topics: []string{"*"}})
	}
	sink, err := httpsink.New(httpsink.Config{Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outbox.db"), outbox.Config{
		Sink: sink, Subscriptions: subs, MaxDeliveriesPerCall: limit,
		Interval: 20 * time.Millisecond, NoSync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, o, sink, cfg)
}

// topicBatch returns n events on topic order.paid.
func topicBatch(n int) []map[string]any {
	evs := make([]map[string]any, n)
	for i := range evs {
		evs[i] = map[string]any{"topic": "order.paid", "payload": map[string]int{"order": i}}
	}
	return evs
}

// wantDeliveryLimit fails t unless the answer is a 413 whose error names
// setting, the deliveries and the limit, and nothing is pending.
func wantDeliveryLimit(t *testing.T, e *env, code int, m map[string]any, setting string, deliveries, limit int) {
	t.Helper()
	msg, _ := m["error"].(string)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST = %d %v, want 413", code, m)
	}
	for _, s := range []string{setting, fmt.Sprintf("%d deliveries", deliveries), fmt.Sprintf("limit of %d", limit)} {
		if !strings.Contains(msg, s) {
			t.Fatalf("error %q does not name %q", msg, s)
		}
	}
	if st := e.o.Stats(); st.Pending+st.Unrouted+st.Dead != 0 {
		t.Fatalf("stats after a 413: %+v, want nothing stored", st)
	}
}

// Three endpoints and a bound of six deliveries: three topic events (nine
// deliveries) are a 413 naming the operator's setting, two are stored.
func TestEnqueueOverDeliveryLimitIs413(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", answer(func(*http.Request) int { return http.StatusOK }))
	setting := "limits.max_deliveries_per_request (--max-deliveries-per-request)"
	e := newFanOutEnv(t, rc, 3, 6, httpapi.Config{MaxDeliveriesSetting: setting})
	code, m := e.post(t, "/v1/events", topicBatch(3))
	wantDeliveryLimit(t, e, code, m, setting, 9, 6)
	if code, m := e.post(t, "/v1/events", topicBatch(2)); code != http.StatusAccepted {
		t.Fatalf("POST of six deliveries = %d %v, want 202", code, m)
	}
}

// The measured case: 1,000 events to 200 subscribers in one request, a
// 200,000-delivery commit, is a 413 under the default bound, naming the
// library's setting when the handler is not told another name.
func TestEnqueueLargeFanOutRefusedByDefault(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", answer(func(*http.Request) int { return http.StatusOK }))
	e := newFanOutEnv(t, rc, 200, 0, httpapi.Config{})
	code, m := e.post(t, "/v1/events", topicBatch(1000))
	wantDeliveryLimit(t, e, code, m, httpapi.DefaultMaxDeliveriesSetting, 200_000, outbox.DefaultMaxDeliveriesPerCall)
}
