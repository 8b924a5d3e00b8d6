package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
	"github.com/outboxd/outbox/outbox/union"
)

// topicSubs subscribe hooks and audit to order.*.
var topicSubs = []outbox.Subscription{
	{Endpoint: "hooks", Topics: []string{"order.*"}},
	{Endpoint: "audit", Topics: []string{"order.*"}},
}

// byPath answers audit's requests with audit and the others with hooks.
func byPath(hooks, audit int) testkit.Answer {
	return func(r *http.Request, _ string, _ int) testkit.Reply {
		if r.URL.Path == "/audit" {
			return testkit.Reply{Status: audit}
		}
		return testkit.Reply{Status: hooks}
	}
}

// deliveryState returns the state of the delivery of id to endpoint.
func deliveryState(t *testing.T, o *outbox.Outbox, id, endpoint string) outbox.State {
	t.Helper()
	ev, err := o.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ev.DeliveryStates {
		if d.Endpoint == endpoint {
			return d.State
		}
	}
	return 0
}

var rowRE = regexp.MustCompile(`(?s)<tr>\s*<td data-label="ID">.*?</tr>`)

// The lists show a topic event's deliveries with their topic and endpoint;
// its page shows each delivery, and one dead delivery is replayed, and a
// pending one deleted, from it, leaving the others alone.
func TestTopicEventDeliveries(t *testing.T) {
	// hooks parks (404: pending, no attempt spent), audit refuses (dead).
	e := newEnvWith(t, console.Config{}, byPath(404, 400), topicSubs)
	if _, err := e.o.Enqueue(t.Context(), outbox.Event{ID: "pay-1", Topic: "order.paid", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "audit's delivery dead", func() bool {
		return deliveryState(t, e.o, "pay-1", "audit") == outbox.StateDead
	})
	c := client(t)

	_, body := do(t, c, http.MethodGet, e.base+"/events?topic=order.paid", nil)
	rows := rowRE.FindAllString(body, -1)
	if len(rows) != 1 || !strings.Contains(rows[0], `class="topic">order.paid<`) || !strings.Contains(rows[0], `class="endpoint">hooks<`) {
		t.Errorf("pending of order.paid: want hooks's delivery with its topic and endpoint, got rows %q", rows)
	}
	_, body = do(t, c, http.MethodGet, e.base+"/dead?topic=order.paid", nil)
	rows = rowRE.FindAllString(body, -1)
	if len(rows) != 1 || !strings.Contains(rows[0], `class="endpoint">audit<`) || !strings.Contains(rows[0], `name="endpoint" value="audit"`) {
		t.Errorf("dead of order.paid: want audit's delivery, with its actions on that delivery, got rows %q", rows)
	}
	if resp, body := do(t, c, http.MethodGet, e.base+"/events?topic=order..paid", nil); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "topic: &#34;order..paid&#34; has an empty segment") {
		t.Errorf("a malformed topic filter: %d, want 400 naming the topic:\n%s", resp.StatusCode, body)
	}

	_, page := do(t, c, http.MethodGet, e.base+"/event?id=pay-1", nil)
	for _, want := range []string{`id="event-topic">POST to order.paid<`, `id="deliveries"`, `class="endpoint">audit<`, `class="endpoint">hooks<`,
		`<span class="state dead">dead</span>`, `<span class="state pending">pending</span>`, `<span class="endpoint">to audit</span>`,
		`to audit: enqueued: POST to audit`, `to hooks: enqueued: POST to hooks`, `to audit: became a dead letter`} {
		if !strings.Contains(page, want) {
			t.Errorf("the event page lacks %q:\n%s", want, page)
		}
	}

	e.rcv.SetAnswer(byPath(404, 404)) // the replayed delivery stays pending
	if !strings.Contains(page, `name="topic" value="order.paid"><button type="submit" class="danger">Delete every delivery…`) {
		t.Errorf("the event page's delete does not say it deletes every delivery:\n%s", page)
	}
	if resp, body := do(t, c, http.MethodPost, e.base+"/action", url.Values{"csrf": {csrfOf(t, page)}, "do": {"delete"}, "id": {"pay-1"}, "topic": {"order.paid"}}); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, "Delete event &#34;pay-1&#34; and every one of its deliveries?") {
		t.Errorf("delete of the whole topic event, first step: %d, want the confirmation saying so:\n%s", resp.StatusCode, body)
	}
	f := url.Values{"csrf": {csrfOf(t, page)}, "do": {"replay"}, "id": {"pay-1"}, "endpoint": {"audit"}}
	confirmAction(t, e, c, f, "Replay the dead delivery of event &#34;pay-1&#34; to endpoint &#34;audit&#34;")
	if st := deliveryState(t, e.o, "pay-1", "audit"); st != outbox.StatePending {
		t.Errorf("audit's delivery after its replay: %v, want pending", st)
	}
	f = url.Values{"csrf": {csrfOf(t, page)}, "do": {"delete"}, "id": {"pay-1"}, "endpoint": {"hooks"}, "confirm": {"yes"}}
	if resp, body := do(t, c, http.MethodPost, e.base+"/action", f); resp.StatusCode != http.StatusSeeOther ||
		!strings.Contains(resp.Header.Get("Location"), "done=deleted-delivery") {
		t.Fatalf("delete of a delivery: %d %q:\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if st := deliveryState(t, e.o, "pay-1", "hooks"); st != outbox.StateDeleted {
		t.Errorf("hooks's delivery after its delete: %v, want deleted", st)
	}
	if st := deliveryState(t, e.o, "pay-1", "audit"); st != outbox.StatePending {
		t.Errorf("audit's delivery after hooks's delete: %v, want still pending", st)
	}
}

