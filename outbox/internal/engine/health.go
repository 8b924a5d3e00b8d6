package engine

import (
	"errors"
	"time"

	"github.com/outboxd/outbox/store"
)

// health is the engine's fault state: whether its file is damaged, and
// whether the outcomes of finished deliveries can be committed. It is kept by
// the engine under e.mu; every change of state is logged once.
type health struct {
	// corrupt is set, for good, when a store call found damaged data.
	corrupt error
	// commitErr is the error of the last failed commit of delivery
	// outcomes, since commitSince; nil once a commit succeeds again.
	commitErr   error
	commitSince time.Time
}

// faulty reports whether deliveries must not start.
func (h *health) faulty() bool { return h.corrupt != nil || h.commitErr != nil }

// Health reports why deliveries cannot go on now: corrupt is the store
// error that showed the file damaged (for good), commitErr the error of the
// failing commits of delivery outcomes since since (nil once one succeeds
// again). Both are nil when the engine can do its job.
func (e *Engine) Health() (corrupt, commitErr error, since time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health.corrupt, e.health.commitErr, e.health.commitSince
}

// NoteStoreErr records a store error that shows the file is damaged, and
// reports whether it did.
func (e *Engine) NoteStoreErr(err error) bool {
	if !errors.Is(err, store.ErrCorrupt) {
		return false
	}
	e.mu.Lock()
	first := e.health.corrupt == nil
	if first {
		e.health.corrupt = err
	}
	e.mu.Unlock()
	if first {
		e.log.Error("outbox: the database file is damaged; deliveries stopped and new events refused until it is repaired or restored",
			"path", e.st.Path(), "err", err)
	}
	return true
}

// commitFailed records a failed commit of delivery outcomes; the first
// failure of a run of them is logged.
func (e *Engine) commitFailed(err error) {
	e.mu.Lock()
	first := e.health.commitErr == nil
	if first {
		e.health.commitSince = e.clock.Now()
	}
	e.health.commitErr = err
	e.mu.Unlock()
	if first {
		e.log.Error("outbox: committing delivery outcomes failed; no delivery starts until they are committed, retrying",
			"path", e.st.Path(), "err", err)
	}
}

// commitRecovered clears a commit failure once a commit succeeded, resumes
// dispatching, and logs the recovery.
func (e *Engine) commitRecovered() {
	e.mu.Lock()
	was := e.health.commitErr != nil
	since := e.health.commitSince
	e.health.commitErr = nil
	if was {
		e.dispatchLocked()
	}
	e.mu.Unlock()
	if was {
		e.log.Info("outbox: delivery outcomes committed again; deliveries resumed",
			"failing_for", e.clock.Now().Sub(since).Round(time.Millisecond))
		e.wake()
	}
}
