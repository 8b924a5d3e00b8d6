package outbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outbox/outbox/internal/admin"
	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/store"
)

// Backfill describes the routing of the kept unrouted events to the
// endpoints that subscribe to them after they were stored (see
// SetSubscriptions): it runs in the background of a started outbox, in
// bounded transactions.
type Backfill struct {
	// Running reports whether it runs now.
	Running bool
	// Routed counts the unrouted events it routed since Open, Deliveries
	// the deliveries it made of them (one per subscribed endpoint).
	Routed, Deliveries uint64
	// Remaining is the number of events still kept unrouted
	// (Stats.Unrouted): those that a running backfill has yet to look at,
	// and those that no subscription matches.
	Remaining int
}

// EndpointBackfill is the part of the backfill that concerns one endpoint.
type EndpointBackfill struct {
	// Running reports whether the backfill runs now and the endpoint is
	// subscribed to a topic: it may receive more deliveries of it.
	Running bool
	// Deliveries counts the deliveries to the endpoint the backfill made
	// since Open.
	Deliveries uint64
}

// backfill is the state of the background routing of unrouted events:
// one runner at a time, owned by the Outbox (started by Start and by
// SetSubscriptions on a started outbox, cancelled and joined by Stop).
type backfill struct {
	ctx    context.Context // cancelled when Stop begins
	cancel context.CancelFunc
	wg     sync.WaitGroup // the runner

	mu         sync.Mutex
	running    bool              // a runner runs
	again      bool              // the subscriptions changed while it ran: run again
	failed     bool              // the last run failed: the maintenance runs it again
	byEndpoint map[string]uint64 // deliveries made, per endpoint

	routed, deliveries atomic.Uint64
}

// kickBackfill starts the background routing of the kept unrouted events
// with the subscriptions in use, or has the running one run again once it
// is done; it does nothing on an outbox not started, or stopping.
func (o *Outbox) kickBackfill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started && !o.stopping {
		o.startBackfillLocked()
	}
}

// startBackfillLocked is kickBackfill with o.mu held and the outbox
// started. It starts no runner when no event is unrouted: one stored from
// now on is routed by the router in use when it is stored, and one stored
// with an older router kicks the backfill again (afterInsert).
func (o *Outbox) startBackfillLocked() {
	b := &o.bf
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		b.again = true
		return
	}
	if ss, err := o.st.Stats(); err == nil && ss.Unrouted == 0 {
		return
	}
	b.running, b.again = true, false
	b.wg.Add(1)
	go o.runBackfill()
}

// runBackfill routes the kept unrouted events until a run ends with no
// change of subscriptions during it, or Stop begins.
func (o *Outbox) runBackfill() {
	b := &o.bf
	defer b.wg.Done()
	for {
		err := o.routes.RouteUnrouted(b.ctx, o.router.Load, o.backfilled)
		stopping := b.ctx.Err() != nil
		b.mu.Lock()
		b.failed = err != nil && !stopping
		if b.again && !stopping {
			b.again = false
			b.mu.Unlock()
			continue
		}
		b.running = false
		b.mu.Unlock()
		if err != nil && !stopping {
			o.logStoreErr("route unrouted events", err)
		}
		return
	}
}

// backfilled counts an event the backfill routed to eps.
func (o *Outbox) backfilled(eps []string) {
	b := &o.bf
	b.routed.Add(1)
	b.deliveries.Add(uint64(len(eps)))
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byEndpoint == nil {
		b.byEndpoint = make(map[string]uint64)
	}
	for _, ep := range eps {
		b.byEndpoint[ep]++
	}
}

// retryBackfill runs the backfill again when its last run failed (a
// maintenance step).
func (o *Outbox) retryBackfill() {
	o.bf.mu.Lock()
	failed := o.bf.failed
	o.bf.mu.Unlock()
	if failed {
		o.kickBackfill()
	}
}

// backfillStats returns the backfill's state but Remaining.
func (o *Outbox) backfillStats() Backfill {
	b := &o.bf
	b.mu.Lock()
	running := b.running
	b.mu.Unlock()
	return Backfill{Running: running, Routed: b.routed.Load(), Deliveries: b.deliveries.Load()}
}

