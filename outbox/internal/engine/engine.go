package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/outboxd/outbox/store"
)

// Config is what the engine needs of the outbox's configuration, with every
// default filled in by the outbox, and the functions through which it hands
// work back to the outbox. The engine never changes it.
type Config struct {
	// Concurrency bounds the deliveries under way, MaxPerEndpoint those
	// of one endpoint, MaxUncommitted the outcomes waiting for their
	// commit; BatchSize bounds what one punctuation takes.
	Concurrency, MaxPerEndpoint, MaxUncommitted, BatchSize int
	// CommitInterval is how long the committer gathers outcomes while
	// deliveries are under way.
	CommitInterval time.Duration
	// Ordered keeps per-key order: a keyed event waits until the one
	// before it is delivered or dead.
	Ordered bool
	// MaxAttempts and MaxAge make an event dead; ParkInterval is the wait
	// after a park, MaxThrottle caps a Retry-After.
	MaxAttempts                       int
	MaxAge, ParkInterval, MaxThrottle time.Duration
	// The retry backoff: about BackoffInitial·BackoffMultiplier^(n-1),
	// jittered, at most BackoffMax.
	BackoffInitial, BackoffMax time.Duration
	BackoffMultiplier          float64
	// Breaker configures every endpoint's circuit breaker.
	Breaker Breaker
	// Adaptive configures the endpoints' adaptive in-flight limits.
	Adaptive Adaptive
	// Shared, when set, is the endpoint state this engine shares with the
	// engines of other stores (see Shared); nil: its own.
	Shared *Shared
	// Limiter returns an endpoint's rate limiter, nil when it has none.
	// Nil when no endpoint can ever be limited: then no pacer runs.
	Limiter func(endpoint string) *rate.Limiter
	// LogAttempts keeps an attempt log, with ExcerptBytes of each
	// response body.
	LogAttempts  bool
	ExcerptBytes int

	// Clock is the outbox's clock; Logger and Tracer its log and tracer.
	Clock  Clock
	Logger *slog.Logger
	Tracer trace.Tracer

	// Deliver hands one attempt at r to the Sink and returns its result;
	// probe is set for the probe of its endpoint's half-open breaker. A
	// panic in it is turned into a retry.
	Deliver func(ctx context.Context, r *store.Record, probe bool) Result
	// Wake asks for a delivery punctuation now (coalesced).
	Wake func()
	// ExpireUnrouted is given the events kept unrouted whose retention
	// ended that a punctuation found due.
	ExpireUnrouted func(ctx context.Context, recs []*store.Record)
	// Hooks are called as the engine works; nil ones are skipped.
	Hooks Hooks
}

// Clock is the outbox's clock, as far as the engine reads it.
type Clock interface {
	Now() time.Time
}

// Hooks are the engine's reports to the outbox, each called synchronously
// from the engine's goroutines; they must be fast and must not call back
// into the Engine.
type Hooks struct {
	// OnDelivery is called once per attempt after its outcome was committed.
	OnDelivery func(DeliveryInfo)
	// OnPunctuation is called after each delivery punctuation with its
	// duration and the number of deliveries it started.
	OnPunctuation func(d time.Duration, due int)
	// OnBreaker is called at each transition of an endpoint's breaker.
	OnBreaker func(BreakerChange)
	// OnRateLimited is called with the number of an endpoint's events a
	// punctuation rescheduled to its rate limit's pace.
	OnRateLimited func(endpoint string, n int)
}

// DeliveryInfo describes one committed delivery attempt (Hooks.OnDelivery).
type DeliveryInfo struct {
	// ID is the event's ID, Endpoint the endpoint it was delivered to.
	ID, Endpoint string
	// Action is what the Sink asked for.
	Action Action
	// Dead reports that the attempt made the event a dead letter.
	Dead bool
	// Status is the response status, 0 when none.
	Status int
	// Attempt is the attempt number (1 for the first; parks count).
	Attempt int
	// Duration is how long the Sink took; SinceEnqueue the time from the
	// event's enqueue to the end of the attempt.
	Duration, SinceEnqueue time.Duration
}

// maxCommitBatch caps the outcomes committed in one transaction.
const maxCommitBatch = 1024

