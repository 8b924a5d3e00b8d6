package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outboxd/outbox/store"
)

// disabledDefer is how far the events of a disabled endpoint are pushed back
// when a punctuation meets them, so that they do not clog the head of the due
// index; EnableEndpoint brings them forward again.
const disabledDefer = time.Hour

// maxCommitBatch caps the outcomes committed in one transaction.
const maxCommitBatch = 1024

// engine is the delivery machinery, in three jobs as river splits its
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
type engine struct {
	o *Outbox

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

	// Limits of the ready queue: overall, and per endpoint (ready plus
	// delivering), so that one slow endpoint cannot fill it.
	readyCap, readyPerEndpoint, lowWater int

	mu          sync.Mutex
	running     bool                // workers started and not stopped
	inflight    map[string]struct{} // ready, delivering, or awaiting the commit of its outcome
	ready       []*store.Record     // taken from the store, waiting for a worker slot
	delivering  int                 // handed to a worker
	uncommitted int                 // delivered, outcome not committed yet
	perEndpoint map[string]int      // delivering, by endpoint
	queued      map[string]int      // ready plus delivering, by endpoint
	perKey      map[string]int      // in flight, by key (Ordered)
	health      health              // see health.go
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
	// forward holds the endpoints whose breaker closed, for the next
	// punctuation to bring their events forward.
	forward map[string]bool
	// streaks is the live failure streak by endpoint (see tripLocked).
	streaks map[string]int
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

func newEngine(o *Outbox) (*engine, error) {
	h, err := newHolds(o)
	if err != nil {
		return nil, err
	}
	c := &o.cfg
	e := &engine{
		o:                o,
		readyCap:         max(1, min(c.BatchSize, c.Concurrency)),
		readyPerEndpoint: c.MaxPerEndpoint + c.Concurrency,
		inflight:         make(map[string]struct{}),
		releasedInScan:   make(map[string]struct{}),
		perEndpoint:      make(map[string]int),
		queued:           make(map[string]int),
		perKey:           make(map[string]int),
		probing:          make(map[string]bool),
		meters:           make(map[string]*rateMeter),
		paced:            make(map[string]time.Time),
		forward:          make(map[string]bool),
		streaks:          make(map[string]int),
		holds:            h,
	}
	e.lowWater = e.readyCap / 2
	e.commitLimit = min(maxCommitBatch, c.MaxUncommitted)
	return e, nil
}

// start starts the workers and the committer.
func (e *engine) start() {
	n := e.o.cfg.Concurrency
	e.jobs = make(chan *job, n)
	e.results = make(chan *job, n+e.o.cfg.MaxUncommitted) // never blocks a worker
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
	if !e.o.cfg.RateLimits.empty() {
		e.pacerPoke = make(chan struct{}, 1)
		e.pacerStop = make(chan struct{})
		e.workers.Add(1)
		go e.pace()
	}
	go e.commitLoop()
}

// stop stops taking events, lets in-flight deliveries finish until ctx is
// done (then cancels them), and waits until every outcome is committed.
// Ready events that no worker took stay pending in the store, untouched.
func (e *engine) stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.running = false
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

// logStoreErr logs a store error of a background step; a closed store (the
// outbox stopping) is not worth more than a debug line, and damaged data is
// recorded in the outbox's health (and logged once there).
func (o *Outbox) logStoreErr(step string, err error) {
	if o.noteStoreErr(err) {
		return // logged once, when first found
	}
	if errors.Is(err, store.ErrClosed) || errors.Is(err, context.Canceled) {
		o.log.Debug("outbox: "+step, "err", err)
		return
	}
	o.log.Error("outbox: "+step, "err", err)
}