// An event on a topic nobody subscribes to is listed as unrouted, and its
// page says so.
func TestUnroutedEventIsListed(t *testing.T) {
	e := newEnvWith(t, console.Config{}, nil, topicSubs)
	if _, err := e.o.Enqueue(t.Context(), outbox.Event{ID: "lonely", Topic: "user.deleted"}); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	_, body := do(t, c, http.MethodGet, e.base+"/events?state=unrouted", nil)
	rows := rowRE.FindAllString(body, -1)
	if len(rows) != 1 || !strings.Contains(rows[0], ">lonely<") || !strings.Contains(rows[0], `class="topic">user.deleted<`) ||
		!strings.Contains(body, "<th>Kept until</th>") {
		t.Errorf("unrouted: want lonely with its topic and when it stops being kept, got rows %q", rows)
	}
	if _, body := do(t, c, http.MethodGet, e.base+"/events", nil); strings.Contains(body, ">lonely<") {
		t.Error("the unrouted event is listed among the pending ones")
	}
	if _, body := do(t, c, http.MethodGet, e.base+"/", nil); !strings.Contains(body, `href="/ui/events?state=unrouted"><span class="n" id="unrouted">1</span>`) {
		t.Errorf("the overview does not link the unrouted count:\n%s", body)
	}
	_, page := do(t, c, http.MethodGet, e.base+"/event?id=lonely", nil)
	if !strings.Contains(page, `<dd id="event-state" class="state unrouted">unrouted</dd>`) ||
		!strings.Contains(page, "no endpoint subscribes to its topic; kept until") ||
		!strings.Contains(page, "unrouted: enqueued, 0-byte payload; no endpoint subscribes to user.deleted") {
		t.Errorf("the unrouted event's page does not say it is unrouted:\n%s", page)
	}
}

// Over a union of stores (Kafka group mode), a topic event held by a
// partition's store shows its deliveries and its history, delivery by
// delivery, and one delivery is deleted from its page.
func TestTopicEventOverUnion(t *testing.T) {
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "hooks", URL: "https://hooks.example/"}, {Name: "audit", URL: "https://audit.example/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	// A partition's store, not started: its deliveries stay pending.
	part, err := outbox.Open(filepath.Join(t.TempDir(), "part.db"), outbox.Config{Sink: sink, Subscriptions: topicSubs, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Stop(context.Background())
	if _, err := part.Enqueue(t.Context(), outbox.Event{ID: "pay-9", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	primary := newEnv(t, console.Config{}, nil)
	con, err := console.New(union.New(primary.o, func() []*outbox.Outbox { return []*outbox.Outbox{part} }), console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	mux := http.NewServeMux()
	mux.Handle("/ui/", con)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := client(t)

	_, page := do(t, c, http.MethodGet, srv.URL+"/ui/event?id=pay-9", nil)
	for _, want := range []string{`id="deliveries"`, `class="endpoint">audit<`, `class="endpoint">hooks<`,
		`to audit: enqueued: POST to audit`, `to hooks: enqueued: POST to hooks`} {
		if !strings.Contains(page, want) {
			t.Errorf("the event page over the union lacks %q:\n%s", want, page)
		}
	}
	f := url.Values{"csrf": {csrfOf(t, page)}, "do": {"delete"}, "id": {"pay-9"}, "endpoint": {"audit"}, "confirm": {"yes"}}
	if resp, body := do(t, c, http.MethodPost, srv.URL+"/ui/action", f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete of a delivery over the union: %d:\n%s", resp.StatusCode, body)
	}
	if st := deliveryState(t, part, "pay-9", "audit"); st != outbox.StateDeleted {
		t.Errorf("audit's delivery in its store: %v, want deleted", st)
	}
}

// While the backfill of a new subscription runs (its commits held, so that
// it cannot end first), the overview says so, with its progress.
func TestOverviewShowsBackfill(t *testing.T) {
	e := newEnvWith(t, console.Config{}, nil, nil)
	var evs []outbox.Event
	for i := range 300 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("ev-%03d", i), Topic: "user.deleted"})
	}
	if _, err := e.o.Enqueue(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	held, release, errc := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		errc <- e.o.Update(context.Background(), func(*outbox.Tx) error { close(held); <-release; return nil })
	}()
	<-held
	if err := e.o.SetSubscriptions(t.Context(), []outbox.Subscription{{Endpoint: "hooks", Topics: []string{"user.*"}}}); err != nil {
		t.Fatal(err)
	}
	_, body := do(t, client(t), http.MethodGet, e.base+"/", nil)
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `<p class="notice" id="backfill">Routing the waiting unrouted events to new subscriptions: 0 routed so far (0 deliveries), 300 still unrouted.</p>`) {
		t.Errorf("the overview does not show the backfill:\n%s", body)
	}
}