// Engine is the delivery machinery, in three jobs as river splits its
// producer and completer: dispatch (dispatch.go: the punctuation that takes
// due events from the store into a ready queue, and the worker pool that
// hands them to the Sink), the completer (completer.go: the commit loop
// that applies their outcomes in batches), and the endpoint holds
// (holds.go: the endpoints' states, which admin calls change through its
// methods).
//
// An event is "in flight" from the moment a punctuation takes it until its
// outcome is committed (or it is dropped from the ready queue): in-flight
// events are never taken again. Of those, the ones handed to a worker are
// "delivering"; their number never exceeds Concurrency (overall) and
// MaxPerEndpoint (per endpoint), so the jobs channel, of capacity
// Concurrency, never blocks. A worker frees its slot as soon as the Sink
// returns and takes the next ready event itself, so neither a commit's fsync
// nor a punctuation's snapshot leaves workers idle; the punctuation is woken
// to refill the ready queue when it runs low. Events delivered but not yet
// committed are bounded too: no delivery starts while MaxUncommitted of them
// wait, so a crash delivers again at most Concurrency + MaxUncommitted.
//
// The committer gathers outcomes for up to CommitInterval while deliveries
// are under way, so that a busy outbox commits a few large batches instead of
// many small ones: each commit costs two fsyncs and rewrites the right-edge
// pages of every tree it touches, whatever its size.
type Engine struct {
	cfg   Config
	st    *store.Store
	clock Clock
	log   *slog.Logger

	jobs    chan *job
	results chan *job

	deliverCtx    context.Context
	cancelDeliver context.CancelFunc
	workers       sync.WaitGroup
	committerDone chan struct{}
	// abandon is closed by stop when its context ends while outcomes still
	// fail to commit: the committer gives them up (their events stay
	// pending and are delivered again after a restart).
	abandon chan struct{}
	gaveUp  int // outcomes given up; written by the committer before committerDone
	// commitNow ends the committer's wait for more outcomes early: the
	// batch is full, or nothing else is being delivered (see mayWait).
	commitNow   chan struct{}
	commitLimit int // outcomes in one commit: min(maxCommitBatch, MaxUncommitted)

	// Limits of the ready queue: overall (readyCap), and per endpoint
	// (ready plus delivering, see scan.quota), so that one slow endpoint
	// cannot fill it.
	readyCap, lowWater int

	mu      sync.Mutex
	running bool // workers started and not stopped
	// inflight holds the events ready, delivering, or awaiting the commit
	// of their outcome; true for one whose delivery ended unattempted (its
	// endpoint was held): nothing of it will be committed.
	inflight    map[string]bool
	ready       []*store.Record // taken from the store, waiting for a worker slot
	delivering  int             // handed to a worker
	uncommitted int             // delivered, outcome not committed yet
	perEndpoint map[string]int  // delivering, by endpoint
	queued      map[string]int  // ready plus delivering, by endpoint
	perKey      map[string]int  // in flight, by key (Ordered)
	health      health          // see health.go
	// scanning is set while a punctuation's snapshot is read; the events
	// released meanwhile go to releasedInScan, which it skips too.
	scanning       bool
	releasedInScan map[string]struct{}

	// probing holds the endpoints whose half-open breaker's probe is in
	// flight; meters the recent rate of deliveries started, by endpoint.
	probing map[string]bool
	meters  map[string]*rateMeter
	// paced is, by rate-limited endpoint, the time the last event of its
	// backlog was rescheduled to (see pacedAt); punctuations alone use it.
	paced map[string]time.Time
	// resume is, by endpoint, where the next read of its due run starts,
	// when the last one examined all it may without reaching the end (see
	// scan.read); punctuations alone use it.
	resume map[string][]byte
	// forward holds the endpoints whose breaker closed, for the next
	// punctuation to bring their events forward.
	forward map[string]bool
	// streaks is the live failure streak by endpoint (see tripLocked).
	streaks map[string]int
	// limits are the endpoints' adaptive in-flight limits, latencies
	// their recent delivery latencies (see adapt.go).
	limits    map[string]*limit
	latencies map[string]*latencies
	// The pacer (see pace) dispatches again at pacerAt, when a rate limit
	// refused a ready event; pacerPoke tells it pacerAt moved earlier.
	pacerAt   time.Time
	pacerPoke chan struct{}
	pacerStop chan struct{}

	// holds owns the endpoints' states and the lock that orders their
	// writes (see holds).
	holds *holds
}

type job struct {
	rec      *store.Record
	res      Result
	begun    time.Time // by the outbox's clock, when the Sink was called
	start    time.Time // monotonic, for the duration
	duration time.Duration
	ended    time.Time // by the outbox's clock, when the Sink returned
	probe    bool      // the probe of its endpoint's half-open breaker
	tripped  bool      // its failure held the endpoint before the commit
}

