package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/outboxd/outbox/store"
)

// commitLoop gathers finished deliveries and commits their outcomes, one
// transaction per batch: whatever finished meanwhile, and while deliveries
// are under way whatever finishes within CommitInterval of the first. The
// wait sleeps on a timer, not on each outcome: workers signal commitNow when
// the batch is full or nothing else is under way.
func (e *Engine) commitLoop() {
	defer close(e.committerDone)
	c := &e.cfg
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
func (e *Engine) mayWait(j *job) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mayWaitLocked(j) && e.uncommitted < e.commitLimit
}

func (e *Engine) mayWaitLocked(j *job) bool {
	if e.cfg.Ordered && j.rec.Key != "" {
		return false
	}
	return e.running && e.delivering > 0
}

// commit applies the outcomes of a batch of finished deliveries. When the
// store refuses the write (a full disk, say), the outcomes stay in memory
// and their events in flight: no delivery starts meanwhile (see health), and
// the write is retried until it succeeds, so a failing disk repeats no
// delivery; only Stop's deadline gives them up (see stop).
func (e *Engine) commit(batch []*job) {
	stopping := e.deliverCtx.Err() != nil
	outs, touched, infos := e.outcomes(batch, e.clock.Now().UTC(), stopping)
	if len(outs) > 0 || len(touched) > 0 {
		if !e.apply(outs, touched) {
			e.release(batch)
			return
		}
	}
	e.release(batch)
	if f := e.cfg.Hooks.OnDelivery; f != nil {
		for _, info := range infos {
			f(info)
		}
	}
	// Committed events left the in-flight set: refill the ready queue if it
	// runs low, and look again at once after failures (a retry may already
	// be due).
	failed := slices.ContainsFunc(outs, func(out store.Outcome) bool {
		return out.Kind != store.OutcomeDelete && out.Kind != store.OutcomeAttempt
	})
	if !stopping && (failed || e.readyLow()) {
		e.wake()
	}
}

// outcomes were given up: the store is closed or the file damaged (nothing
// more can be written), or Stop's deadline passed.
//
// The holds' lock is held by each try (from reading the cache to the store having it),
// not across the waits, so that admin calls are not held up by a failing
// disk; a try after a wait writes the endpoints as the cache has them then,
// which includes what EnableEndpoint did meanwhile.
func (e *Engine) outcomes(batch []*job, now time.Time, stopping bool) ([]store.Outcome, []string, []DeliveryInfo) {
	outs := make([]store.Outcome, 0, len(batch))
	infos := make([]DeliveryInfo, 0, len(batch))
	var touched, answered []string
	changed := make(map[string]store.EndpointState)
	h := e.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range batch {
		r, res := j.rec, j.res
		if res.Action == actionNone || (stopping && res.Action == ActionRetry) {
			// Not attempted, or interrupted by Stop: no attempt spent, the
			// event stays due.
			continue
		}
		ep, ok := changed[r.Endpoint]
		if !ok {
			if ep, ok = h.state(r.Endpoint); !ok {
				ep = store.EndpointState{Name: r.Endpoint}
			}
		}
		out, newEP, dead := e.outcome(r, res, ep, j.begun, now)
		e.breaker(&newEP, res, j.tripped, j.begun, now)
		newEP = e.transitions(ep, newEP, now)
		if newEP != ep {
			newEP.UpdatedAt = now
			if !slices.Contains(touched, r.Endpoint) {
				touched = append(touched, r.Endpoint)
			}
			changed[r.Endpoint] = newEP
		}
		if res.Action == ActionThrottle || res.Action == ActionDisable || j.tripped {
			answered = append(answered, r.Endpoint) // in the cache below
		}
		if a := e.attemptOf(j); a != nil {
			if out == nil {
				// The event stays as it is (a disable): only its attempt.
				out = &store.Outcome{Kind: store.OutcomeAttempt, ID: r.ID, Version: r.Version}
			}
			out.Attempt = a
		}
		if out != nil {
			outs = append(outs, *out)
		}
		infos = append(infos, DeliveryInfo{
			ID:           store.GroupOf(r.ID), // the event's, as the Sink saw it
			Endpoint:     r.Endpoint,
			Action:       res.Action,
			Dead:         dead,
			Status:       res.Status,
			Attempt:      r.Deliveries + 1,
			Duration:     j.duration,
			SinceEnqueue: j.ended.Sub(r.CreatedAt), // the attempt's end, not its commit's
		})
	}
	h.setLocked(changed, answered)
	return outs, touched, infos
}

// Waits between two tries to commit outcomes that the store refused.
const (
	commitRetryMin = 50 * time.Millisecond
	commitRetryMax = 2 * time.Second
)

// apply writes outcomes and the current cached state of the touched
// endpoints, retrying while the store refuses. It reports false when the
func (e *Engine) apply(outs []store.Outcome, touched []string) bool {
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
		e.holds.mu.Lock()
		eps := e.holds.statesLocked(touched)
		results, err := e.st.Apply(context.Background(), outs, eps)
		e.holds.mu.Unlock()
		switch {
		case err == nil:
			for i, res := range results {
				if res == store.Stale {
					e.log.Debug("outbox: outcome for a changed event not applied", "id", outs[i].ID, "version", outs[i].Version)
				}
			}
			e.commitRecovered()
			return true
		case errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrInvalid):
			e.LogStoreErr("commit outcomes", err)
			return false
		case e.NoteStoreErr(err):
			return false
		}
		e.commitFailed(err)
	}
}

// transitions logs and reports the transitions of an endpoint's breaker
// from ep to newEP, the state an outcome made of it, and returns the state
// to keep. With a Shared, newEP is recorded in it, which decides which of
// its changes are transitions (another store may have made them first)
// and brings the events of every store forward when the breaker closed;
// the state to keep is newEP with the shared fields.
func (e *Engine) transitions(ep, newEP store.EndpointState, now time.Time) store.EndpointState {
	if e.cfg.Shared == nil {
		if newEP.BreakerUntil != ep.BreakerUntil {
			switch {
			case newEP.BreakerUntil.IsZero():
				e.logBreaker(newEP, BreakerClosed)
				e.forwardLater(newEP.Name)
			default:
				e.logBreaker(newEP, BreakerOpen)
			}
		}
		return newEP
	}
	kept, ts := e.cfg.Shared.record(ep, newEP, now)
	for _, t := range ts {
		switch t.Kind {
		case TransitionOpened:
			e.logBreaker(kept, BreakerOpen)
		case TransitionClosed:
			e.logBreaker(kept, BreakerClosed)
		}
	}
	return kept
}
