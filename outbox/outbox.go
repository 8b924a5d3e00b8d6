package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/outbox/internal/admin"
	"github.com/outboxd/outbox/outbox/internal/engine"
	"github.com/outboxd/outbox/outbox/internal/route"
	"github.com/outboxd/outbox/scheduler"
	"github.com/outboxd/outbox/store"
)

// Outbox is a durable outbox on one bbolt file: events enqueued are kept
// until a Sink delivered them (then deleted through the changelog) or they
// became dead letters. Its methods are safe for concurrent use.
//
// The life cycle is Open → Start → Stop. An opened but not started Outbox
// accepts events and admin operations but delivers nothing (useful for
// offline tools); Stop closes the file and every later call returns ErrClosed.
type Outbox struct {
	cfg      Config
	log      *slog.Logger
	clock    Clock
	sink     Sink
	resolver EndpointResolver
	st       *store.Store
	tracer   trace.Tracer

	hooksMu sync.Mutex
	hooks   atomic.Pointer[[]Hooks]

	router atomic.Pointer[route.Router] // the subscriptions in use
	subsMu sync.Mutex                   // orders the changes of router
	routes *route.Mover                 // routes and dead-letters stored records
	admin  *admin.Admin                 // the admin verbs' work on the store
	bf     backfill                     // routing unrouted events to new subscriptions
	rp     replays                      // replays from the archive

	mu       sync.Mutex
	started  bool
	stopping bool
	ops      sync.WaitGroup // API calls in progress
	stopCh   chan struct{}  // closed when Stop begins
	stopDone chan struct{}  // closed when Stop has finished
	stopErr  error

	sched    *scheduler.Scheduler
	deliverP *scheduler.Punctuation
	maintP   *scheduler.Punctuation

	eng *engine.Engine // the delivery machinery

	enqueuedTotal   atomic.Uint64
	duplicatesTotal atomic.Uint64
	deliveredTotal  atomic.Uint64
	failedTotal     atomic.Uint64
	deadTotal       atomic.Uint64
	unroutedDropped atomic.Uint64
}

// Open opens (creating it if needed) the outbox file at path and checks cfg.
// It returns a *ConfigError naming the field (matching ErrInvalidConfig)
// when cfg is invalid, as Config.Validate does, and an
// error naming the file when it cannot be opened, which matches ErrLocked
// (another process holds it), ErrNotDatabase, ErrDamaged or ErrSchemaTooNew
// when that is the cause. Call Start to begin delivering.
func Open(path string, cfg Config) (*Outbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := store.Open(path, cfg.storeOptions())
	if err != nil {
		return nil, wrapStoreErr("open", err)
	}
	o := &Outbox{
		cfg:      cfg,
		log:      cfg.Logger,
		clock:    cfg.Clock,
		sink:     cfg.Sink,
		st:       st,
		tracer:   cfg.TracerProvider.Tracer(TracerName),
		stopCh:   make(chan struct{}),
		stopDone: make(chan struct{}),
	}
	o.resolver, _ = cfg.Sink.(EndpointResolver)
	o.bf.ctx, o.bf.cancel = context.WithCancel(context.Background())
	o.hooks.Store(&[]Hooks{cfg.Hooks})
	r, err := o.newRouter(cfg.Subscriptions)
	if err != nil {
		var ve *ValidationError
		errors.As(err, &ve)
		return nil, errors.Join(&ConfigError{Field: "Subscriptions[" + itoa(ve.Index) + "]." + ve.Field, Reason: ve.Reason}, st.Close())
	}
	o.router.Store(r)
	o.routes = &route.Mover{St: st, Log: o.log, MapErr: mapErr, LogStoreErr: o.logStoreErr, Wake: o.wake, PageSize: MaxListLimit}
	o.admin = &admin.Admin{St: st, Log: o.log, Now: o.clock.Now, MapErr: mapErr, LogStoreErr: o.logStoreErr,
		Wake: o.wake, Stopped: o.stopCh, ErrStopped: ErrClosed}
	o.eng, err = o.newEngine()
	if err != nil {
		return nil, errors.Join(wrapStoreErr("open", err), st.Close())
	}
	return o, nil
}

