package engine

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/outboxd/outbox/outbox/internal/ratelimit"
	"github.com/outboxd/outbox/store"
)

// work is a worker's goroutine: it delivers the jobs dispatched to it.
func (e *Engine) work() {
	defer e.workers.Done()
	for j := range e.jobs {
		r := j.rec
		if e.held(r.Endpoint) {
			// Throttled or disabled while this event waited.
			j.res = Result{Action: actionNone}
		} else {
			ctx, span := e.startAttempt(r)
			j.begun = e.clock.Now()
			j.start = time.Now()
			j.res = e.deliver(ctx, r, j.probe)
			j.duration = time.Since(j.start)
			j.ended = e.clock.Now()
			endAttempt(span, &j.res)
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
			e.wake()
		}
	}
}

// deliver calls the Sink, turning a panic into a retry.
func (e *Engine) deliver(ctx context.Context, r *store.Record, probe bool) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("outbox: sink panicked", "id", store.GroupOf(r.ID), "endpoint", r.Endpoint, "panic", fmt.Sprint(v))
			res = Result{Action: ActionRetry, Err: fmt.Errorf("sink panicked: %v", v)}
		}
	}()
	return e.cfg.Deliver(ctx, r, probe)
}

// finished frees the delivery slot of a job whose Sink call returned (its
// event stays in flight until the outcome is committed), hands ready events
// to the free slots, and reports whether the ready queue runs low and
// whether the committer should stop waiting for more outcomes (see
// mayWait). A throttle or disable holds the endpoint at once, before the
// commit.
func (e *Engine) finished(j *job) (refill, commitNow bool) {
	r := j.rec
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivering--
	e.uncommitted++
	decr(e.perEndpoint, r.Endpoint)
	decr(e.queued, r.Endpoint)
	switch j.res.Action {
	case ActionThrottle, ActionDisable:
		e.holds.holdSoon(r.Endpoint)
	case actionNone:
		e.inflight[r.ID] = true // waiting again, as it was before it was taken
	}
	e.tripLocked(j)
	e.observeLocked(j)
	e.dispatchLocked()
	commitNow = !e.mayWaitLocked(j) || e.uncommitted >= e.commitLimit
	return e.running && len(e.ready) <= e.lowWater, commitNow
}

// dispatchLocked hands ready events to free worker slots, fairly across
// endpoints: first to the endpoints under their fair share of the workers
// (Concurrency divided among the endpoints with events ready or under way),
// then to any endpoint within its in-flight limit (see capLocked). Within a
// pass, events go in queue order.
func (e *Engine) dispatchLocked() int {
	if !e.running || e.health.faulty() {
		// While the file is damaged or outcomes cannot be committed, a
		// delivery started now could not have its outcome recorded.
		return 0
	}
	now := time.Now()
	share := max(1, e.cfg.Concurrency/max(1, len(e.queued)))
	n := e.dispatchPass(share, now)
	if len(e.ready) > 0 {
		n += e.dispatchPass(e.cfg.Concurrency, now)
	}
	return n
}

// dispatchPass hands ready events to free worker slots while their
// endpoint has fewer than passCap (and its own cap) under way, keeping the
// others ready in their order.
func (e *Engine) dispatchPass(passCap int, now time.Time) int {
	c := &e.cfg
	n, kept := 0, 0
	for i, r := range e.ready {
		if e.delivering >= c.Concurrency || e.uncommitted >= c.MaxUncommitted {
			kept += copy(e.ready[kept:], e.ready[i:])
			break
		}
		if e.perEndpoint[r.Endpoint] >= min(passCap, e.capLocked(r.Endpoint)) {
			e.ready[kept] = r
			kept++
			continue
		}
		ok, probe := e.allowLocked(r, now)
		if !ok {
			e.ready[kept] = r
			kept++
			continue
		}
		e.delivering++
		e.perEndpoint[r.Endpoint]++
		e.jobs <- &job{rec: r, probe: probe}
		n++
	}
	clear(e.ready[kept:])
	e.ready = e.ready[:kept]
	return n
}

// forgetLocked drops an event from the in-flight state without an outcome.
func (e *Engine) forgetLocked(r *store.Record) {
	delete(e.inflight, r.ID)
	decr(e.queued, r.Endpoint)
	if e.cfg.Ordered && r.Key != "" {
		decr(e.perKey, orderKey(r))
	}
}

