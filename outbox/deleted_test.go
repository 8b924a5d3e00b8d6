package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// recordingSink succeeds every delivery and remembers the IDs it delivered.
type recordingSink struct {
	mu  sync.Mutex
	ids []string
}

func (s *recordingSink) Deliver(_ context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, d.ID)
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

func (s *recordingSink) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// An event deleted by an operator is reported as deleted, not delivered,
// and enqueueing its ID again is refused with ErrDeleted naming the event
// and when it was deleted; nothing of that call is stored. A delivered ID
// stays a silent duplicate. Ingest, for sources that repeat themselves,
// skips a deleted ID as a duplicate.
func TestDeletedEventIsReportedAndItsIDRefused(t *testing.T) {
	sink := &recordingSink{}
	o, path := open(t, testConfig(sink))
	ctx := context.Background()
	// Not started yet: "parked" stays pending until the operator deletes it.
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "parked", Destination: "orders", Payload: []byte("p")}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC()
	if err := o.Delete(ctx, "parked"); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC()
	if ev, err := o.Get(ctx, "parked"); err != nil || ev.State != outbox.StateDeleted || ev.State.String() != "deleted" {
		t.Fatalf("Get after Delete = %+v, %v; want state deleted", ev, err)
	}
	if st, ok := outbox.ParseState("deleted"); !ok || st != outbox.StateDeleted {
		t.Errorf(`ParseState("deleted") = %v, %v`, st, ok)
	}

	statsBefore := o.Stats()
	_, err := o.Enqueue(ctx,
		outbox.Event{ID: "fresh", Destination: "orders"},
		outbox.Event{ID: "parked", Destination: "orders", Payload: []byte("p")})
	var de *outbox.DeletedError
	if !errors.As(err, &de) || !errors.Is(err, outbox.ErrDeleted) {
		t.Fatalf("Enqueue of a deleted ID: %v; want a *DeletedError", err)
	}
	if errors.Is(err, outbox.ErrConflict) {
		t.Errorf("ErrDeleted also matches ErrConflict: %v", err)
	}
	if de.Index != 1 || de.ID != "parked" || de.DeletedAt.Before(before) || de.DeletedAt.After(after) {
		t.Errorf("DeletedError = %+v; want index 1, ID parked, deleted in [%v, %v]", de, before, after)
	}
	if msg := err.Error(); !strings.Contains(msg, `"parked" was deleted by an operator at `) {
		t.Errorf("message %q does not say the event was deleted", msg)
	}
	if _, err := o.Get(ctx, "fresh"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("a refused call stored its other event: %v", err)
	}
	if s := o.Stats(); s.EnqueuedTotal != statsBefore.EnqueuedTotal || s.DuplicatesTotal != statsBefore.DuplicatesTotal || s.Pending != 0 {
		t.Errorf("a refused call changed the stats: %+v, before %+v", s, statsBefore)
	}

	// Ingest takes the same event for a repeat and skips it.
	ids, err := o.Ingest(ctx, outbox.Event{ID: "parked", Destination: "orders", Payload: []byte("p")})
	if err != nil || len(ids) != 1 || ids[0] != "parked" {
		t.Fatalf("Ingest of a deleted ID = %v, %v; want it skipped", ids, err)
	}
	if s := o.Stats(); s.DuplicatesTotal != statsBefore.DuplicatesTotal+1 || s.Pending != 0 {
		t.Errorf("Ingest of a deleted ID: %+v; want one more duplicate and nothing pending", s)
	}
	// And so does EnqueueDead.
	if _, err := o.EnqueueDead(ctx, outbox.Event{ID: "parked", Destination: "orders", Payload: []byte("p")}, "unmappable"); err != nil {
		t.Fatalf("EnqueueDead of a deleted ID: %v", err)
	}
	if s := o.Stats(); s.Dead != 0 || s.DuplicatesTotal != statsBefore.DuplicatesTotal+2 {
		t.Errorf("EnqueueDead of a deleted ID: %+v; want it skipped as a duplicate", s)
	}

	// A delivered ID is a duplicate: no error, not delivered again.
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "sent", Destination: "orders"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "sent delivered", func() bool { return o.Stats().Pending == 0 && o.Stats().DeliveredTotal == 1 })
	if _, err := o.Enqueue(ctx, outbox.Event{ID: "sent", Destination: "orders"}); err != nil {
		t.Fatalf("Enqueue of a delivered ID: %v; want a silent duplicate", err)
	}
	if ev, err := o.Get(ctx, "sent"); err != nil || ev.State != outbox.StateDelivered {
		t.Fatalf("Get of a delivered event = %+v, %v", ev, err)
	}
	if s := o.Stats(); s.DuplicatesTotal != statsBefore.DuplicatesTotal+3 {
		t.Errorf("Stats = %+v; want the delivered ID counted as a duplicate", s)
	}

	// Both survive a restart.
	stop(t, o)
	o2, err := outbox.Open(path, testConfig(sink))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, o2) })
	if ev, err := o2.Get(ctx, "parked"); err != nil || ev.State != outbox.StateDeleted {
		t.Errorf("after a restart: Get(parked) = %+v, %v", ev, err)
	}
	if _, err := o2.Enqueue(ctx, outbox.Event{ID: "parked", Destination: "orders"}); !errors.Is(err, outbox.ErrDeleted) {
		t.Errorf("after a restart: Enqueue(parked) = %v, want ErrDeleted", err)
	}
	if got := sink.delivered(); len(got) != 1 || got[0] != "sent" {
		t.Errorf("delivered %v, want only sent", got)
	}
}
