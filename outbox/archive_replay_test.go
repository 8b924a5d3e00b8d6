package outbox_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// waitReplay waits until the replay id has ended and returns its status.
func waitReplay(t *testing.T, o *outbox.Outbox, id string) outbox.ArchiveReplayStatus {
	t.Helper()
	var st outbox.ArchiveReplayStatus
	testkit.WaitFor(t, settle, "the replay to end", func() bool {
		var err error
		if st, err = o.ArchiveReplayStatus(id); err != nil {
			t.Fatal(err)
		}
		return st.State != "running"
	})
	return st
}

// 1,000 archived deliveries to billing are replayed to crm at 200/s: crm
// receives each once, no faster than the pace, billing nothing more; the
// replay's own deliveries, archived in turn, are not replayed again.
func TestArchiveReplayToAnotherEndpoint(t *testing.T) {
	billing := testkit.NewReceiver(t, "webhook-id", nil)
	crm := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"billing": billing, "crm": crm},
		[]outbox.Subscription{{Endpoint: "billing", Topics: []string{"order.*"}}},
		func(c *outbox.Config) { c.Retain = time.Hour })
	ctx := t.Context()
	var evs []outbox.Event
	for i := range 1000 {
		evs = append(evs, outbox.Event{Topic: "order.paid", Key: fmt.Sprintf("cust-%d", i%10), Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	ids, err := o.Enqueue(ctx, evs...)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "1,000 deliveries archived", func() bool { return o.Stats().Archived == 1000 })

	id, err := o.StartArchiveReplay(outbox.ArchiveReplay{Filter: outbox.ArchiveQuery{Topic: "order.*"}, Endpoint: "crm", Rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	st := waitReplay(t, o, id)
	if st.State != "done" || st.Replayed != 1000 || st.Skipped != 0 || st.EndedAt.Before(st.StartedAt) {
		t.Fatalf("replay ended %+v", st)
	}
	testkit.WaitFor(t, settle, "crm to receive every event", func() bool { return len(crm.Missing(ids)) == 0 })
	testkit.WaitFor(t, settle, "the replayed deliveries archived", func() bool { return o.Stats().Archived == 2000 })
	for _, id := range ids {
		if crm.Attempts(id) != 1 || billing.Attempts(id) != 1 {
			t.Fatalf("%s: crm %d, billing %d attempts, want one each", id, crm.Attempts(id), billing.Attempts(id))
		}
	}
	// The pace: 1,000 at 200/s take about 5s; never much less.
	reqs := crm.Requests()
	if span := reqs[len(reqs)-1].At.Sub(reqs[0].At); span < 4*time.Second {
		t.Fatalf("1,000 replayed deliveries arrived within %v, faster than 200/s", span)
	}
	if got := len(searchArchive(t, o, outbox.ArchiveQuery{Endpoint: "crm"})); got != 1000 {
		t.Fatalf("crm's archive holds %d deliveries", got)
	}
}

// A replay can be cancelled: it stores nothing more, and what it stored is
// delivered once.
func TestArchiveReplayCancel(t *testing.T) {
	rc := testkit.NewReceiver(t, "webhook-id", nil)
	o := fanOut(t, map[string]*testkit.Receiver{"a": rc}, nil, func(c *outbox.Config) { c.Retain = time.Hour })
	ctx := t.Context()
	var evs []outbox.Event
	for i := range 200 {
		evs = append(evs, outbox.Event{Destination: "a", Payload: fmt.Appendf(nil, `{"n":%d}`, i)})
	}
	ids, err := o.Enqueue(ctx, evs...)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "200 archived", func() bool { return o.Stats().Archived == 200 })
	id, err := o.StartArchiveReplay(outbox.ArchiveReplay{Rate: 20})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "some replayed", func() bool {
		st, _ := o.ArchiveReplayStatus(id)
		return st.Replayed >= 5
	})
	if err := o.CancelArchiveReplay(id); err != nil {
		t.Fatal(err)
	}
	st := waitReplay(t, o, id)
	if st.State != "cancelled" || st.Replayed >= 200 {
		t.Fatalf("cancelled replay: %+v", st)
	}
	replayed := 0
	testkit.WaitFor(t, settle, "the replayed deliveries made", func() bool {
		replayed = 0
		for _, id := range ids {
			replayed += rc.Attempts(id) - 1
		}
		return replayed == st.Replayed && o.Stats().Pending == 0
	})
	if after, _ := o.ArchiveReplayStatus(id); after.Replayed != st.Replayed {
		t.Fatalf("the replay went on after its cancel: %d then %d", st.Replayed, after.Replayed)
	}
	if err := o.CancelArchiveReplay("no-such"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("cancel of an unknown replay: %v", err)
	}
	if _, err := o.StartArchiveReplay(outbox.ArchiveReplay{Rate: -1}); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("a negative rate: %v", err)
	}
	if _, err := o.StartArchiveReplay(outbox.ArchiveReplay{Endpoint: "nobody"}); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatalf("an unknown endpoint: %v", err)
	}
}
