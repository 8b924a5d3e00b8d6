package union_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/union"
)

// holdSink retries every delivery. The example's outboxes are not started,
// so it is never called: their events stay pending.
type holdSink struct{}

func (holdSink) Deliver(ctx context.Context, _ *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionRetry, Err: ctx.Err()}
}

// An instance holds its local outbox and the outboxes of the partitions it
// owns; a View answers for all of them, and new events go to the local one.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "union-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	open := func(name string) *outbox.Outbox {
		o, err := outbox.Open(filepath.Join(dir, name), outbox.Config{Sink: holdSink{}})
		if err != nil {
			panic(err)
		}
		return o
	}
	local, partition0, partition1 := open("local.db"), open("orders-0.db"), open("orders-1.db")
	defer local.Stop(context.Background())
	defer partition0.Stop(context.Background())
	defer partition1.Stop(context.Background())
	owned := func() []*outbox.Outbox { return []*outbox.Outbox{partition0, partition1} }
	view := union.New(local, owned)

	ctx := context.Background()
	// The partitions' outboxes take the events of their Kafka partitions,
	// the View's Enqueue (the HTTP API's POST) the local one.
	must := func(_ []string, err error) {
		if err != nil {
			panic(err)
		}
	}
	must(partition0.Ingest(ctx, outbox.Event{ID: "order-1", Destination: "orders"}))
	must(partition1.Ingest(ctx, outbox.Event{ID: "order-3", Destination: "orders"}))
	must(view.Enqueue(ctx, outbox.Event{ID: "order-2", Destination: "orders"}))

	page, next, err := view.List(ctx, outbox.ListOptions{Limit: 2})
	if err != nil {
		panic(err)
	}
	for _, ev := range page {
		fmt.Println(ev.ID, ev.State)
	}
	fmt.Printf("next: %q\n", next)
	if _, err := local.Get(ctx, "order-2"); err == nil {
		fmt.Println("order-2 is in the local outbox")
	}
	ev, _ := view.Get(ctx, "order-3")
	fmt.Println(ev.ID, "found in a partition's outbox")
	fmt.Println("pending:", view.Stats().Pending)
	// Output:
	// order-1 pending
	// order-2 pending
	// next: "order-2"
	// order-2 is in the local outbox
	// order-3 found in a partition's outbox
	// pending: 3
}
