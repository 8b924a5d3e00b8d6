package cli

import (
	"context"
	"slices"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// kindRouter is the stores' sink when endpoints of kind kafka exist: a
// delivery to one of them goes to the Kafka sink, every other to the HTTP
// sink. Both sinks' endpoints are the outbox's (resolved and listed), so
// the breaker, rate limits, attempt log and metrics of an endpoint are the
// same whatever its kind.
type kindRouter struct {
	http  *httpsink.Sink
	kafka *kafka.Sink
}

var (
	_ outbox.Sink             = kindRouter{}
	_ outbox.EndpointResolver = kindRouter{}
	_ outbox.EndpointPager    = kindRouter{}
	_ outbox.Batcher          = kindRouter{}
)

// routeSinks returns the sink of the stores: hs alone without ks.
func routeSinks(hs *httpsink.Sink, ks *kafka.Sink) outbox.Sink {
	if ks == nil {
		return hs
	}
	return kindRouter{http: hs, kafka: ks}
}

// Deliver implements outbox.Sink.
func (r kindRouter) Deliver(ctx context.Context, d *outbox.Delivery) outbox.Result {
	if _, ok := r.kafka.Topic(d.Endpoint); ok {
		return r.kafka.Deliver(ctx, d)
	}
	return r.http.Deliver(ctx, d)
}

// ResolveEndpoint implements outbox.EndpointResolver.
func (r kindRouter) ResolveEndpoint(destination string) (string, error) {
	if _, ok := r.kafka.Topic(destination); ok {
		return destination, nil
	}
	return r.http.ResolveEndpoint(destination)
}

// EndpointNames implements outbox.EndpointLister.
func (r kindRouter) EndpointNames() []string {
	names := append(r.http.EndpointNames(), r.kafka.EndpointNames()...)
	slices.Sort(names)
	return slices.Compact(names)
}

// EndpointNamesAfter implements outbox.EndpointPager: the names of both
// sinks after after, in order.
func (r kindRouter) EndpointNamesAfter(after string, limit int) []string {
	names := r.http.EndpointNamesAfter(after, limit)
	for _, n := range r.kafka.EndpointNames() {
		if n > after {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return names[:min(len(names), limit)]
}

// Batches implements outbox.Batcher: the endpoints of kind kafka batch.
func (r kindRouter) Batches(endpoint string) bool { return r.kafka.Batches(endpoint) }