// EndpointBackfill returns the state of the backfill (see Stats.Backfill)
// for endpoint: whether it runs for it now and how many deliveries to it
// it made since Open.
func (o *Outbox) EndpointBackfill(endpoint string) EndpointBackfill {
	b := &o.bf
	b.mu.Lock()
	running, n := b.running, b.byEndpoint[endpoint]
	b.mu.Unlock()
	if running {
		running = o.subscribed(endpoint)
	}
	return EndpointBackfill{Running: running, Deliveries: n}
}

// subscribed reports whether endpoint has a subscription.
func (o *Outbox) subscribed(endpoint string) bool {
	for _, r := range o.router.Load().Rules() {
		if r.Endpoint == endpoint {
			return true
		}
	}
	return false
}

// SubscribeSince replaces the subscriptions of s.Endpoint with s, as
// PutSubscription does, and backfills the endpoint from since, as
// BackfillSince does; it returns the backfill's ID.
func (o *Outbox) SubscribeSince(ctx context.Context, s Subscription, since time.Time, rate float64) (string, error) {
	if _, err := paceRate(rate); err != nil {
		return "", err
	}
	if err := o.PutSubscription(ctx, s); err != nil {
		return "", err
	}
	return o.BackfillSince(s, since, rate)
}

// BackfillSince delivers to s.Endpoint what it would have received had s
// been its subscription since then: every topic event that s matches,
// created at or after since, that was delivered to another endpoint and
// is kept in the archive (Config.Retain), or that is pending for another
// endpoint, gets a delivery to s.Endpoint, paced at rate deliveries per
// second (0: 100), each once: a delivery to s.Endpoint that is pending,
// dead or delivered (within the tombstone retention) already is skipped,
// and an event with several deliveries gets one. It does not change the
// subscriptions (see SubscribeSince): events enqueued from now on are
// routed as the subscriptions in use say, and the kept unrouted ones by
// the backfill of SetSubscriptions. It returns the backfill's ID:
// ArchiveReplayStatus shows its progress and CancelArchiveReplay stops it.
// Like a replay it runs in the background and is not resumed after a
// restart.
func (o *Outbox) BackfillSince(s Subscription, since time.Time, rate float64) (string, error) {
	if err := o.enter(); err != nil {
		return "", err
	}
	defer o.ops.Done()
	if o.cfg.ReadOnly {
		return "", fmt.Errorf("outbox: backfill: %w", ErrReadOnly)
	}
	rate, err := paceRate(rate)
	if err != nil {
		return "", err
	}
	if err := o.validateSubscription(s); err != nil {
		return "", err
	}
	ep := s.Endpoint
	matches := route.New([]route.Rule{route.Rule(s)})
	req := &admin.Requeue{
		PerSecond: rate,
		Options:   store.RequeueOptions{SkipDelivered: true},
		Target:    func(r *store.Record) *store.Record { return route.DeliveryOf(r, ep) },
		Keep: func(r *store.Record) bool {
			return r.Topic != "" && r.Endpoint != "" && r.Endpoint != ep && !r.CreatedAt.Before(since) &&
				len(matches.Endpoints(r.Topic, r.Headers)) > 0
		},
	}
	queries := make([]store.ArchiveQuery, 0, len(s.Topics))
	for _, topic := range s.Topics {
		q, err := storeArchiveQuery(ArchiveQuery{Topic: topic, From: since, Limit: MaxListLimit})
		if err != nil {
			return "", err
		}
		queries = append(queries, q)
	}
	// The pending events first, then the archive up to then: an event
	// delivered while the pending ones are read is in the archive by the
	// time it is read, so none slips between the two.
	return o.startJob(func(ctx context.Context, progress func(int, int)) error {
		req.Progress = progress
		if err := o.admin.RequeuePending(ctx, req, MaxListLimit); err != nil {
			return err
		}
		to := o.clock.Now()
		for _, q := range queries {
			q.To = to
			if err := o.admin.ReplayArchived(ctx, q, req); err != nil {
				return err
			}
		}
		return nil
	}), nil
}
