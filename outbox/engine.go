package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
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

// engine is the delivery machinery: the punctuation that takes due events
// from the store into a ready queue, the worker pool that hands them to the
// Sink, and the committer that applies their outcomes in batches.
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
	soonHeld    map[string]bool     // endpoints with a throttle or disable not yet committed
	health      health              // see health.go
	// scanning is set while a punctuation's snapshot is read; the events
	// released meanwhile go to releasedInScan, which it skips too.
	scanning       bool
	releasedInScan map[string]struct{}

	// holdMu serializes pushing back the events of a held endpoint with
	// EnableEndpoint's bringing them forward, so that a punctuation that saw
	// the endpoint disabled cannot defer its events after it was enabled.
	holdMu    sync.Mutex
	endpoints map[string]store.EndpointState // cache of the durable endpoint states

	// epMu is held by a commit from the moment it changes an endpoint in
	// the cache until the store has the change, and by the admin calls that
	// read or write endpoints in the store: they see what the cache (and
	// Stats) already shows, and EnableEndpoint cannot be overwritten by the
	// commit of a disable that was under way when it ran.
	epMu sync.Mutex
}

type job struct {
	rec      *store.Record
	res      Result
	begun    time.Time // by the outbox's clock, when the Sink was called
	start    time.Time // monotonic, for the duration
	duration time.Duration
	ended    time.Time // by the outbox's clock, when the Sink returned
}

func newEngine(o *Outbox) (*engine, error) {
	eps, err := o.st.Endpoints()
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
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
		soonHeld:         make(map[string]bool),
		endpoints:        make(map[string]store.EndpointState, len(eps)),
	}
	e.lowWater = e.readyCap / 2
	e.commitLimit = min(maxCommitBatch, c.MaxUncommitted)
	for _, ep := range eps {
		e.endpoints[ep.Name] = ep
	}
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

func (e *engine) work() {
	defer e.workers.Done()
	for j := range e.jobs {
		r := j.rec
		if e.held(r.Endpoint) {
			// Throttled or disabled while this event waited.
			j.res = Result{Action: actionNone}
		} else {
			d := &Delivery{
				ID:          r.ID,
				Key:         r.Key,
				Destination: r.Destination,
				Endpoint:    r.Endpoint,
				Method:      r.Method,
				Headers:     maps.Clone(r.Headers),
				Payload:     r.Payload,
				Attempt:     r.Deliveries + 1,
				CreatedAt:   r.CreatedAt,
			}
			j.begun = e.o.clock.Now()
			j.start = time.Now()
			j.res = e.deliver(d)
			j.duration = time.Since(j.start)
			j.ended = e.o.clock.Now()
		}
		refill, commitNow := e.finished(j)
		e.results <- j
		if commitNow {
			select {
			case e.commitNow <- struct{}{}:
			default: // one is pending already
			}
		}
		if refill {
			e.o.wake()
		}
	}
}

// deliver calls the Sink, turning a panic into a retry.
func (e *engine) deliver(d *Delivery) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			e.o.log.Error("outbox: sink panicked", "id", d.ID, "endpoint", d.Endpoint, "panic", fmt.Sprint(v))
			res = Result{Action: ActionRetry, Err: fmt.Errorf("sink panicked: %v", v)}
		}
	}()
	return e.o.sink.Deliver(e.deliverCtx, d)
}

// finished frees the delivery slot of a job whose Sink call returned (its
// event stays in flight until the outcome is committed), hands ready events
// to the free slots, and reports whether the ready queue runs low and
// whether the committer should stop waiting for more outcomes (see
// mayWait). A throttle or disable holds the endpoint at once, before the
// commit.
func (e *engine) finished(j *job) (refill, commitNow bool) {
	r := j.rec
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivering--
	e.uncommitted++
	decr(e.perEndpoint, r.Endpoint)
	decr(e.queued, r.Endpoint)
	if a := j.res.Action; a == ActionThrottle || a == ActionDisable {
		e.soonHeld[r.Endpoint] = true
	}
	e.dispatchLocked()
	commitNow = !e.mayWaitLocked(j) || e.uncommitted >= e.commitLimit
	return e.running && len(e.ready) <= e.lowWater, commitNow
}

// dispatchLocked hands ready events to free worker slots, in queue order,
// skipping events whose endpoint is at its limit.
func (e *engine) dispatchLocked() int {
	if !e.running || e.health.faulty() {
		// While the file is damaged or outcomes cannot be committed, a
		// delivery started now could not have its outcome recorded.
		return 0
	}
	c := &e.o.cfg
	n, kept := 0, 0
	for i, r := range e.ready {
		if e.delivering >= c.Concurrency || e.uncommitted >= c.MaxUncommitted {
			kept += copy(e.ready[kept:], e.ready[i:])
			break
		}
		if e.perEndpoint[r.Endpoint] >= c.MaxPerEndpoint {
			e.ready[kept] = r
			kept++
			continue
		}
		e.delivering++
		e.perEndpoint[r.Endpoint]++
		e.jobs <- &job{rec: r}
		n++
	}
	clear(e.ready[kept:])
	e.ready = e.ready[:kept]
	return n
}

