package cli

import (
	"context"
	"net/http"
	"strconv"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/cluster"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// staleAPI answers the reads of events from g's stale copies (the copies
// of partitions this instance holds but does not serve), as the cluster
// handler asks for them while partitions move: the API of local with
// cfg, whose GET /v1/events/{id} and GET /v1/events/{id}/attempts read
// the copy that holds the event at the highest offset and mark the answer
// with cluster.StaleHeader and cluster.StaleOffsetHeader.
func staleAPI(local httpapi.Backend, g *kafka.Group, cfg httpapi.Config) http.Handler {
	api := httpapi.New(staleBackend{Backend: local, g: g}, cfg)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		found := &staleFound{}
		ctx := context.WithValue(r.Context(), staleKey{}, found)
		api.ServeHTTP(&staleWriter{ResponseWriter: w, found: found}, r.WithContext(ctx))
	})
}

// staleKey is the context key of the staleFound of a request to staleAPI.
type staleKey struct{}

// staleFound is the copy that answered a request to staleAPI.
type staleFound struct {
	copy kafka.StaleCopy
	ok   bool
}

// staleBackend is the local API's backend whose reads of one event are
// answered from the stale copies.
type staleBackend struct {
	httpapi.Backend
	g *kafka.Group
}

// Get returns the event as the freshest copy that holds it has it.
func (b staleBackend) Get(ctx context.Context, id string) (outbox.Event, error) {
	return readStale(ctx, b.g, func(o *outbox.Outbox) (outbox.Event, error) { return o.Get(ctx, id) })
}

// Attempts returns the event's attempts as the freshest copy that holds
// the event has them.
func (b staleBackend) Attempts(ctx context.Context, id string) ([]outbox.Attempt, error) {
	return readStale(ctx, b.g, func(o *outbox.Outbox) ([]outbox.Attempt, error) {
		if _, err := o.Get(ctx, id); err != nil {
			return nil, err
		}
		return o.Attempts(ctx, id)
	})
}

// readStale reads every stale copy of g, and returns what the one with
// the highest offset that holds the event read, noting that copy in the
// request's staleFound; outbox.ErrNotFound when none holds it. A copy that
// fails to read is no answer.
func readStale[T any](ctx context.Context, g *kafka.Group, read func(*outbox.Outbox) (T, error)) (T, error) {
	var best T
	var found staleFound
	for c, o := range g.StaleCopies() {
		v, err := read(o)
		if err == nil && (!found.ok || c.Offset > found.copy.Offset) {
			best, found = v, staleFound{copy: c, ok: true}
		}
	}
	if !found.ok {
		var none T
		return none, outbox.ErrNotFound
	}
	if f, ok := ctx.Value(staleKey{}).(*staleFound); ok {
		*f = found
	}
	return best, nil
}

// staleWriter marks a 200 of staleAPI with the copy that answered.
type staleWriter struct {
	http.ResponseWriter
	found *staleFound
	wrote bool
}

// WriteHeader implements http.ResponseWriter.
func (w *staleWriter) WriteHeader(status int) {
	if !w.wrote && status == http.StatusOK && w.found.ok {
		w.Header().Set(cluster.StaleHeader, "true")
		w.Header().Set(cluster.StaleOffsetHeader, strconv.FormatInt(w.found.copy.Offset, 10))
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (w *staleWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}