func decr(m map[string]int, k string) {
	if n := m[k] - 1; n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// Punctuate is the delivery punctuation: take a snapshot of due events that
// are not in flight and whose endpoint and key may go into the ready queue,
// and hand what it can to free workers. It returns without waiting for the
// deliveries.
func (e *Engine) Punctuate(ctx context.Context, _ time.Time) {
	t0 := time.Now()
	started := 0
	if f := e.cfg.Hooks.OnPunctuation; f != nil {
		defer func() { f(time.Since(t0), started) }()
	}

	now := e.clock.Now()
	e.bringForwardClosed(ctx, now)
	room := e.room(now)
	if room == 0 {
		return
	}
	sc := e.newScan(now)
	recs, err := sc.read(room)
	e.endScan()
	if err != nil {
		e.LogStoreErr("due", err)
		return
	}
	started = e.take(recs)
	if len(sc.paced) > 0 {
		e.deferPaced(ctx, sc.paced, sc.pacedEP)
	}
	if len(sc.unrouted) > 0 && e.cfg.ExpireUnrouted != nil {
		e.cfg.ExpireUnrouted(ctx, sc.unrouted)
	}
}

// read reads the due events the scan may take, endpoint by endpoint (see
// pick), in one short read transaction of the per-endpoint due index.
func (sc *scan) read(room int) ([]*store.Record, error) {
	picks, err := sc.pick(room)
	if err != nil || len(picks) == 0 {
		return nil, err
	}
	most := 0
	for i, p := range picks {
		most = max(most, p.Limit)
		picks[i].From = sc.e.resume[p.Endpoint]
	}
	due, err := sc.e.st.DueByEndpoint(store.DueByEndpointQuery{
		Now:           sc.now,
		Endpoints:     picks,
		SkipID:        sc.skipID,
		Skip:          sc.skip,
		HeadOfKeyOnly: sc.e.cfg.Ordered,
		// In flight events are skipped before decoding; beyond them, a
		// bounded number of decoded records may be refused (busy key,
		// rate limit).
		MaxScan: sc.inflight + 2*most + 64,
	})
	if err != nil {
		return nil, err
	}
	var recs []*store.Record
	for i, d := range due {
		recs = append(recs, d.Records...)
		sc.resumeAt(d, picks[i].Limit)
	}
	return recs, nil
}

// resumeAt keeps where the next read of d's endpoint starts. A read that
// stopped at its scan bound short of its limit examined only entries it
// had to skip (in flight, followers of a key whose head is not due, refused
// by a rate limit): the next one goes on after them, or the entries behind
// them would never be read, and an ordered endpoint whose waiting followers
// outnumber the bound would deliver nothing more. A read that reached the
// end of the due entries, or filled its limit, lets the next start at the
// front again.
func (sc *scan) resumeAt(d store.EndpointDue, limit int) {
	if d.More && len(d.Records) < limit {
		sc.e.resume[d.Endpoint] = d.Resume
		return
	}
	delete(sc.e.resume, d.Endpoint)
}

// pick chooses the endpoints whose due events a punctuation reads, earliest
// due first, each up to what it may take into the ready queue (see want),
// until room is filled. A held endpoint (disabled, throttled, breaker open)
// is passed over at the cost of one look, whatever its backlog, and its
// events stay where they are until the hold ends.
func (sc *scan) pick(room int) ([]store.EndpointLimit, error) {
	var picks []store.EndpointLimit
	err := sc.e.st.DueHeads(sc.now, func(endpoint string, _ time.Time) bool {
		if endpoint == "" {
			// Unrouted events are never delivered: skip collects those
			// whose retention ended, and they take no room.
			picks = append(picks, store.EndpointLimit{Endpoint: "", Limit: room})
			return true
		}
		if n := min(sc.want(endpoint), room); n > 0 {
			picks = append(picks, store.EndpointLimit{Endpoint: endpoint, Limit: n})
			room -= n
		}
		return room > 0
	})
	return picks, err
}

// want returns how many more of endpoint's events the ready queue may hold:
// its quota less what it holds or delivers; one, the probe, for a
// half-open breaker with nothing under way; none while it is held. A
// rate-limited endpoint is read even when its share is full, so that skip
// spreads its backlog at the limit's pace.
func (sc *scan) want(endpoint string) int {
	if ep, held := sc.holds[endpoint]; held {
		halfOpen := !heldAt(ep, sc.now) && !ep.BreakerUntil.IsZero()
		if halfOpen && sc.queued[endpoint] == 0 && sc.e.mayProbe(endpoint, sc.now) {
			return 1
		}
		return 0
	}
	n := sc.quota(endpoint) - sc.queued[endpoint]
	if lim := sc.e.limiter(endpoint); lim != nil {
		n = max(1, min(n, lim.Burst()-sc.queued[endpoint]))
	}
	return n
}

// room returns how many events a punctuation at now may take into the
// ready queue: 0 when the engine is stopping or faulty, the queue is full,
// or nothing is due.
func (e *Engine) room(now time.Time) int {
	e.mu.Lock()
	if !e.running || e.health.faulty() {
		e.mu.Unlock()
		return 0
	}
	room := e.readyCap - len(e.ready)
	e.mu.Unlock()
	if room <= 0 {
		return 0
	}
	next, ok, err := e.st.NextDue()
	if err != nil {
		e.LogStoreErr("next due", err)
		return 0
	}
	if !ok || next.After(now) {
		return 0
	}
	return room
}

// scan is one punctuation's pass over the due events: the limits it fills
// the ready queue within, and the events of rate-limited endpoints it
// spreads at their limit's pace.
type scan struct {
	e        *Engine
	now      time.Time
	inflight int // events in flight when it began
	holds    map[string]store.EndpointState
	queued   map[string]int // ready plus delivering, by endpoint, with what it took
	perKey   map[string]int // in flight, by key, with what it took (Ordered)

	unrouted []*store.Record // events kept unrouted whose retention ended

	paced   []store.Outcome // push-backs of rate-limited endpoints' events
	pacedEP []string        // the endpoint of each
}

// newScan marks the scan before the snapshot's read transaction starts: an
// event released after this point may have had its outcome committed after
// the snapshot began, which may then still show its old version; the scan
// skips it as in flight (releasedInScan). An event released before had its
// outcome committed before, and the snapshot shows it. The in-flight set is
// looked up live, not copied: it holds up to Concurrency + MaxUncommitted
// IDs, and a punctuation may take a few.
func (e *Engine) newScan(now time.Time) *scan {
	sc := &scan{e: e, now: now, holds: e.holds.heldNow(now)}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scanning = true
	sc.inflight = len(e.inflight)
	sc.queued = maps.Clone(e.queued)
	sc.perKey = maps.Clone(e.perKey)
	return sc
}

// endScan ends what newScan began.
func (e *Engine) endScan() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.scanning = false
	clear(e.releasedInScan)
}

