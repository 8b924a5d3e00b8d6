package outbox_test

import (
	"cmp"
	"slices"
	"testing"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// EventHistory gives a topic event's history as the entries of each of its
// deliveries, each naming its endpoint, in LSN order; that of an event kept
// unrouted names no endpoint, and that of an event with a destination
// names no delivery.
func TestEventHistoryMergesDeliveries(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", answerSeq(503))
	crm := testkit.NewReceiver(t, "webhook-id", answerSeq(400))
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing, "crm": crm},
		[]outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.*"}}, {Endpoint: "crm", Topics: []string{"order.*"}}}, nil)
	ctx := t.Context()
	for _, ev := range []outbox.Event{
		{ID: "pay-1", Topic: "order.paid"},
		{ID: "lonely", Topic: "user.left"},
		{ID: "direct", Destination: "billing"},
	} {
		if _, err := o.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, settle, "pay-1 and direct to be tried", func() bool {
		return billing.Attempts("pay-1") > 0 && crm.Attempts("pay-1") > 0 && billing.Attempts("direct") > 0
	})
	history := func(id string) []outbox.ChangelogEntry {
		t.Helper()
		ev, err := o.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := outbox.EventHistory(&ev, o.Changelog().History)
		if err != nil {
			t.Fatal(err)
		}
		return hist
	}

	hist := history("pay-1")
	if !slices.IsSortedFunc(hist, func(a, b outbox.ChangelogEntry) int { return cmp.Compare(a.LSN, b.LSN) }) {
		t.Errorf("pay-1's history is not in LSN order: %+v", hist)
	}
	seen := map[string]bool{}
	for _, en := range hist {
		ep, ok := en.Delivery()
		if !ok {
			t.Errorf("an entry of pay-1 names no delivery: %+v", en)
		}
		seen[ep] = true
	}
	if !seen["billing"] || !seen["crm"] {
		t.Errorf("pay-1's history holds deliveries to %v, want billing and crm", seen)
	}
	lonely := history("lonely")
	if len(lonely) == 0 {
		t.Fatal("the unrouted event has no history")
	}
	for _, en := range lonely {
		if ep, ok := en.Delivery(); !ok || ep != "" {
			t.Errorf("an entry of the unrouted event names delivery %q, %v; want the event kept unrouted", ep, ok)
		}
	}
	direct := history("direct")
	if len(direct) == 0 {
		t.Fatal("direct has no history")
	}
	for _, en := range direct {
		if ep, ok := en.Delivery(); ok {
			t.Errorf("an entry of an event with a destination names delivery to %q", ep)
		}
	}
}
