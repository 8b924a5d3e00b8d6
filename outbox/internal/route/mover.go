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

// RouteUnrouted routes every kept unrouted event that rt now subscribes an
// endpoint to: each in one transaction that removes it and stores its
// deliveries. An event that changed meanwhile (expired, deleted or routed
// by another call) is left as it is.
func (m *Mover) RouteUnrouted(ctx context.Context, rt *Router) error {
	if ss, err := m.St.Stats(); err != nil {
		return m.MapErr("route unrouted", "", err)
	} else if ss.Unrouted == 0 {
		return nil
	}
	after := ""
	routed := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, next, err := m.St.List(store.ListQuery{State: store.StatePending, After: after, Limit: m.PageSize,
			Filter: func(r *store.Record) bool { return r.Unrouted() }})
		if err != nil {
			return m.MapErr("route unrouted", "", err)
		}
		for _, u := range recs {
			ok, err := m.routeOne(ctx, u, rt)
			if err != nil {
				return err
			}
			if ok {
				routed++
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	if routed > 0 {
		m.Log.Info("outbox: routed unrouted events to their new subscribers", "events", routed)
		m.Wake()
	}
	return nil
}

// routeOne routes the unrouted record u to the endpoints rt subscribes to
// its topic; false when there are none, or u changed meanwhile.
func (m *Mover) routeOne(ctx context.Context, u *store.Record, rt *Router) (bool, error) {
	eps := rt.Endpoints(u.Topic, u.Headers)
	if len(eps) == 0 {
		return false, nil
	}
	recs := make([]*store.Record, len(eps))
	for i, ep := range eps {
		d := DeliveryOf(u, ep)
		d.NextAttemptAt = time.Time{} // due from its creation (or DeliverAt) on
		d.Attempts, d.Deliveries, d.LastStatus, d.LastError = 0, 0, 0, ""
		recs[i] = d
	}
	err := m.St.Route(ctx, u.ID, u.Version, recs)
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
