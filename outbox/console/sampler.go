package console

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// sample is one reading of the Backend's counts.
type sample struct {
	at                   time.Time
	pending, dead        int
	delivered, failed    uint64
	inFlight             int
	oldestPendingSeconds float64
}

// samples is a ring of the last hour's samples (guarded by Console.mu).
type samples struct {
	ring []sample
	next int
	full bool
}

func (s *samples) init(n int) { s.ring = make([]sample, max(n, 2)) }

func (s *samples) add(x sample) {
	s.ring[s.next] = x
	s.next = (s.next + 1) % len(s.ring)
	if s.next == 0 {
		s.full = true
	}
}

// all returns the samples oldest first.
func (s *samples) all() []sample {
	if !s.full {
		return append([]sample(nil), s.ring[:s.next]...)
	}
	return append(append([]sample(nil), s.ring[s.next:]...), s.ring[:s.next]...)
}

// sampleLoop samples the Backend's Stats every SampleInterval until Close.
func (c *Console) sampleLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.sample()
		}
	}
}

func (c *Console) sample() {
	st := c.b.Stats()
	x := sample{
		at: c.cfg.Now(), pending: st.Pending, dead: st.Dead, inFlight: st.InFlight,
		delivered: st.DeliveredTotal, failed: st.FailedTotal,
		oldestPendingSeconds: st.OldestPendingAge.Seconds(),
	}
	c.mu.Lock()
	c.samples.add(x)
	c.mu.Unlock()
}

// replayJob is the replay by filter under way or last finished (guarded
// by Console.mu).
type replayJob struct {
	running  bool
	what     string
	started  time.Time
	finished time.Time
	n        int
	err      string
}

// startReplay runs ReplayDead in the background, owned by the console
// (Close cancels it). It fails when one is running already.
func (c *Console) startReplay(f outbox.ReplayFilter, what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.replay.running {
		return errors.New("a replay by filter is already running: wait for it to finish")
	}
	if c.ctx.Err() != nil {
		return errors.New("the console is closing")
	}
	c.replay = replayJob{running: true, what: what, started: c.cfg.Now()}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		n, err := c.b.ReplayDead(c.ctx, f)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.replay.running = false
		c.replay.n = n
		c.replay.finished = c.cfg.Now()
		if err != nil {
			c.replay.err = err.Error()
			c.cfg.Logger.Warn("replay by filter stopped", "replayed", n, "err", err)
		}
	}()
	return nil
}

// describeFilter says in words which dead events f selects.
func describeFilter(f outbox.ReplayFilter) string {
	var parts []string
	if f.Destination != "" {
		parts = append(parts, "destination "+f.Destination)
	}
	if f.Status != 0 {
		parts = append(parts, fmt.Sprintf("last status %d", f.Status))
	}
	if f.KeyPrefix != "" {
		parts = append(parts, "key starting with "+f.KeyPrefix)
	}
	if f.Topic != "" {
		parts = append(parts, "topic "+f.Topic)
	}
	if !f.From.IsZero() {
		parts = append(parts, "dead since "+f.From.UTC().Format(timeLayout))
	}
	if !f.To.IsZero() {
		parts = append(parts, "dead before "+f.To.UTC().Format(timeLayout))
	}
	what := "every dead event"
	if len(parts) > 0 {
		what = "dead events with " + strings.Join(parts, ", ")
	}
	if f.Limit > 0 {
		what += fmt.Sprintf(" (at most %d)", f.Limit)
	}
	rate := f.Rate
	if rate == 0 {
		rate = outbox.DefaultReplayRate
	}
	return what + fmt.Sprintf(", at %g per second", rate)
}
