package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outbox/store"
)

// health is the outbox's fault state: whether its file is damaged, and
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
	e := o.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.health.corrupt != nil:
		return fmt.Errorf("%w: %w (%s): deliveries stopped and new events refused: %v",
			ErrUnavailable, ErrDamaged, o.st.Path(), e.health.corrupt)
	case e.health.commitErr != nil:
		return fmt.Errorf("%w: committing delivery outcomes has failed since %s, deliveries paused: %v",
			ErrUnavailable, e.health.commitSince.UTC().Format(time.RFC3339), e.health.commitErr)
	}
	return nil
}

// noteStoreErr records a store error that shows the file is damaged, and
// reports whether it did.
func (o *Outbox) noteStoreErr(err error) bool {
	if !errors.Is(err, store.ErrCorrupt) {
		return false
	}
	e := o.eng
	e.mu.Lock()
	first := e.health.corrupt == nil
	if first {
		e.health.corrupt = err
	}
	e.mu.Unlock()
	if first {
		o.log.Error("outbox: the database file is damaged; deliveries stopped and new events refused until it is repaired or restored",
			"path", o.st.Path(), "err", err)
	}
	return true
}

// refuseIfCorrupt returns the error Enqueue answers with while the file is
// known to be damaged.
func (o *Outbox) refuseIfCorrupt() error {
	e := o.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.health.corrupt; c != nil {
		return fmt.Errorf("%w: %w: %v", ErrUnavailable, ErrDamaged, c)
	}
	return nil
}

// commitFailed records a failed commit of delivery outcomes; the first
// failure of a run of them is logged.
func (e *engine) commitFailed(err error) {
	e.mu.Lock()
	first := e.health.commitErr == nil
	if first {
		e.health.commitSince = e.o.clock.Now()
	}
	e.health.commitErr = err
	e.mu.Unlock()
	if first {
		e.o.log.Error("outbox: committing delivery outcomes failed; no delivery starts until they are committed, retrying",
			"path", e.o.st.Path(), "err", err)
	}
}

// commitRecovered clears a commit failure once a commit succeeded, resumes
// dispatching, and logs the recovery.
func (e *engine) commitRecovered() {
	e.mu.Lock()
	was := e.health.commitErr != nil
	since := e.health.commitSince
	e.health.commitErr = nil
	if was {
		e.dispatchLocked()
	}
	e.mu.Unlock()
	if was {
		e.o.log.Info("outbox: delivery outcomes committed again; deliveries resumed",
			"failing_for", e.o.clock.Now().Sub(since).Round(time.Millisecond))
		e.o.wake()
	}
}
