package union_test

import (
	"context"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// History finds an event's changelog in whichever store holds it, and an
// unknown ID has none. The stores are running, so the pending event may
// already have been tried and rescheduled: its history starts with the
// enqueue.
func TestHistoryFromTheStoreThatHoldsIt(t *testing.T) {
	v, all, _ := newView(t, 3)
	put(t, all[2], true, "far")
	put(t, all[0], false, "near")
	ctx := context.Background()
	es, err := v.History(ctx, "far")
	if err != nil || len(es) != 1 || es[0].Op != outbox.OpDead || es[0].ID != "far" {
		t.Fatalf("History(far) = %+v, %v; want one dead entry", es, err)
	}
	if es, err = v.History(ctx, "near"); err != nil || len(es) == 0 || es[0].Op != outbox.OpEnqueue {
		t.Fatalf("History(near) = %+v, %v; want it to start with the enqueue", es, err)
	}
	for _, e := range es {
		if e.ID != "near" {
			t.Fatalf("History(near) holds an entry of %q: %+v", e.ID, es)
		}
	}
	if es, err = v.History(ctx, "nowhere"); err != nil || len(es) != 0 {
		t.Fatalf("History(nowhere) = %+v, %v; want none", es, err)
	}
}
