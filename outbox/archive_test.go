package outbox_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// searchArchive pages through q and returns every delivery found.
func searchArchive(t testing.TB, o *outbox.Outbox, q outbox.ArchiveQuery) []outbox.ArchivedEvent {
	t.Helper()
	var all []outbox.ArchivedEvent
	for {
		evs, next, err := o.SearchArchive(t.Context(), q)
		if err != nil {
			t.Fatalf("SearchArchive(%+v): %v", q, err)
		}
		all = append(all, evs...)
		if next == "" {
			return all
		}
		q.After = next
	}
}

// With Retain, each delivery of a fan-out event is archived once it is
// delivered, per endpoint: the archive answers what was sent where, and
// nothing archived is delivered again.
func TestRetainArchivesEachDelivery(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	crm := testkit.NewReceiver(t, "webhook-id", answerSeq(404, 200))
	before := time.Now()
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing, "crm": crm},
		[]outbox.Subscription{
			{Endpoint: "billing", Topics: []string{"order.*"}},
			{Endpoint: "crm", Topics: []string{"order.paid", "invoice.sent"}},
		}, func(c *outbox.Config) { c.Retain = time.Hour })
	ctx := t.Context()
	var evs []outbox.Event
	for i := range 30 {
		topic := []string{"order.created", "order.paid", "invoice.sent"}[i%3]
		evs = append(evs, outbox.Event{Topic: topic, Key: fmt.Sprintf("cust-%d", i%4), Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	ids, err := o.Enqueue(ctx, evs...)
	if err != nil {
		t.Fatal(err)
	}
	// order.created and order.paid to billing (20), order.paid and
	// invoice.sent to crm (20).
	testkit.WaitFor(t, settle, "40 deliveries archived", func() bool {
		st := o.Stats()
		return st.Archived == 40 && st.Pending == 0
	})
	orders := searchArchive(t, o, outbox.ArchiveQuery{Topic: "order.*", From: before, Limit: 7})
	if len(orders) != 30 { // 20 to billing, order.paid's 10 to crm
		t.Fatalf("order.* found %d deliveries, want 30", len(orders))
	}
	for _, a := range orders {
		i := slices.Index(ids, a.ID)
		if i < 0 || a.Topic != evs[i].Topic || a.Key != evs[i].Key || string(a.Payload) != string(evs[i].Payload) ||
			a.State != outbox.StateDelivered || a.DeliveredAt.Before(before) {
			t.Fatalf("archived %+v does not match event %d", a, i)
		}
		if a.Endpoint == "crm" && (a.Deliveries != 2 || a.LastStatus != 200) {
			t.Fatalf("crm's delivery after a park: deliveries %d, status %d", a.Deliveries, a.LastStatus)
		}
	}
	if got := searchArchive(t, o, outbox.ArchiveQuery{Endpoint: "crm", KeyPrefix: "cust-1"}); len(got) != 6 {
		t.Fatalf("crm, key cust-1: %d deliveries, want 6", len(got))
	}
	if _, _, err := o.SearchArchive(ctx, outbox.ArchiveQuery{Topic: "order.**"}); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("bad pattern: %v", err)
	}
	if _, _, err := o.SearchArchive(ctx, outbox.ArchiveQuery{After: "garbage"}); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("bad cursor: %v", err)
	}
	// The archive is history: another maintenance pass delivers nothing.
	if err := o.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if n := billing.Attempts(id) + crm.Attempts(id); n > 3 {
			t.Fatalf("event %s sent %d times", id, n)
		}
	}
	if ev, err := o.Get(ctx, ids[0]); err != nil || ev.State != outbox.StateDelivered {
		t.Fatalf("Get of an archived event: %+v, %v", ev.State, err)
	}
}

func TestRetainTrimsByAgeAndSize(t *testing.T) {
	clk := newFakeClock(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"a": rc}, nil, func(c *outbox.Config) {
		c.Retain = time.Hour
		c.Clock = clk
		c.MaintenanceInterval = time.Hour
		c.Interval = time.Millisecond
	})
	ctx := t.Context()
	enqueueDelivered := func(n int) {
		t.Helper()
		for range n {
			if _, err := o.Enqueue(ctx, outbox.Event{Destination: "a", Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	archived := func(n int) func() bool {
		return func() bool {
			clk.Fire()
			return o.Stats().Archived == n
		}
	}
	enqueueDelivered(5)
	testkit.WaitFor(t, settle, "5 archived", archived(5))
	clk.Advance(30 * time.Minute)
	enqueueDelivered(3)
	testkit.WaitFor(t, settle, "8 archived", archived(8))
	clk.Advance(31 * time.Minute)
	if err := o.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Archived != 3 {
		t.Fatalf("after an hour: %d archived, want the last 3", st.Archived)
	}
}

func TestRetainMaxBytesNeedsRetain(t *testing.T) {
	var ce *outbox.ConfigError
	err := outbox.Config{Sink: newWebSink(), RetainMaxBytes: 1 << 20}.Validate()
	if !errors.As(err, &ce) || ce.Field != "RetainMaxBytes" {
		t.Fatalf("RetainMaxBytes without Retain: %v", err)
	}
	if err := (outbox.Config{Sink: newWebSink(), Retain: -time.Hour}).Validate(); !errors.As(err, &ce) || ce.Field != "Retain" {
		t.Fatalf("negative Retain: %v", err)
	}
}
