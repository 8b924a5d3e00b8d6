package httpapi

import (
	"context"

	"github.com/outboxd/outbox/outbox"
)

// Backend is what the handler serves: the methods of *outbox.Outbox the API
// calls, with their semantics (errors matching outbox.ErrNotFound,
// outbox.ErrConflict, outbox.ErrClosed... are answered as for an Outbox). An
// *outbox.Outbox is one; so is a view over several outboxes served as one,
// such as package outbox/union's.
type Backend interface {
	// Enqueue stores events (POST /v1/events).
	Enqueue(ctx context.Context, events ...outbox.Event) ([]string, error)
	// List returns a page of pending or dead events (GET /v1/events).
	List(ctx context.Context, opt outbox.ListOptions) ([]outbox.Event, string, error)
	// Get returns one event (GET /v1/events/{id}).
	Get(ctx context.Context, id string) (outbox.Event, error)
	// Attempts returns an event's attempt log (GET /v1/events/{id}/attempts).
	Attempts(ctx context.Context, id string) ([]outbox.Attempt, error)
	// Delete drops a pending or dead event (DELETE /v1/events/{id}).
	Delete(ctx context.Context, id string) error
	// Replay moves a dead event back to pending (POST /v1/events/{id}/replay).
	Replay(ctx context.Context, id string) error
	// DeleteDelivery drops one delivery of a topic event
	// (DELETE /v1/events/{id}?endpoint=).
	DeleteDelivery(ctx context.Context, id, endpoint string) error
	// ReplayDelivery moves one dead delivery of a topic event back to
	// pending (POST /v1/events/{id}/replay?endpoint=).
	ReplayDelivery(ctx context.Context, id, endpoint string) error
	// ReplayDead replays the dead events matching a filter (POST /v1/dead/replay).
	ReplayDead(ctx context.Context, f outbox.ReplayFilter) (int, error)
	// Endpoints returns every endpoint state (GET /v1/endpoints/{name},
	// POST /v1/endpoints/{name}/enable).
	Endpoints(ctx context.Context) ([]outbox.EndpointState, error)
	// EndpointsPage returns one page of the endpoint states, by name, and
	// the cursor of the next page (GET /v1/endpoints?limit=&after=).
	EndpointsPage(ctx context.Context, after string, limit int) ([]outbox.EndpointState, string, error)
	// EnableEndpoint re-enables an endpoint (POST /v1/endpoints/{name}/enable).
	EnableEndpoint(ctx context.Context, name string) error
	// RetryEndpoint makes an endpoint's pending events due, paced
	// (POST /v1/endpoints/{name}/retry).
	RetryEndpoint(ctx context.Context, name string, rate float64) (int, error)
	// Stats returns the counts (GET /v1/stats).
	Stats() outbox.Stats
}

var _ Backend = (*outbox.Outbox)(nil)
