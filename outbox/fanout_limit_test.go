package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxd/outbox/outbox"
)

// openSubscribed opens an outbox (not started) whose endpoints e0..e(n-1)
// all subscribe to every topic, with MaxDeliveriesPerCall limit (0: the
// default).
func openSubscribed(t *testing.T, n, limit int) *outbox.Outbox {
	t.Helper()
	var subs []outbox.Subscription
	for i := range n {
		subs = append(subs, outbox.Subscription{Endpoint: fmt.Sprintf("e%d", i), Topics: []string{"*"}})
	}
	cfg := testConfig(sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result { return outbox.Result{} }))
	cfg.Subscriptions = subs
	cfg.MaxDeliveriesPerCall = limit
	o, _ := open(t, cfg)
	return o
}

// topicEvents returns n events on topic order.paid.
func topicEvents(n int) []outbox.Event {
	evs := make([]outbox.Event, n)
	for i := range evs {
		evs[i] = outbox.Event{Topic: "order.paid", Payload: []byte(`{}`)}
	}
	return evs
}

// wantTooMany fails t unless err is a *TooManyDeliveriesError counting
// deliveries against limit, whose message names the setting and both.
func wantTooMany(t *testing.T, err error, deliveries, limit int) {
	t.Helper()
	var tm *outbox.TooManyDeliveriesError
	if !errors.Is(err, outbox.ErrTooManyDeliveries) || !errors.As(err, &tm) {
		t.Fatalf("err = %v, want a *TooManyDeliveriesError", err)
	}
	if tm.Deliveries != deliveries || tm.Limit != limit {
		t.Fatalf("err counts %d deliveries over %d, want %d over %d", tm.Deliveries, tm.Limit, deliveries, limit)
	}
	for _, s := range []string{"Config.MaxDeliveriesPerCall", fmt.Sprint(deliveries), fmt.Sprint(limit)} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("err %q does not name %q", err, s)
		}
	}
}

// wantNothingStored fails t unless o holds no event at all.
func wantNothingStored(t *testing.T, o *outbox.Outbox) {
	t.Helper()
	if st := o.Stats(); st.Pending+st.Unrouted+st.Dead != 0 || st.EnqueuedTotal != 0 {
		t.Fatalf("stats after a refused call: %+v, want nothing stored", st)
	}
}

// With ten subscribers and a bound of 25 deliveries, three topic events
// (30 deliveries) are refused whole, destination events counting one each,
// and a call of exactly 25 is stored.
func TestMaxDeliveriesPerCall(t *testing.T) {
	o := openSubscribed(t, 10, 25)
	ctx := t.Context()
	_, err := o.Enqueue(ctx, topicEvents(3)...)
	wantTooMany(t, err, 30, 25)
	_, err = o.Ingest(ctx, append(topicEvents(2), make6Direct()...)...)
	wantTooMany(t, err, 26, 25)
	wantNothingStored(t, o)

	evs := append(topicEvents(2), make6Direct()[:5]...)
	ids, err := o.Enqueue(ctx, evs...)
	if err != nil || len(ids) != 7 {
		t.Fatalf("Enqueue of 25 deliveries = %d IDs, %v; want 7, nil", len(ids), err)
	}
	if st := o.Stats(); st.Pending != 25 {
		t.Fatalf("pending = %d, want 25", st.Pending)
	}
}

// make6Direct returns six events with a destination.
func make6Direct() []outbox.Event {
	evs := make([]outbox.Event, 6)
	for i := range evs {
		evs[i] = outbox.Event{Destination: fmt.Sprintf("d%d", i), Payload: []byte(`{}`)}
	}
	return evs
}

// A negative bound lets a call make any number of deliveries.
func TestMaxDeliveriesPerCallNegativeIsNoBound(t *testing.T) {
	o := openSubscribed(t, 50, -1)
	if _, err := o.Enqueue(t.Context(), topicEvents(300)...); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Pending != 15000 {
		t.Fatalf("pending = %d, want 15000", st.Pending)
	}
}

// The measured case: 1,000 events to 200 subscribers in one call would be
// 200,000 deliveries, refused by the default bound with nothing stored.
func TestMaxDeliveriesPerCallDefaultRefusesLargeFanOut(t *testing.T) {
	o := openSubscribed(t, 200, 0)
	_, err := o.Enqueue(t.Context(), topicEvents(1000)...)
	wantTooMany(t, err, 200_000, outbox.DefaultMaxDeliveriesPerCall)
	wantNothingStored(t, o)
}

// The Tx.Enqueue calls of one Update share the bound: the call that takes
// them over fails, and so does the Update when fn returns its error; the
// application's write in the same transaction is not stored either.
func TestMaxDeliveriesPerCallInUpdate(t *testing.T) {
	o := openSubscribed(t, 10, 25)
	ctx := t.Context()
	err := o.Update(ctx, func(tx *outbox.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("app"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		if _, err := tx.Enqueue(topicEvents(2)...); err != nil {
			return fmt.Errorf("first enqueue: %w", err)
		}
		_, err = tx.Enqueue(topicEvents(1)...)
		wantTooMany(t, err, 30, 25)
		return err
	})
	if !errors.Is(err, outbox.ErrTooManyDeliveries) {
		t.Fatalf("Update = %v, want ErrTooManyDeliveries", err)
	}
	wantNothingStored(t, o)
	err = o.View(ctx, func(tx *outbox.ViewTx) error {
		if tx.Bucket([]byte("app")) != nil {
			return errors.New("the application's bucket was stored")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
