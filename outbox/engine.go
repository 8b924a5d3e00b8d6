package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
// from the store, the worker pool that hands them to the Sink, and the
// committer that applies their outcomes in batches.
//
// Every event handed to a worker is "in flight" from the moment the
// punctuation takes it until its outcome is committed; in-flight events are
// never taken again, and the number in flight never exceeds Concurrency, so
// the jobs and results channels (capacity Concurrency) never block.
type engine struct {
	o *Outbox

	jobs    chan *job
	results chan *job

	deliverCtx    context.Context
	cancelDeliver context.CancelFunc
	workers       sync.WaitGroup
	committerDone chan struct{}

	mu          sync.Mutex
	running     bool // workers started and not stopped
	inflight    map[string]struct{}
	perEndpoint map[string]int
	perKey      map[string]int
	endpoints   map[string]store.EndpointState // cache of the durable endpoint states
}

type job struct {
	rec      *store.Record
	res      Result
	start    time.Time // monotonic, for the duration
	duration time.Duration
}

func newEngine(o *Outbox) (*engine, error) {
	eps, err := o.st.Endpoints()
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	e := &engine{
		o:           o,
		inflight:    make(map[string]struct{}),
		perEndpoint: make(map[string]int),
		perKey:      make(map[string]int),
		endpoints:   make(map[string]store.EndpointState, len(eps)),
	}
	for _, ep := range eps {
		e.endpoints[ep.Name] = ep
	}
	return e, nil
}

// start starts the workers and the committer.
func (e *engine) start() {
	n := e.o.cfg.Concurrency
	e.jobs = make(chan *job, n)
	e.results = make(chan *job, n)
	e.deliverCtx, e.cancelDeliver = context.WithCancel(context.Background())
	e.committerDone = make(chan struct{})
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
func (e *engine) stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.running = false
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
	<-e.committerDone
	e.cancelDeliver()
	return err
}

func (e *engine) work() {
	defer e.workers.Done()
	for j := range e.jobs {
		r := j.rec
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
		if e.held(r.Endpoint) {
			// Throttled or disabled while this job waited for a worker.
			j.res = Result{Action: actionNone}
			e.results <- j
			continue
		}
		j.start = time.Now()
		j.res = e.deliver(d)
		j.duration = time.Since(j.start)
		e.results <- j
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

// punctuate is the delivery punctuation: take a snapshot of due events that
// are not in flight and whose endpoint and key may go, and hand them to the
// workers. It returns without waiting for the deliveries; the committer wakes
// it again when slots free up.
func (e *engine) punctuate(ctx context.Context, _ time.Time) {
	o := e.o
	t0 := time.Now()
	started := 0
	defer func() { o.hookPunctuation(time.Since(t0), started) }()

	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return
	}
	free := o.cfg.Concurrency - len(e.inflight)
	e.mu.Unlock()
	if free <= 0 {
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

	// Copy the in-flight state before the snapshot's read transaction
	// starts: an event released after this point had its outcome committed
	// after the copy, so the snapshot may still show its old version, and
	// the copy still skips it.
	e.mu.Lock()
	inflight := maps.Clone(e.inflight)
	perEndpoint := maps.Clone(e.perEndpoint)
	perKey := maps.Clone(e.perKey)
	holds := make(map[string]store.EndpointState)
	for name, ep := range e.endpoints {
		if ep.Disabled || ep.NotBefore.After(now) {
			holds[name] = ep
		}
	}
	e.mu.Unlock()

	limit := min(free, o.cfg.BatchSize)
	var deferred []store.Outcome
	recs, err := o.st.Due(store.DueQuery{
		Now:   now,
		Limit: limit,
		SkipID: func(id string) bool {
			_, busy := inflight[id]
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
				}
				return true
			}
			if perEndpoint[r.Endpoint] >= o.cfg.MaxPerEndpoint {
				return true
			}
			if o.cfg.Ordered && r.Key != "" {
				if perKey[r.Key] > 0 {
					return true
				}
				perKey[r.Key]++
			}
			perEndpoint[r.Endpoint]++
			return false
		},
		HeadOfKeyOnly: o.cfg.Ordered,
		MaxScan:       len(inflight) + 4*limit + o.cfg.BatchSize,
	})
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
		e.perEndpoint[r.Endpoint]++
		if o.cfg.Ordered && r.Key != "" {
			e.perKey[r.Key]++
		}
		e.jobs <- &job{rec: r}
		started++
	}
	e.mu.Unlock()

	if len(deferred) > 0 {
		if _, err := o.st.Apply(ctx, deferred, nil); err != nil {
			o.logStoreErr("defer held events", err)
		}
	}
}

