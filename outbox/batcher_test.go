package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox"
)

// batchingSink holds every delivery until released, counting those in
// flight by endpoint; it reports the endpoint "batch" as batching.
type batchingSink struct {
	mu       sync.Mutex
	inFlight map[string]int
	peak     map[string]int
	release  chan struct{}
}

func (s *batchingSink) Batches(endpoint string) bool { return endpoint == "batch" }

func (s *batchingSink) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	s.mu.Lock()
	s.inFlight[d.Endpoint]++
	s.peak[d.Endpoint] = max(s.peak[d.Endpoint], s.inFlight[d.Endpoint])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight[d.Endpoint]--
		s.mu.Unlock()
	}()
	select {
	case <-s.release:
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	case <-ctx.Done():
		return outbox.Result{Action: outbox.ActionRetry, Err: ctx.Err()}
	}
}

func (s *batchingSink) peaks() (batch, plain int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak["batch"], s.peak["plain"]
}

// An endpoint whose deliveries a Sink batches (Batcher) gets
// MaxPerEndpoint deliveries in flight from the start, while another
// endpoint's limit starts at InitialPerEndpoint and grows only as its
// deliveries succeed.
func TestBatchingEndpointIsNotAdapted(t *testing.T) {
	sink := &batchingSink{inFlight: map[string]int{}, peak: map[string]int{}, release: make(chan struct{})}
	cfg := testConfig(sink)
	cfg.Concurrency, cfg.MaxPerEndpoint, cfg.InitialPerEndpoint = 32, 16, 4
	o, _ := open(t, cfg)
	var evs []outbox.Event
	for i := range 40 {
		evs = append(evs, outbox.Event{ID: fmt.Sprint("b", i), Destination: "batch"}, outbox.Event{ID: fmt.Sprint("p", i), Destination: "plain"})
	}
	if _, err := o.Enqueue(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, settle, "16 deliveries to the batching endpoint at once", func() bool { b, _ := sink.peaks(); return b == 16 })
	if _, plain := sink.peaks(); plain > 4 {
		t.Errorf("%d deliveries at once to the other endpoint before any succeeded; its limit starts at 4", plain)
	}
	close(sink.release)
	testkit.WaitFor(t, settle, "all delivered", func() bool { return o.Stats().DeliveredTotal == 80 })
}