// New returns the engine of the outbox on st, with the endpoints' states
// read from it; Start starts its workers.
func New(st *store.Store, cfg Config) (*Engine, error) {
	c := &cfg
	e := &Engine{
		cfg:            cfg,
		st:             st,
		clock:          cfg.Clock,
		log:            cfg.Logger,
		readyCap:       max(1, min(c.BatchSize, c.Concurrency)),
		inflight:       make(map[string]bool),
		releasedInScan: make(map[string]struct{}),
		perEndpoint:    make(map[string]int),
		queued:         make(map[string]int),
		perKey:         make(map[string]int),
		probing:        make(map[string]bool),
		meters:         make(map[string]*rateMeter),
		paced:          make(map[string]time.Time),
		resume:         make(map[string][]byte),
		forward:        make(map[string]bool),
		streaks:        make(map[string]int),
		limits:         make(map[string]*limit),
		latencies:      make(map[string]*latencies),
	}
	h, err := newHolds(e)
	if err != nil {
		return nil, err
	}
	e.holds = h
	e.lowWater = e.readyCap / 2
	e.commitLimit = min(maxCommitBatch, c.MaxUncommitted)
	return e, nil
}

// Start starts the workers and the committer.
func (e *Engine) Start() {
	n := e.cfg.Concurrency
	e.jobs = make(chan *job, n)
	e.results = make(chan *job, n+e.cfg.MaxUncommitted) // never blocks a worker
	e.deliverCtx, e.cancelDeliver = context.WithCancel(context.Background())
	e.committerDone = make(chan struct{})
	e.abandon = make(chan struct{})
	e.commitNow = make(chan struct{}, 1)
	e.mu.Lock()
	e.running = true
	e.mu.Unlock()
	e.workers.Add(n)
	for range n {
		go e.work()
	}
	if e.cfg.Shared != nil {
		e.cfg.Shared.attach(e)
	}
	if e.cfg.Limiter != nil {
		e.pacerPoke = make(chan struct{}, 1)
		e.pacerStop = make(chan struct{})
		e.workers.Add(1)
		go e.pace()
	}
	go e.commitLoop()
}

// Stop stops taking events, lets in-flight deliveries finish until ctx is
// done (then cancels them), and waits until every outcome is committed.
// Ready events that no worker took stay pending in the store, untouched.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.running = false
	if e.cfg.Shared != nil {
		defer e.cfg.Shared.detach(e)
	}
	for _, r := range e.ready {
		e.forgetLocked(r)
	}
	e.ready = nil
	close(e.jobs)
	if e.pacerStop != nil {
		close(e.pacerStop)
	}
	e.mu.Unlock()

	workersDone := make(chan struct{})
	go func() { e.workers.Wait(); close(workersDone) }()
	var err error
	select {
	case <-workersDone:
	case <-ctx.Done():
		e.cancelDeliver()
		<-workersDone
		err = fmt.Errorf("outbox: stop: deliveries in flight were cancelled: %w", ctx.Err())
	}
	close(e.results)
	select {
	case <-e.committerDone:
	case <-ctx.Done():
		close(e.abandon)
		<-e.committerDone
		if e.gaveUp > 0 && err == nil {
			err = fmt.Errorf("outbox: stop: the outcomes of %d deliveries could not be committed and were given up, their events stay pending: %w",
				e.gaveUp, ctx.Err())
		}
	}
	e.cancelDeliver()
	return err
}

// LogStoreErr logs a store error of a background step; a closed store (the
// outbox stopping) is not worth more than a debug line, and damaged data is
// recorded in the engine's health (and logged once there).
func (e *Engine) LogStoreErr(step string, err error) {
	if e.NoteStoreErr(err) {
		return // logged once, when first found
	}
	if errors.Is(err, store.ErrClosed) || errors.Is(err, context.Canceled) {
		e.log.Debug("outbox: "+step, "err", err)
		return
	}
	e.log.Error("outbox: "+step, "err", err)
}

// limiter returns the endpoint's rate limiter, nil when it has none.
func (e *Engine) limiter(endpoint string) *rate.Limiter {
	if e.cfg.Limiter == nil {
		return nil
	}
	return e.cfg.Limiter(endpoint)
}

// wake asks for a delivery punctuation now.
func (e *Engine) wake() {
	if e.cfg.Wake != nil {
		e.cfg.Wake()
	}
}