// forgetLocked drops an event from the in-flight state without an outcome.
func (e *engine) forgetLocked(r *store.Record) {
	delete(e.inflight, r.ID)
	decr(e.queued, r.Endpoint)
	if e.o.cfg.Ordered && r.Key != "" {
		decr(e.perKey, r.Key)
	}
}

func decr(m map[string]int, k string) {
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// punctuate is the delivery punctuation: take a snapshot of due events that
// are not in flight and whose endpoint and key may go into the ready queue,
// and hand what it can to free workers. It returns without waiting for the
// deliveries.
func (e *engine) punctuate(ctx context.Context, _ time.Time) {
	o := e.o
	t0 := time.Now()
	started := 0
	defer func() { o.hookPunctuation(time.Since(t0), started) }()

	e.mu.Lock()
	if !e.running || e.health.faulty() {
		e.mu.Unlock()
		return
	}
	room := e.readyCap - len(e.ready)
	e.mu.Unlock()
	if room <= 0 {
		return
	}
	now := o.clock.Now()
	next, ok, err := o.st.NextDue()
	if err != nil {
		o.logStoreErr("next due", err)
		return
	}
	if !ok || next.After(now) {
		return
	}

	// Mark the scan before the snapshot's read transaction starts: an event
	// released after this point may have had its outcome committed after
	// the snapshot began, which may then still show its old version; the
	// scan skips it as in flight (releasedInScan). An event released before
	// had its outcome committed before, and the snapshot shows it. The
	// in-flight set is looked up live, not copied: it holds up to
	// Concurrency + MaxUncommitted IDs, and a punctuation may take a few.
	e.mu.Lock()
	e.scanning = true
	inflightN := len(e.inflight)
	queued := maps.Clone(e.queued)
	perKey := maps.Clone(e.perKey)
	holds := make(map[string]store.EndpointState)
	for name, ep := range e.endpoints {
		if ep.Disabled || ep.NotBefore.After(now) {
			holds[name] = ep
		}
	}
	for name := range e.soonHeld {
		if _, ok := holds[name]; !ok {
			holds[name] = store.EndpointState{Name: name} // held, not deferred
		}
	}
	e.mu.Unlock()

	var deferred []store.Outcome
	var deferredEP []string // the endpoint of each deferred event
	recs, err := o.st.Due(store.DueQuery{
		Now:   now,
		Limit: room,
		SkipID: func(id []byte) bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			if _, busy := e.inflight[string(id)]; busy {
				return true
			}
			_, busy := e.releasedInScan[string(id)]
			return busy
		},
		Skip: func(r *store.Record) bool {
			if ep, held := holds[r.Endpoint]; held {
				until := ep.NotBefore
				if ep.Disabled {
					until = now.Add(disabledDefer)
				}
				if until.After(r.NextAttemptAt) && len(deferred) < o.cfg.BatchSize {
					deferred = append(deferred, store.Outcome{
						Kind:          store.OutcomeReschedule,
						ID:            r.ID,
						Version:       r.Version,
						Attempts:      r.Attempts,
						Deliveries:    r.Deliveries,
						NextAttemptAt: until,
						LastStatus:    r.LastStatus,
						LastError:     r.LastError,
					})
					deferredEP = append(deferredEP, r.Endpoint)
				}
				return true
			}
			if queued[r.Endpoint] >= e.readyPerEndpoint {
				return true
			}
			if o.cfg.Ordered && r.Key != "" {
				if perKey[r.Key] > 0 {
					return true
				}
				perKey[r.Key]++
			}
			queued[r.Endpoint]++
			return false
		},
		HeadOfKeyOnly: o.cfg.Ordered,
		// In flight events are skipped before decoding; beyond them, a
		// bounded number of decoded records may be refused (held endpoint,
		// endpoint at its limit, busy key).
		MaxScan: inflightN + 2*room + 64,
	})
	e.mu.Lock()
	e.scanning = false
	clear(e.releasedInScan)
	e.mu.Unlock()
	if err != nil {
		o.logStoreErr("due", err)
		return
	}

	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return
	}
	for _, r := range recs {
		if _, busy := e.inflight[r.ID]; busy {
			continue
		}
		e.inflight[r.ID] = struct{}{}
		e.queued[r.Endpoint]++
		if o.cfg.Ordered && r.Key != "" {
			e.perKey[r.Key]++
		}
		e.ready = append(e.ready, r)
	}
	started = e.dispatchLocked()
	e.mu.Unlock()

	if len(deferred) > 0 {
		e.deferHeld(ctx, deferred, deferredEP)
	}
}

