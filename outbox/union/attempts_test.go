package union_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// Attempts answers from the store that holds the event, whichever it is;
// an event no store knows is ErrNotFound.
func TestAttemptsFromTheStoreThatHoldsTheEvent(t *testing.T) {
	v, all, _ := newView(t, 3)
	put(t, all[2], false, "in-partition")
	testkit.WaitFor(t, settle, "the attempt in the partition store", func() bool {
		as, err := v.Attempts(context.Background(), "in-partition")
		return err == nil && len(as) == 1 && as[0].Status == 503 && as[0].Action == outbox.ActionRetry
	})
	if _, err := v.Attempts(context.Background(), "nowhere"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("Attempts of an unknown event: %v, want ErrNotFound", err)
	}
}
