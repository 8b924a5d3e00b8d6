package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// An outbox that is never started but kept applying a shipped changelog
// (a standby copy) trims its own changelog when Maintain runs, as a
// started one does by itself: it keeps at most ChangelogMaxEntries.
func TestMaintainTrimsTheChangelogOfAnOutboxNotStarted(t *testing.T) {
	ctx := context.Background()
	src, _ := open(t, testConfig(&recordingSink{}))
	var evs []outbox.Event
	for i := range 50 {
		evs = append(evs, outbox.Event{ID: fmt.Sprintf("e-%02d", i), Destination: "orders", Payload: []byte("{}")})
	}
	if _, err := src.Enqueue(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	entries, err := src.Changelog().Entries(0, 1000)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(&recordingSink{})
	cfg.ChangelogMaxEntries = 10
	copyOf, _ := open(t, cfg)
	if err := copyOf.Restore(ctx, entries); err != nil {
		t.Fatal(err)
	}
	cl := copyOf.Changelog()
	if err := cl.MarkShipped(ctx, cl.LastLSN()); err != nil {
		t.Fatal(err)
	}
	if err := copyOf.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	kept, err := cl.Entries(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > 10 {
		t.Errorf("%d changelog entries kept after Maintain, want at most 10", len(kept))
	}
	if got, _, err := copyOf.List(ctx, outbox.ListOptions{Limit: 1000}); err != nil || len(got) != len(evs) {
		t.Errorf("the copy holds %d events (%v), want every one of the %d", len(got), err, len(evs))
	}

	stop(t, copyOf)
	if err := copyOf.Maintain(ctx); !errors.Is(err, outbox.ErrClosed) {
		t.Errorf("Maintain after Stop: %v, want ErrClosed", err)
	}
}