// deferHeld commits the push-back of events whose endpoint was held when the
// punctuation looked. Under holdMu it keeps only those whose endpoint is
// still held: an endpoint enabled in between has had its events brought
// forward already, and must not lose them for another hour.
func (e *engine) deferHeld(ctx context.Context, deferred []store.Outcome, endpoints []string) {
	e.holdMu.Lock()
	defer e.holdMu.Unlock()
	now := e.o.clock.Now()
	e.mu.Lock()
	kept := deferred[:0]
	for i, out := range deferred {
		ep, ok := e.endpoints[endpoints[i]]
		if ok && (ep.Disabled || ep.NotBefore.After(now)) {
			kept = append(kept, out)
		}
	}
	e.mu.Unlock()
	if len(kept) == 0 {
		return
	}
	if _, err := e.o.st.Apply(ctx, kept, nil); err != nil {
		e.o.logStoreErr("defer held events", err)
	}
}

// release forgets the jobs' events as in flight, once their outcomes are
// committed.
func (e *engine) release(batch []*job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range batch {
		r := j.rec
		delete(e.inflight, r.ID)
		if e.scanning {
			e.releasedInScan[r.ID] = struct{}{}
		}
		e.uncommitted--
		if e.o.cfg.Ordered && r.Key != "" {
			decr(e.perKey, r.Key)
		}
	}
	e.dispatchLocked()
}

// commitLoop gathers finished deliveries and commits their outcomes, one
// transaction per batch: whatever finished meanwhile, and while deliveries
// are under way whatever finishes within CommitInterval of the first. The
// wait sleeps on a timer, not on each outcome: workers signal commitNow when
// the batch is full or nothing else is under way.
func (e *engine) commitLoop() {
	defer close(e.committerDone)
	c := &e.o.cfg
	batch := make([]*job, 0, e.commitLimit)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for j := range e.results {
		batch = append(batch[:0], j)
		if c.CommitInterval > 0 && e.mayWait(j) {
			// A signal left over from an earlier batch only ends this
			// wait early; a signal for this one may have come before j.
			timer.Reset(c.CommitInterval)
			select {
			case <-timer.C:
			case <-e.commitNow:
			}
			timer.Stop()
		}
	gather:
		for len(batch) < e.commitLimit {
			select {
			case j, ok := <-e.results:
				if !ok {
					break gather
				}
				batch = append(batch, j)
			default:
				break gather
			}
		}
		e.commit(batch)
	}
}

// mayWait reports whether the commit that will include j's outcome may wait
// for more outcomes: some delivery is under way, and j is not a keyed event
// of an Ordered outbox (whose successor waits for this commit).
func (e *engine) mayWait(j *job) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mayWaitLocked(j) && e.uncommitted < e.commitLimit
}

func (e *engine) mayWaitLocked(j *job) bool {
	if e.o.cfg.Ordered && j.rec.Key != "" {
		return false
	}
	return e.running && e.delivering > 0
}

// commit applies the outcomes of a batch of finished deliveries. When the
// store refuses the write (a full disk, say), the outcomes stay in memory
// and their events in flight: no delivery starts meanwhile (see health), and
// the write is retried until it succeeds, so a failing disk repeats no
// delivery; only Stop's deadline gives them up (see stop).
func (e *engine) commit(batch []*job) {
	o := e.o
	stopping := e.deliverCtx.Err() != nil
	outs, touched, infos := e.outcomes(batch, o.clock.Now().UTC(), stopping)
	if len(outs) > 0 || len(touched) > 0 {
		if !e.apply(outs, touched) {
			e.release(batch)
			return
		}
	}
	e.release(batch)
	for _, info := range infos {
		switch {
		case info.Action == ActionSuccess:
			o.deliveredTotal.Add(1)
		default:
			o.failedTotal.Add(1)
		}
		if info.Dead {
			o.deadTotal.Add(1)
		}
		o.hookDelivery(info)
	}
	// Committed events left the in-flight set: refill the ready queue if it
	// runs low, and look again at once after failures (a retry may already
	// be due).
	failed := slices.ContainsFunc(outs, func(out store.Outcome) bool { return out.Kind != store.OutcomeDelete })
	if !stopping && (failed || e.readyLow()) {
		o.wake()
	}
}