// skipID skips events in flight, and those released during the scan.
func (sc *scan) skipID(id []byte) bool {
	e := sc.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, busy := e.inflight[string(id)]; busy {
		return true
	}
	_, busy := e.releasedInScan[string(id)]
	return busy
}

// skip refuses events of endpoints whose share of the ready queue is full,
// and of keys with an event in flight (Ordered); pick reads a held
// endpoint's events only for the probe of its half-open breaker. A
// rate-limited endpoint's share is its burst; its others are pushed back to
// when its limit will let them go (see pacedAt).
func (sc *scan) skip(r *store.Record) bool {
	e, c := sc.e, &sc.e.cfg
	if r.Unrouted() {
		// Never delivered: routed or dead-lettered after the scan.
		if len(sc.unrouted) < c.BatchSize {
			sc.unrouted = append(sc.unrouted, r)
		}
		return true
	}
	if _, held := sc.holds[r.Endpoint]; held {
		return sc.queued[r.Endpoint] > 0 || sc.take(r)
	}
	quota := sc.quota(r.Endpoint)
	if lim := e.limiter(r.Endpoint); lim != nil && sc.queued[r.Endpoint] >= min(quota, lim.Burst()) {
		// A limit paced at nothing (a share of none) leaves its events due.
		if lim.Limit() > 0 && len(sc.paced) < c.BatchSize {
			sc.paced = append(sc.paced, rescheduleAt(r, e.pacedAt(r.Endpoint, float64(lim.Limit()), lim.Burst(), sc.now)))
			sc.pacedEP = append(sc.pacedEP, r.Endpoint)
		}
		return true
	}
	if sc.queued[r.Endpoint] >= quota {
		return true
	}
	return sc.take(r)
}

// take counts r in the scan's limits and refuses it only when its key is
// busy (Ordered).
func (sc *scan) take(r *store.Record) bool {
	if sc.e.cfg.Ordered && r.Key != "" {
		k := orderKey(r)
		if sc.perKey[k] > 0 {
			return true
		}
		sc.perKey[k]++
	}
	sc.queued[r.Endpoint]++
	return false
}