// release forgets the jobs' events as in flight.
func (e *engine) release(batch []*job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range batch {
		r := j.rec
		delete(e.inflight, r.ID)
		if n := e.perEndpoint[r.Endpoint] - 1; n > 0 {
			e.perEndpoint[r.Endpoint] = n
		} else {
			delete(e.perEndpoint, r.Endpoint)
		}
		if e.o.cfg.Ordered && r.Key != "" {
			if n := e.perKey[r.Key] - 1; n > 0 {
				e.perKey[r.Key] = n
			} else {
				delete(e.perKey, r.Key)
			}
		}
	}
}

// commitLoop gathers finished deliveries and commits their outcomes, one
// transaction per batch of whatever finished meanwhile.
func (e *engine) commitLoop() {
	defer close(e.committerDone)
	batch := make([]*job, 0, maxCommitBatch)
	for j := range e.results {
		batch = append(batch[:0], j)
	gather:
		for len(batch) < maxCommitBatch {
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

// commit applies the outcomes of a batch of finished deliveries.
func (e *engine) commit(batch []*job) {
	o := e.o
	now := o.clock.Now().UTC()
	stopping := e.deliverCtx.Err() != nil

	outs := make([]store.Outcome, 0, len(batch))
	infos := make([]DeliveryInfo, 0, len(batch))
	touched := make(map[string]store.EndpointState)

	e.mu.Lock()
	for _, j := range batch {
		r, res := j.rec, j.res
		if res.Action == actionNone || (stopping && res.Action == ActionRetry) {
			// Not attempted, or interrupted by Stop: no attempt spent, the
			// event stays due.
			continue
		}
		ep, ok := touched[r.Endpoint]
		if !ok {
			ep, ok = e.endpoints[r.Endpoint]
			if !ok {
				ep = store.EndpointState{Name: r.Endpoint}
			}
		}
		out, newEP, dead := o.outcome(r, res, ep, now)
		if newEP != ep {
			newEP.UpdatedAt = now
			touched[r.Endpoint] = newEP
			e.endpoints[r.Endpoint] = newEP
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
			SinceEnqueue: now.Sub(r.CreatedAt),
		})
	}
	e.mu.Unlock()

	eps := make([]store.EndpointState, 0, len(touched))
	for _, ep := range touched {
		eps = append(eps, ep)
	}
	if len(outs) > 0 || len(eps) > 0 {
		results, err := o.st.Apply(context.Background(), outs, eps)
		if err != nil {
			o.logStoreErr("commit outcomes", err)
		} else {
			for i, res := range results {
				if res == store.Stale {
					o.log.Debug("outbox: outcome for a changed event not applied", "id", outs[i].ID, "version", outs[i].Version)
				}
			}
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
	if !stopping {
		o.wake()
	}
}

// logStoreErr logs a store error of a background step; a closed store (the
// outbox stopping) is not worth more than a debug line.
func (o *Outbox) logStoreErr(step string, err error) {
	if errors.Is(err, store.ErrClosed) || errors.Is(err, context.Canceled) {
		o.log.Debug("outbox: "+step, "err", err)
		return
	}
	o.log.Error("outbox: "+step, "err", err)
}

// held reports whether the endpoint is disabled or throttled now.
func (e *engine) held(endpoint string) bool {
	now := e.o.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	ep, ok := e.endpoints[endpoint]
	return ok && (ep.Disabled || ep.NotBefore.After(now))
}

// inFlight returns the number of deliveries in flight.
func (e *engine) inFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inflight)
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