// outcomes turns a batch's results into the store outcomes to commit, the
// names of the endpoints whose state they change (the engine's cache has
// the new states already), and what the delivery hooks are told.
func (e *engine) outcomes(batch []*job, now time.Time, stopping bool) ([]store.Outcome, []string, []DeliveryInfo) {
	o := e.o
	outs := make([]store.Outcome, 0, len(batch))
	infos := make([]DeliveryInfo, 0, len(batch))
	var touched []string
	e.epMu.Lock()
	defer e.epMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range batch {
		r, res := j.rec, j.res
		if res.Action == actionNone || (stopping && res.Action == ActionRetry) {
			// Not attempted, or interrupted by Stop: no attempt spent, the
			// event stays due.
			continue
		}
		ep, ok := e.endpoints[r.Endpoint]
		if !ok {
			ep = store.EndpointState{Name: r.Endpoint}
		}
		out, newEP, dead := o.outcome(r, res, ep, j.begun, now)
		if newEP != ep {
			newEP.UpdatedAt = now
			if !slices.Contains(touched, r.Endpoint) {
				touched = append(touched, r.Endpoint)
			}
			e.endpoints[r.Endpoint] = newEP
		}
		if res.Action == ActionThrottle || res.Action == ActionDisable {
			delete(e.soonHeld, r.Endpoint) // now in the cache
		}
		if out != nil {
			outs = append(outs, *out)
		}
		infos = append(infos, DeliveryInfo{
			ID:           r.ID,
			Endpoint:     r.Endpoint,
			Action:       res.Action,
			Dead:         dead,
			Status:       res.Status,
			Attempt:      r.Deliveries + 1,
			Duration:     j.duration,
			SinceEnqueue: j.ended.Sub(r.CreatedAt), // the attempt's end, not its commit's
		})
	}
	return outs, touched, infos
}

// Waits between two tries to commit outcomes that the store refused.
const (
	commitRetryMin = 50 * time.Millisecond
	commitRetryMax = 2 * time.Second
)

// apply writes outcomes and the current cached state of the touched
// endpoints, retrying while the store refuses. It reports false when the
// outcomes were given up: the store is closed or the file damaged (nothing
// more can be written), or Stop's deadline passed.
//
// epMu is held by each try (from reading the cache to the store having it),
// not across the waits, so that admin calls are not held up by a failing
// disk; a try after a wait writes the endpoints as the cache has them then,
// which includes what EnableEndpoint did meanwhile.
func (e *engine) apply(outs []store.Outcome, touched []string) bool {
	o := e.o
	wait := commitRetryMin
	var timer *time.Timer
	for first := true; ; first = false {
		if !first {
			if timer == nil {
				timer = time.NewTimer(wait)
				defer timer.Stop()
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-e.abandon:
				e.gaveUp += len(outs)
				return false
			}
			wait = min(2*wait, commitRetryMax)
		}
		e.epMu.Lock()
		e.mu.Lock()
		eps := make([]store.EndpointState, 0, len(touched))
		for _, name := range touched {
			eps = append(eps, e.endpoints[name])
		}
		e.mu.Unlock()
		results, err := o.st.Apply(context.Background(), outs, eps)
		e.epMu.Unlock()
		switch {
		case err == nil:
			for i, res := range results {
				if res == store.Stale {
					o.log.Debug("outbox: outcome for a changed event not applied", "id", outs[i].ID, "version", outs[i].Version)
				}
			}
			e.commitRecovered()
			return true
		case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrInvalid):
			o.logStoreErr("commit outcomes", err)
			return false
		case o.noteStoreErr(err):
			return false
		}
		e.commitFailed(err)
	}
}

// readyLow reports whether the ready queue should be refilled.
func (e *engine) readyLow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running && len(e.ready) <= e.lowWater
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

// held reports whether the endpoint is disabled or throttled now, or the
// outbox is stopping (jobs not started yet are left pending).
func (e *engine) held(endpoint string) bool {
	now := e.o.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running || e.soonHeld[endpoint] {
		return true
	}
	ep, ok := e.endpoints[endpoint]
	return ok && (ep.Disabled || ep.NotBefore.After(now))
}

// inFlight returns the number of deliveries under way (queued for or in a
// worker).
func (e *engine) inFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivering
}

// endpointHolds counts the endpoints throttled now and disabled.
func (e *engine) endpointHolds(now time.Time) (throttled, disabled int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ep := range e.endpoints {
		switch {
		case ep.Disabled:
			disabled++
		case ep.NotBefore.After(now):
			throttled++
		}
	}
	return throttled, disabled
}

// setEndpoint replaces the cached state of an endpoint.
func (e *engine) setEndpoint(ep store.EndpointState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endpoints[ep.Name] = ep
}

// isInFlight reports whether the event is being delivered.
func (e *engine) isInFlight(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.inflight[id]
	return ok
}