// pacedAt returns the time the next event of a rate-limited endpoint's
// backlog is rescheduled to: one interval of the limit after the one
// rescheduled before it, and no earlier than the burst that fills the
// endpoint's share of the ready queue now. The slots follow each other
// across punctuations, so that a backlog is spread once, in order, at the
// limit's pace. Only punctuations call it (they never overlap).
func (e *Engine) pacedAt(endpoint string, perSecond float64, burst int, now time.Time) time.Time {
	t := e.paced[endpoint]
	if first := now.Add(ratelimit.Span(burst, perSecond)); t.Before(first) {
		t = first
	} else {
		t = t.Add(ratelimit.Span(1, perSecond))
	}
	e.paced[endpoint] = t
	return t
}

// rescheduleAt is the outcome that moves r's next attempt to t and changes
// nothing else.
func rescheduleAt(r *store.Record, t time.Time) store.Outcome {
	return store.Outcome{
		Kind:          store.OutcomeReschedule,
		ID:            r.ID,
		Version:       r.Version,
		Attempts:      r.Attempts,
		Deliveries:    r.Deliveries,
		NextAttemptAt: t,
		LastStatus:    r.LastStatus,
		LastError:     r.LastError,
	}
}

// take puts the events a scan found in flight and in the ready queue, and
// hands what it can to free workers; it returns how many it handed.
func (e *Engine) take(recs []*store.Record) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return 0
	}
	for _, r := range recs {
		if _, busy := e.inflight[r.ID]; busy {
			continue
		}
		e.inflight[r.ID] = false
		e.queued[r.Endpoint]++
		if e.cfg.Ordered && r.Key != "" {
			e.perKey[orderKey(r)]++
		}
		e.ready = append(e.ready, r)
	}
	return e.dispatchLocked()
}

// deferPaced commits the push-back of events whose endpoint's rate limit
// would not let them go yet. Unlike a hold, a limit does not end: the
// events are rescheduled whatever happened meanwhile (an event that changed
// since the scan keeps its newer state: the store compares versions).
func (e *Engine) deferPaced(ctx context.Context, paced []store.Outcome, endpoints []string) {
	if _, err := e.st.Apply(ctx, paced, nil); err != nil {
		e.LogStoreErr("pace rate-limited events", err)
		return
	}
	for i := 0; i < len(endpoints); {
		j := i + 1
		for j < len(endpoints) && endpoints[j] == endpoints[i] {
			j++
		}
		if f := e.cfg.Hooks.OnRateLimited; f != nil {
			f(endpoints[i], j-i)
		}
		i = j
	}
}

// release forgets the jobs' events as in flight, once their outcomes are
// committed.
func (e *Engine) release(batch []*job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range batch {
		r := j.rec
		delete(e.inflight, r.ID)
		if e.scanning {
			e.releasedInScan[r.ID] = struct{}{}
		}
		e.uncommitted--
		if e.cfg.Ordered && r.Key != "" {
			decr(e.perKey, orderKey(r))
		}
		if j.probe {
			delete(e.probing, r.Endpoint)
			if e.cfg.Shared != nil {
				e.cfg.Shared.endProbe(r.Endpoint, e)
			}
		}
	}
	e.dispatchLocked()
}

// readyLow reports whether the ready queue should be refilled.
func (e *Engine) readyLow() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running && len(e.ready) <= e.lowWater
}

// held reports whether the endpoint is disabled or throttled now, or the
// outbox is stopping (jobs not started yet are left pending).
func (e *Engine) held(endpoint string) bool {
	e.mu.Lock()
	running := e.running
	e.mu.Unlock()
	return !running || e.holds.held(endpoint, e.clock.Now())
}

// InFlight returns the number of deliveries under way (queued for or in a
// worker).
func (e *Engine) InFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivering
}

// isInFlight reports whether the event is being delivered: taken, and not
// sent back unattempted by a hold of its endpoint (an event sent back waits
// as it did before it was taken, and nothing of it will be committed).
func (e *Engine) isInFlight(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	unattempted, ok := e.inflight[id]
	return ok && !unattempted
}

// orderKey is the unit of per-key order of r in flight: its Key, scoped
// by its endpoint for a delivery of a topic event (as the store's key
// index scopes it).
func orderKey(r *store.Record) string {
	if r.Topic == "" {
		return r.Key
	}
	return r.Endpoint + store.GroupSep + r.Key
}