// Start starts the delivery and maintenance punctuations, the delivery
// workers, and the routing of the kept unrouted events that the
// subscriptions match (see SetSubscriptions), in the background. It is idempotent; after Stop it returns ErrClosed, and on an
// outbox opened with Config.ReadOnly an error matching ErrReadOnly.
func (o *Outbox) Start() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping {
		return ErrClosed
	}
	if o.cfg.ReadOnly {
		return fmt.Errorf("outbox: start: %w: it delivers nothing", ErrReadOnly)
	}
	if o.started {
		return nil
	}
	sched := scheduler.New(scheduler.Config{
		Clock:  schedClock{o.clock},
		Logger: o.log,
		OnPanic: func(name string, v any) {
			o.log.Error("outbox: punctuation panicked", "punctuation", name, "panic", fmt.Sprint(v))
		},
	})
	o.eng.Start()
	dp, err := sched.Schedule(o.cfg.Interval, scheduler.WallClock, o.eng.Punctuate, scheduler.Options{Name: "deliver"})
	if err == nil {
		o.deliverP = dp
		o.maintP, err = sched.Schedule(o.cfg.MaintenanceInterval, scheduler.WallClock, o.maintain, scheduler.Options{Name: "maintain"})
	}
	if err != nil {
		cerr := sched.Close(context.Background())
		_ = o.eng.Stop(context.Background())
		return errors.Join(fmt.Errorf("outbox: start: %w", err), cerr)
	}
	o.sched = sched
	o.started = true
	o.deliverP.Wake()
	o.startBackfillLocked()
	return nil
}

