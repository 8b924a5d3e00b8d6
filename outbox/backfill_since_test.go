package outbox_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// A subscription made with a since time receives the matching events
// created since then, once each, whether they were delivered to another
// endpoint (archived) or are still pending for one, then the new ones as
// they come; older events and other topics are not sent.
func TestSubscribeSinceBackfillsArchivedAndPendingOnce(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	stuck := testkit.NewReceiver(t, "webhook-id", answerSeq(404)) // parks: its deliveries stay pending
	crm := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing, "stuck": stuck, "crm": crm},
		[]outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.*"}},
			{Endpoint: "stuck", Topics: []string{"order.paid"}},
		}, func(c *outbox.Config) { c.Retain = time.Hour; c.ParkInterval = time.Hour })
	ctx := t.Context()
	enqueue := func(topics ...string) []string {
		t.Helper()
		var evs []outbox.Event
		for i, topic := range topics {
			evs = append(evs, outbox.Event{Topic: topic, Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		ids, err := o.Enqueue(ctx, evs...)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	old := enqueue("order.created", "order.created", "order.paid")
	testkit.WaitFor(t, settle, "the old events delivered to billing", func() bool { return len(billing.Missing(old)) == 0 })
	since := time.Now()
	var topics []string
	for i := range 90 {
		topics = append(topics, []string{"order.created", "order.paid", "invoice.sent"}[i%3])
	}
	ids := enqueue(topics...)
	var want []string // order.created and order.paid
	for i, id := range ids {
		if i%3 != 2 {
			want = append(want, id)
		}
	}
	testkit.WaitFor(t, settle, "billing received the new events", func() bool { return len(billing.Missing(want)) == 0 })

	job, err := o.SubscribeSince(ctx, outbox.Subscription{Endpoint: "crm", Topics: []string{"order.*"}}, since, 500)
	if err != nil {
		t.Fatal(err)
	}
	st := waitReplay(t, o, job)
	if st.State != "done" || st.Replayed != 60 {
		t.Fatalf("backfill ended %+v, want 60 deliveries queued", st)
	}
	testkit.WaitFor(t, settle, "crm received the last hour's order events", func() bool { return len(crm.Missing(want)) == 0 })
	later := enqueue("order.paid", "order.created", "invoice.sent")
	testkit.WaitFor(t, settle, "crm received the new order events", func() bool { return len(crm.Missing(later[:2])) == 0 })
	for _, id := range append(want, later[:2]...) {
		if n := crm.Attempts(id); n != 1 {
			t.Fatalf("crm received %s %d times", id, n)
		}
	}
	for _, id := range append(old, later[2]) {
		if n := crm.Attempts(id); n != 0 {
			t.Fatalf("crm received %s, older than since or on another topic", id)
		}
	}
	// Again from the same time: everything is known at crm, nothing is sent twice.
	job, err = o.SubscribeSince(ctx, outbox.Subscription{Endpoint: "crm", Topics: []string{"order.*", "order.paid"}}, since, 500)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitReplay(t, o, job); st.State != "done" || st.Replayed != 0 {
		t.Fatalf("a second backfill: %+v, want nothing queued", st)
	}
	if _, err := o.SubscribeSince(ctx, outbox.Subscription{Endpoint: "crm"}, since, 0); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("a subscription without topics: %v", err)
	}
}
