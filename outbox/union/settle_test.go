package union_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/union"
)

// gate is a settle func that holds every call until the test releases it,
// as Group.WaitShipped holds a write until its store's changelog is
// shipped.
type gate struct {
	calls   chan *outbox.Outbox // the outbox of each call, sent when it starts
	release chan error          // what the held call returns
}

func newGate() *gate {
	return &gate{calls: make(chan *outbox.Outbox), release: make(chan error)}
}

func (g *gate) settle(ctx context.Context, o *outbox.Outbox) error {
	select {
	case g.calls <- o:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-g.release:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// settleView returns a View over a primary and a partition store (the
// second outbox) settled by a gate. The partition store holds a pending
// event "pend-1", dead events "dead-1" and "dead-2", and a topic event
// "pay-1" whose delivery to crm is dead and whose others are pending;
// billing has an endpoint state there.
func settleView(t *testing.T) (*union.View, []*outbox.Outbox, *gate) {
	t.Helper()
	s := newSink()
	s.set(func(d *outbox.Delivery) outbox.Result {
		if d.Endpoint == "crm" {
			return outbox.Result{Action: outbox.ActionDead, Status: 400}
		}
		return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
	})
	v, all := newTopicView(t, 2, s)
	put(t, all[1], false, "pend-1")
	put(t, all[1], true, "dead-1", "dead-2")
	if _, err := all[1].Enqueue(context.Background(), outbox.Event{ID: "pay-1", Topic: "order.paid"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "crm's delivery dead and billing attempted", func() bool {
		eps, err := all[1].Endpoints(context.Background())
		return err == nil && all[1].Stats().Dead == 3 &&
			slices.ContainsFunc(eps, func(e outbox.EndpointState) bool { return e.Name == "billing" && e.LastStatus == 503 })
	})
	// From now on nothing dies by itself: what a replay made pending stays so.
	s.set(func(*outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionRetry, Status: 503, RetryAfter: time.Hour}
	})
	g := newGate()
	return v.WithSettle(g.settle), all, g
}

// stateOf is the state of event id in o, or of its delivery to endpoint
// when endpoint is not "".
func stateOf(t *testing.T, o *outbox.Outbox, id, endpoint string) outbox.State {
	t.Helper()
	ev, err := o.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if endpoint == "" {
		return ev.State
	}
	for _, d := range ev.DeliveryStates {
		if d.Endpoint == endpoint {
			return d.State
		}
	}
	t.Fatalf("%s has no delivery to %s", id, endpoint)
	return 0
}

// Every write of a settled View is answered only after settle accepted the
// store the write changed, and settle sees the change made: in Kafka group
// mode a replay, an endpoint retry or a delete is answered once it is in
// the changelog topic, so that a crash cannot undo it.
func TestEveryWriteIsAnsweredOnceSettled(t *testing.T) {
	v, all, g := settleView(t)
	ctx := context.Background()
	primary, partition := all[0], all[1]
	writes := []struct {
		name  string
		store *outbox.Outbox // the store the write changes
		call  func() error
		made  func() bool // whether the change is in the store; nil: not seen from outside
	}{
		{"Enqueue", primary, func() error {
			_, err := v.Enqueue(ctx, outbox.Event{ID: "new-1", Destination: "orders"})
			return err
		}, func() bool { return stateOf(t, primary, "new-1", "") == outbox.StatePending }},
		{"Delete", partition, func() error { return v.Delete(ctx, "pend-1") },
			func() bool { return stateOf(t, partition, "pend-1", "") == outbox.StateDeleted }},
		{"Replay", partition, func() error { return v.Replay(ctx, "dead-1") },
			func() bool { return stateOf(t, partition, "dead-1", "") == outbox.StatePending }},
		{"DeleteDelivery", partition, func() error { return v.DeleteDelivery(ctx, "pay-1", "mail") },
			func() bool { return stateOf(t, partition, "pay-1", "mail") == outbox.StateDeleted }},
		{"ReplayDelivery", partition, func() error { return v.ReplayDelivery(ctx, "pay-1", "crm") },
			func() bool { return stateOf(t, partition, "pay-1", "crm") == outbox.StatePending }},
		{"ReplayDead", partition, func() error {
			n, err := v.ReplayDead(ctx, outbox.ReplayFilter{KeyPrefix: "k-dead-2", Rate: outbox.MaxRate})
			if err == nil && n != 1 {
				t.Errorf("ReplayDead replayed %d, want 1", n)
			}
			return err
		}, func() bool { return stateOf(t, partition, "dead-2", "") == outbox.StatePending }},
		{"EnableEndpoint", partition, func() error { return v.EnableEndpoint(ctx, "billing") }, nil},
		{"RetryEndpoint", partition, func() error {
			_, err := v.RetryEndpoint(ctx, "billing", 0)
			return err
		}, nil},
	}
	for _, w := range writes {
		done := make(chan error, 1)
		go func() { done <- w.call() }()
		var settled []*outbox.Outbox
	answer:
		for {
			select {
			case o := <-g.calls:
				select {
				case err := <-done:
					t.Fatalf("%s answered (%v) while its settle was held", w.name, err)
				default:
				}
				if o == w.store && w.made != nil && !w.made() {
					t.Errorf("%s settled its store before changing it", w.name)
				}
				settled = append(settled, o)
				g.release <- nil
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", w.name, err)
				}
				break answer
			case <-time.After(settle):
				t.Fatalf("%s neither settled nor answered", w.name)
			}
		}
		if !slices.Contains(settled, w.store) {
			t.Errorf("%s answered without settling the store it changed", w.name)
		}
	}
}

// A settle error is the write's (it was made, but is not known to be
// settled, and the caller hears so); a write that changes nothing does
// not wait for settle.
func TestSettleErrorIsTheWritesAndAFailedWriteDoesNotSettle(t *testing.T) {
	v, all, g := settleView(t)
	ctx := context.Background()
	notShipped := errors.New("changelog not shipped")
	done := make(chan error, 1)
	go func() { done <- v.Replay(ctx, "dead-1") }()
	select {
	case o := <-g.calls:
		if o != all[1] {
			t.Errorf("Replay settled another store than the one that holds the event")
		}
	case err := <-done:
		t.Fatalf("Replay answered (%v) without settling", err)
	}
	g.release <- notShipped
	if err := <-done; !errors.Is(err, notShipped) {
		t.Errorf("Replay with a failing settle: %v, want its error", err)
	}
	if st := stateOf(t, all[1], "dead-1", ""); st != outbox.StatePending {
		t.Errorf("dead-1 is %v after the replay, want pending", st)
	}

	v = v.WithSettle(func(_ context.Context, o *outbox.Outbox) error {
		t.Errorf("a write that changed nothing waited for settle")
		return nil
	})
	if err := v.Replay(ctx, "pend-1"); !errors.Is(err, outbox.ErrNotDead) {
		t.Errorf("Replay of a pending event: %v, want ErrNotDead", err)
	}
	if err := v.Delete(ctx, "nope"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("Delete of an unknown event: %v, want ErrNotFound", err)
	}
	if n, err := v.ReplayDead(ctx, outbox.ReplayFilter{KeyPrefix: "nothing-"}); n != 0 || err != nil {
		t.Errorf("ReplayDead of nothing: %d, %v; want 0 and no error", n, err)
	}
	if err := v.EnableEndpoint(ctx, "nowhere"); !errors.Is(err, outbox.ErrNotFound) {
		t.Errorf("EnableEndpoint of an unknown endpoint: %v, want ErrNotFound", err)
	}
}
