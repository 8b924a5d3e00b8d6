package outbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// List keeps the events whose key starts with KeyPrefix and that were
// created in [CreatedFrom, CreatedTo), across pages.
func TestListByKeyPrefixAndCreationTime(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	o, _ := open(t, outbox.Config{Sink: nopSink, Clock: clock})
	ctx := context.Background()
	for i, key := range []string{"cust-1", "cust-12", "shop-1", "cust-2"} {
		if _, err := o.Enqueue(ctx, outbox.Event{ID: "e" + string(rune('a'+i)), Key: key, Destination: "d", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		opt  outbox.ListOptions
		want []string
	}{
		{outbox.ListOptions{KeyPrefix: "cust-1"}, []string{"ea", "eb"}},
		{outbox.ListOptions{KeyPrefix: "cust-"}, []string{"ea", "eb", "ed"}},
		{outbox.ListOptions{CreatedFrom: start.Add(time.Minute), CreatedTo: start.Add(3 * time.Minute)}, []string{"eb", "ec"}},
		{outbox.ListOptions{KeyPrefix: "cust-", CreatedFrom: start.Add(2 * time.Minute)}, []string{"ed"}},
		{outbox.ListOptions{KeyPrefix: "cust-", Limit: 1}, []string{"ea", "eb", "ed"}},
	} {
		var got []string
		opt := tc.opt
		for {
			evs, next, err := o.List(ctx, opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				got = append(got, ev.ID)
			}
			if next == "" {
				break
			}
			opt.After = next
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%+v) = %v, want %v", tc.opt, got, tc.want)
		}
	}
}
