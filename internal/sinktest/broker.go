package sinktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// Published is one record a broker holds, as a broker sink published it.
type Published struct {
	// ID is the value of the header consumers deduplicate on.
	ID string
	// Key is the record's key.
	Key string
	// Payload is the record's value.
	Payload []byte
	// Headers are the record's headers, by name.
	Headers map[string]string
}

// Broker is a sink under test that publishes to a message broker, and the
// means to look at that broker.
type Broker struct {
	// Sink publishes the destination Destination to the broker.
	Sink outbox.Sink
	// Published returns every record the broker holds for Destination,
	// in the order of one partition when the records share a key.
	Published func(t *testing.T) []Published
	// Stall makes the broker take produce requests and answer none until
	// resume is called (the suite calls it before the test ends); arrived
	// receives when a request is held.
	Stall func() (arrived <-chan struct{}, resume func())
}

// BrokerFactory builds the broker sink under test for one test; with
// unreachable, the sink's broker address is one where nothing listens
// (Published and Stall are then not used). The suite closes nothing: the
// factory registers the cleanup with t.
type BrokerFactory func(t *testing.T, unreachable bool) Broker

// RunBroker runs the suite of a sink that publishes to a broker rather
// than to an HTTP receiver: the record carries the payload verbatim, the
// event's headers and its ID; a broker that cannot be reached is a retry
// with the error; a cancelled context ends a delivery the broker does not
// answer, as a retry; and concurrent deliveries are each published once.
func RunBroker(t *testing.T, newSink BrokerFactory) {
	t.Run("Success", func(t *testing.T) { testBrokerSuccess(t, newSink) })
	t.Run("Unreachable", func(t *testing.T) { testBrokerUnreachable(t, newSink) })
	t.Run("Cancel", func(t *testing.T) { testBrokerCancel(t, newSink) })
	t.Run("Concurrent", func(t *testing.T) { testBrokerConcurrent(t, newSink) })
}

func testBrokerSuccess(t *testing.T, newSink BrokerFactory) {
	b := newSink(t, false)
	d := delivery("evt-1")
	d.Key = "order-42"
	if res := b.Sink.Deliver(context.Background(), d); res.Action != outbox.ActionSuccess {
		t.Fatalf("%+v, want ActionSuccess", res)
	}
	got := b.Published(t)
	if len(got) != 1 {
		t.Fatalf("%d records published, want 1: %+v", len(got), got)
	}
	r := got[0]
	if r.ID != d.ID || r.Key != d.Key || string(r.Payload) != string(d.Payload) {
		t.Errorf("published ID %q key %q payload %q; want %q, %q, %q", r.ID, r.Key, r.Payload, d.ID, d.Key, d.Payload)
	}
	if r.Headers["X-Tenant"] != "acme" {
		t.Errorf("the event's header is missing: %v", r.Headers)
	}
}

func testBrokerUnreachable(t *testing.T, newSink BrokerFactory) {
	b := newSink(t, true)
	res := b.Sink.Deliver(context.Background(), delivery("evt-refused"))
	if res.Action != outbox.ActionRetry || res.Status != 0 || res.Err == nil {
		t.Fatalf("unreachable broker: %+v, want ActionRetry with status 0 and the error", res)
	}
}

func testBrokerCancel(t *testing.T, newSink BrokerFactory) {
	b := newSink(t, false)
	// A first delivery, so that the sink knows the topic before the
	// broker stalls.
	if res := b.Sink.Deliver(context.Background(), delivery("evt-first")); res.Action != outbox.ActionSuccess {
		t.Fatalf("first delivery: %+v", res)
	}
	arrived, resume := b.Stall()
	defer resume()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Result, 1)
	go func() { done <- b.Sink.Deliver(ctx, delivery("evt-hang")) }()
	<-arrived
	cancel()
	select {
	case res := <-done:
		if res.Action != outbox.ActionRetry {
			t.Fatalf("cancelled delivery: %+v, want a retry", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Deliver did not return after its context was cancelled")
	}
}

func testBrokerConcurrent(t *testing.T, newSink BrokerFactory) {
	const n = 32
	b := newSink(t, false)
	var wg sync.WaitGroup
	results := make([]outbox.Result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = b.Sink.Deliver(context.Background(), delivery(fmt.Sprintf("evt-%02d", i)))
		})
	}
	wg.Wait()
	seen := map[string]int{}
	testkit.WaitFor(t, 10*time.Second, "every record readable", func() bool {
		clear(seen)
		for _, r := range b.Published(t) {
			seen[r.ID]++
		}
		return len(seen) == n
	})
	for i, res := range results {
		id := fmt.Sprintf("evt-%02d", i)
		if res.Action != outbox.ActionSuccess || seen[id] != 1 {
			t.Errorf("%s: %+v, published %d times; want once", id, res, seen[id])
		}
	}
}
