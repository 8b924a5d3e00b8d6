package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxd/outbox/store"
)

// Mover moves records between routed, unrouted and dead in the store: it
// routes the kept unrouted events a router now matches, dead-letters those
// whose retention ended, and dead-letters an endpoint's pending records.
// The outbox builds it once, with its store and these functions.
type Mover struct {
	// St is the outbox's store.
	St *store.Store
	// Log is the outbox's logger.
	Log *slog.Logger
	// MapErr turns a store error of operation op on id into the outbox's
	// error.
	MapErr func(op, id string, err error) error
	// LogStoreErr logs a store error of a background step.
	LogStoreErr func(step string, err error)
	// Wake asks for a delivery punctuation now.
	Wake func()
	// PageSize is how many pending records a pass lists at a time.
	PageSize int
}

// Batch bounds of RouteUnrouted: a write transaction routes at most
// BatchEvents events and, past the first event, BatchDeliveries deliveries.
const (
	BatchEvents     = 256
	BatchDeliveries = 1024
)

// RouteUnrouted routes every kept unrouted event that the router rt
// returns (asked again before each batch, so that a change of
// subscriptions applies to the events not yet looked at) subscribes an
// endpoint to, in batches (BatchEvents, BatchDeliveries): each batch is
// one write transaction that removes its events' unrouted records and
// stores their deliveries, so an event stops being unrouted in the
// transaction that routes it and is never routed twice. An event that
// changed meanwhile (expired, deleted or routed by another call) is left
// as it is. routed, when not nil, is told of each event routed with its
// endpoints, after its batch committed. It stops at ctx's end.
func (m *Mover) RouteUnrouted(ctx context.Context, rt func() *Router, routed func(eps []string)) error {
	if ss, err := m.St.Stats(); err != nil {
		return m.MapErr("route unrouted", "", err)
	} else if ss.Unrouted == 0 {
		return nil
	}
	b := batch{m: m, routed: routed}
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, next, err := m.St.List(store.ListQuery{State: store.StatePending, After: after, Limit: m.PageSize,
			Filter: func(r *store.Record) bool { return r.Unrouted() }})
		if err != nil {
			return m.MapErr("route unrouted", "", err)
		}
		r := rt()
		for _, u := range recs {
			if b.add(u, r) {
				if err := b.flush(ctx); err != nil {
					return err
				}
				r = rt()
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if err := b.flush(ctx); err != nil {
		return err
	}
	if b.total > 0 {
		m.Log.Info("outbox: routed unrouted events to their new subscribers", "events", b.total)
	}
	return nil
}

// batch gathers the routings of one RouteUnrouted transaction.
type batch struct {
	m          *Mover
	routed     func(eps []string)
	rs         []store.Routing
	eps        [][]string
	deliveries int
	total      int
}

// add adds the routing of u to the endpoints r subscribes to its topic,
// if any, and reports whether the batch is full.
func (b *batch) add(u *store.Record, r *Router) bool {
	eps := r.Endpoints(u.Topic, u.Headers)
	if len(eps) == 0 {
		return false
	}
	b.rs = append(b.rs, store.Routing{ID: u.ID, Version: u.Version, Recs: deliveries(u, eps)})
	b.eps = append(b.eps, eps)
	b.deliveries += len(eps)
	return len(b.rs) >= BatchEvents || b.deliveries >= BatchDeliveries
}

// flush routes the batch's events in one transaction and empties it.
func (b *batch) flush(ctx context.Context) error {
	if len(b.rs) == 0 {
		return nil
	}
	errs, err := b.m.St.RouteMany(ctx, b.rs)
	if err != nil {
		return b.m.MapErr("route unrouted", "", err)
	}
	n := 0
	for i, e := range errs {
		var ce *store.ConflictError
		switch {
		case e == nil:
			n++
			if b.routed != nil {
				b.routed(b.eps[i])
			}
		case errors.As(e, &ce):
			b.m.Log.Warn("outbox: unrouted event not routed: a delivery of it exists", "id", store.GroupOf(b.rs[i].ID), "err", e)
		}
	}
	b.total += n
	b.rs, b.eps, b.deliveries = b.rs[:0], b.eps[:0], 0
	if n > 0 {
		b.m.Wake()
	}
	return nil
}

// deliveries returns the deliveries of the unrouted record u to eps, due
// from their creation (or DeliverAt) on.
func deliveries(u *store.Record, eps []string) []*store.Record {
	recs := make([]*store.Record, len(eps))
	for i, ep := range eps {
		d := DeliveryOf(u, ep)
		d.NextAttemptAt = time.Time{}
		d.Attempts, d.Deliveries, d.LastStatus, d.LastError = 0, 0, 0, ""
		recs[i] = d
	}
	return recs
}

// routeOne routes the unrouted record u to the endpoints rt subscribes to
// its topic; false when there are none, or u changed meanwhile.
func (m *Mover) routeOne(ctx context.Context, u *store.Record, rt *Router) (bool, error) {
	eps := rt.Endpoints(u.Topic, u.Headers)
	if len(eps) == 0 {
		return false, nil
	}
	err := m.St.Route(ctx, u.ID, u.Version, deliveries(u, eps))
	switch {
	case errors.Is(err, store.ErrStale):
		return false, nil
	case err != nil:
		return false, m.MapErr("route unrouted", store.GroupOf(u.ID), err)
	}
	return true, nil
}

// Expire handles the unrouted records a punctuation found due: routed when
// a subscription of rt matches them (one set while they were being stored,
// or a dead letter replayed), dead letters otherwise.
func (m *Mover) Expire(ctx context.Context, recs []*store.Record, rt *Router) {
	var outs []store.Outcome
	for _, u := range recs {
		if ok, err := m.routeOne(ctx, u, rt); err != nil {
			m.LogStoreErr("route unrouted event", err)
			return
		} else if ok {
			continue
		}
		outs = append(outs, deadOutcome(u, UnroutedReason(u.Topic)))
	}
	if len(outs) == 0 {
		m.Wake()
		return
	}
	if _, err := m.St.Apply(ctx, outs, nil); err != nil {
		m.LogStoreErr("dead-letter unrouted events", err)
		return
	}
	m.Log.Warn("outbox: unrouted events became dead letters: no endpoint subscribed to their topic within the retention", "events", len(outs))
}

// deadOutcome is the outcome that makes r a dead letter for reason and
// changes nothing else.
func deadOutcome(r *store.Record, reason string) store.Outcome {
	return store.Outcome{Kind: store.OutcomeDead, ID: r.ID, Version: r.Version,
		Attempts: r.Attempts, Deliveries: r.Deliveries, LastStatus: r.LastStatus, LastError: r.LastError,
		Reason: reason}
}

// DeadLetterEndpoint moves every pending record of endpoint to the dead
// letters with reason and returns how many it moved. It moves them page by
// page and goes over them again until a pass finds none, so that records
// rescheduled by a delivery outcome meanwhile (their version changed, the
// move was stale) are moved too.
func (m *Mover) DeadLetterEndpoint(ctx context.Context, endpoint, reason string) (int, error) {
	total := 0
	for pass := 0; ; pass++ {
		moved, stale, err := m.deadLetterPass(ctx, endpoint, reason)
		total += moved
		if err != nil {
			return total, err
		}
		if stale == 0 {
			return total, nil
		}
		if pass >= 100 {
			return total, fmt.Errorf("outbox: dead-letter endpoint %q: %d events kept changing under the move; call again", endpoint, stale)
		}
	}
}

// deadLetterPass moves the endpoint's pending records listed in one pass.
func (m *Mover) deadLetterPass(ctx context.Context, endpoint, reason string) (moved, stale int, err error) {
	after := ""
	for {
		recs, next, err := m.St.List(store.ListQuery{State: store.StatePending, After: after, Limit: m.PageSize,
			Filter: func(r *store.Record) bool { return r.Endpoint == endpoint }})
		if err != nil {
			return moved, stale, m.MapErr("dead-letter endpoint", endpoint, err)
		}
		if len(recs) > 0 {
			outs := make([]store.Outcome, len(recs))
			for i, r := range recs {
				outs[i] = deadOutcome(r, reason)
			}
			res, err := m.St.Apply(ctx, outs, nil)
			if err != nil {
				return moved, stale, m.MapErr("dead-letter endpoint", endpoint, err)
			}
			for _, r := range res {
				if r == store.Applied {
					moved++
				} else {
					stale++
				}
			}
		}
		if next == "" {
			return moved, stale, nil
		}
		after = next
	}
}
