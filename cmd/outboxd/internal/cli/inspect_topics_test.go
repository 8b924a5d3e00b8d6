package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// topicFile runs an outbox whose endpoints billing (503: pending) and crm
// (400: dead) subscribe to order.*, enqueues a topic event pay-1 and an
// event on a topic nobody subscribes to (lonely), waits for crm's delivery
// to be dead, stops, and opens the file read-only as inspect does.
func topicFile(t *testing.T) *outbox.Outbox {
	t.Helper()
	status := map[string]int{"/billing": http.StatusServiceUnavailable, "/crm": http.StatusBadRequest}
	rcv := testkit.NewReceiver(t, "webhook-id", func(r *http.Request, _ string, _ int) testkit.Reply {
		return testkit.Reply{Status: status[r.URL.Path]}
	})
	sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "billing", URL: rcv.URL + "/billing", AllowPrivate: true},
		{Name: "crm", URL: rcv.URL + "/crm", AllowPrivate: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := outbox.Open(path, outbox.Config{
		Sink: sink, NoSync: true, Interval: 20 * time.Millisecond, BackoffInitial: time.Hour, BackoffMax: time.Hour,
		Subscriptions: []outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.*"}},
			{Endpoint: "crm", Topics: []string{"order.*"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "pay-1", Topic: "order.paid", Key: "o-1"},
		outbox.Event{ID: "lonely", Topic: "user.deleted"},
		outbox.Event{ID: "direct", Destination: "billing"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "crm's delivery dead and billing's tried", func() bool {
		return o.Stats().Dead == 1 && rcv.Attempts("pay-1") >= 2
	})
	if err := o.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return openReadOnly(t, path)
}

// spaces matches runs of the blanks tabwriter aligns columns with.
var spaces = regexp.MustCompile(` {2,}`)

// inspect lists each delivery of a topic event with its topic and endpoint,
// and the unrouted event apart; --id shows every delivery of the event.
func TestInspectShowsTopicsAndDeliveries(t *testing.T) {
	ro := topicFile(t)
	var out bytes.Buffer
	if err := inspectSummary(&out, ro, listFilter{}, 20, false); err != nil {
		t.Fatal(err)
	}
	text := spaces.ReplaceAllString(out.String(), " | ")
	for _, want := range []string{
		"pending 2, dead 1, unrouted 1,",
		"backfill: 1 topic events wait for a subscription;",
		" | ID | DESTINATION | TOPIC | ENDPOINT | ATTEMPTS | NEXT ATTEMPT | LAST",
		" | direct | billing | - | billing | 1 |",
		" | pay-1 | - | order.paid | billing | 1 |",
		" | pay-1 | - | order.paid | crm | 1 |",
		"unrouted events (first 20 by ID):",
		" | lonely | user.deleted | - |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := inspectSummary(&out, ro, listFilter{only: "pending", topic: "order.paid"}, 20, false); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "pending events of topic order.paid") || strings.Contains(s, "direct") ||
		strings.Contains(s, "lonely") || !strings.Contains(s, "billing") {
		t.Errorf("inspect --state pending --topic order.paid:\n%s", s)
	}

	out.Reset()
	if err := inspectEvent(&out, ro, "pay-1", false); err != nil {
		t.Fatal(err)
	}
	text = spaces.ReplaceAllString(out.String(), " | ")
	for _, want := range []string{
		"event pay-1: pending",
		" | topic | order.paid",
		"deliveries (2, one per subscribed endpoint):",
		" | billing | pending | 1 |",
		" | crm | dead | 1 | - | dead ",
		"(delivery 1 to crm)",
		"to crm: enqueued: POST to crm, 0-byte payload, key o-1",
		"to crm: dead after delivery 1: ",
		"to billing: attempt 1 failed, will retry: status 503",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect --id pay-1 lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	if err := inspectEvent(&out, ro, "pay-1", true); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Event struct {
			Topic          string
			DeliveryStates []struct{ Endpoint, State string } `json:"delivery_states"`
		}
		Attempts []struct{ Endpoint string }
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Event.Topic != "order.paid" || len(v.Event.DeliveryStates) != 2 || v.Event.DeliveryStates[1].Endpoint != "crm" ||
		v.Event.DeliveryStates[1].State != "dead" || len(v.Attempts) < 2 || v.Attempts[0].Endpoint == "" {
		t.Errorf("inspect --id pay-1 --json: %s", out.String())
	}

	out.Reset()
	if err := inspectEvent(&out, ro, "lonely", false); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "event lonely: unrouted (no endpoint subscribes to its topic yet)\n") ||
		!strings.Contains(s, "deliveries: none, unrouted: no endpoint subscribes to user.deleted") ||
		!strings.Contains(s, "unrouted: enqueued, 0-byte payload; no endpoint subscribes to user.deleted") {
		t.Errorf("inspect --id lonely:\n%s", s)
	}
}

// --unrouted is --state unrouted; with another --state, or a bad --topic,
// it is a usage error.
func TestInspectUnroutedFlags(t *testing.T) {
	ro := topicFile(t)
	path := ro.Path()
	if err := ro.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	e := Env{Stdout: &stdout, Stderr: &stderr}
	if code := inspect(e, []string{"--db", path, "--unrouted"}); code != exitOK {
		t.Fatalf("inspect --unrouted: exit %d: %s", code, stderr.String())
	}
	if s := stdout.String(); !strings.Contains(s, "lonely") || strings.Contains(s, "pending events") {
		t.Errorf("inspect --unrouted:\n%s", s)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--unrouted", "--state", "dead"}, "--unrouted and --state dead: give one of the two"},
		{[]string{"--topic", "order.*"}, `--topic "order.*": character "*"`},
		{[]string{"--state", "routed"}, "--state: want pending, dead or unrouted"},
	} {
		stderr.Reset()
		if code := inspect(e, append([]string{"--db", path}, c.args...)); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("inspect %v: exit %d, %q; want a usage error with %q", c.args, code, stderr.String(), c.want)
		}
	}
}