// Stop stops the outbox: no new deliveries start, deliveries in flight may
// finish until ctx is done (then their contexts are cancelled and they are
// left pending, without spending an attempt), the outcomes of finished
// deliveries are committed, and the file is closed. It returns ctx's error
// (wrapped) when deliveries had to be cancelled.
//
// Stop is idempotent (later calls wait for the first and return its
// result), safe before Start, and safe while other goroutines use the
// outbox: once Stop has begun, every other method returns ErrClosed.
func (o *Outbox) Stop(ctx context.Context) error {
	o.mu.Lock()
	if o.stopping {
		o.mu.Unlock()
		select {
		case <-o.stopDone:
			return o.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.stopping = true
	close(o.stopCh)
	o.bf.cancel()
	started, sched := o.started, o.sched
	o.mu.Unlock()

	var errs []error
	if started {
		if err := sched.Close(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("outbox: stop scheduler: %w", err))
		}
		if err := o.eng.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Let API calls in progress finish (they are short: one store call each;
	// ReplayDead stops pacing when stopCh is closed).
	opsDone := make(chan struct{})
	go func() { o.ops.Wait(); close(opsDone) }()
	select {
	case <-opsDone:
	case <-ctx.Done():
		// Closing the store below makes them fail with ErrClosed.
	}
	o.bf.wg.Wait() // cancelled above: it ends with its current batch
	o.rp.stop()    // paced: ends at its next wait, or with its current batch
	if err := o.st.Close(); err != nil {
		errs = append(errs, fmt.Errorf("outbox: close store: %w", err))
	}
	<-opsDone
	o.stopErr = errors.Join(errs...)
	close(o.stopDone)
	return o.stopErr
}

// newEngine builds the delivery engine on o's store. It takes the
// configuration's values, and calls back into the outbox, in the outbox's
// types, for the Sink, the wake-up, unrouted events and the hooks.
func (o *Outbox) newEngine() (*engine.Engine, error) {
	c := &o.cfg
	return engine.New(o.st, engine.Config{
		Concurrency:       c.Concurrency,
		MaxPerEndpoint:    c.MaxPerEndpoint,
		MaxUncommitted:    c.MaxUncommitted,
		BatchSize:         c.BatchSize,
		CommitInterval:    c.CommitInterval,
		Ordered:           c.Ordered,
		MaxAttempts:       c.MaxAttempts,
		MaxAge:            c.MaxAge,
		ParkInterval:      c.ParkInterval,
		MaxThrottle:       c.MaxThrottle,
		BackoffInitial:    c.BackoffInitial,
		BackoffMax:        c.BackoffMax,
		BackoffMultiplier: c.BackoffMultiplier,
		Breaker:           engine.Breaker(c.Breaker),
		Adaptive:          engine.Adaptive{Off: c.NoAdaptiveConcurrency, Initial: c.InitialPerEndpoint, Fixed: batchingEndpoints(c.Sink)},
		Limiter:           c.RateLimits.engineLimiter(),
		Shared:            c.SharedEndpoints.engineShared(),
		LogAttempts:       c.logsAttempts(),
		ExcerptBytes:      c.excerptBytes(),
		Clock:             o.clock,
		Logger:            o.log,
		Tracer:            o.tracer,
		Deliver:           o.deliver,
		Wake:              o.wake,
		ExpireUnrouted: func(ctx context.Context, recs []*store.Record) {
			o.routes.Expire(ctx, recs, o.router.Load())
		},
		Hooks: engine.Hooks{
			OnDelivery:    o.delivered,
			OnPunctuation: o.hookPunctuation,
			OnBreaker:     o.breakerChanged,
			OnRateLimited: o.hookRateLimited,
		},
	})
}

// Health reports why the outbox cannot do its job now, or nil when it can.
// The error matches ErrUnavailable and says what is wrong:
//
//   - the file is damaged (a store call found data that fails its checksum
//     or framing; the error matches ErrDamaged too): no delivery starts again and Enqueue refuses new events
//     until the file is repaired or restored and the outbox reopened;
//   - the outcomes of finished deliveries cannot be committed (a full or
//     failing disk): no delivery starts while they wait in memory (at most
//     MaxUncommitted of them), and the outbox retries their commit until
//     it succeeds; then deliveries resume and Health is nil again.
//
// A sidecar's readiness probe should report it.
func (o *Outbox) Health() error {
	corrupt, commitErr, since := o.eng.Health()
	switch {
	case corrupt != nil:
		return fmt.Errorf("%w: %w (%s): deliveries stopped and new events refused: %v",
			ErrUnavailable, ErrDamaged, o.st.Path(), corrupt)
	case commitErr != nil:
		return fmt.Errorf("%w: committing delivery outcomes has failed since %s, deliveries paused: %v",
			ErrUnavailable, since.UTC().Format(time.RFC3339), commitErr)
	}
	return nil
}

// refuseIfCorrupt returns the error Enqueue answers with while the file is
// known to be damaged.
func (o *Outbox) refuseIfCorrupt() error {
	if corrupt, _, _ := o.eng.Health(); corrupt != nil {
		return fmt.Errorf("%w: %w: %v", ErrUnavailable, ErrDamaged, corrupt)
	}
	return nil
}

// logStoreErr logs a store error of a background step (see
// engine.LogStoreErr: damaged data is recorded in the outbox's health).
func (o *Outbox) logStoreErr(step string, err error) { o.eng.LogStoreErr(step, err) }

// enter registers an API call in progress; it fails with ErrClosed once Stop
// has begun. Every successful enter must be paired with o.ops.Done().
func (o *Outbox) enter() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping {
		return ErrClosed
	}
	o.ops.Add(1)
	return nil
}

// Ready reports whether the outbox is started, not stopping, and its file
// is open: the sidecar's readiness probe.
func (o *Outbox) Ready() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started && !o.stopping
}

// Path returns the path of the outbox's database file.
func (o *Outbox) Path() string { return o.st.Path() }

// Config returns the configuration in use, with every default filled in.
func (o *Outbox) Config() Config { return o.cfg }

// wake asks the delivery punctuation to run now (coalesced). It is a no-op
// before Start.
func (o *Outbox) wake() {
	o.mu.Lock()
	p := o.deliverP
	stopping := o.stopping
	o.mu.Unlock()
	if p != nil && !stopping {
		p.Wake()
	}
}

// mapErr translates store errors into the outbox's sentinels: those about
// an event name it, the others keep the store's message (wrapStoreErr).
func mapErr(op, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("outbox: %s %q: %w", op, id, ErrNotFound)
	case errors.Is(err, store.ErrNotDead):
		return fmt.Errorf("outbox: %s %q: %w", op, id, ErrNotDead)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("outbox: %s: %w: %w", op, ErrConflict, err)
	case errors.Is(err, store.ErrClosed):
		return fmt.Errorf("outbox: %s: %w", op, ErrClosed)
	}
	return wrapStoreErr(op, err)
}
