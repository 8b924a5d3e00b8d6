package partition

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/outbox"
)

// Standby keeps one partition's store warm for one generation.
type Standby struct {
	g   *Env
	p   int
	log *slog.Logger

	mu       sync.Mutex
	st       StandbyStatus
	store    *outbox.Outbox // while tailing
	copy     readable       // the store while tailing, for reads
	caughtUp bool           // logged the first catch-up of this generation
	begun    time.Time
}

// NewStandby returns the standby of partition p, assigned in gen.
func NewStandby(g *Env, gen *kafkago.Generation, p int) *Standby {
	return &Standby{g: g, p: p, log: g.Log.With("partition", p, "generation", gen.ID, "standby", true),
		st: StandbyStatus{Partition: p, State: StandbyOpening, Generation: gen.ID}}
}

// Store returns the standby's store while it tails the changelog, else
// nil.
func (s *Standby) Store() *outbox.Outbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store
}

// Read calls fn with the standby's store while it tails the changelog, at
// the offset it has applied, and reports whether it did. While its kept
// file is being opened, it waits for the store until deadline.
func (s *Standby) Read(deadline time.Time, fn ReadFunc) bool { return s.copy.read(deadline, fn) }

// Status returns the standby's status now.
func (s *Standby) Status() StandbyStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Lag = max(st.End-st.Applied, 0)
	return st
}

func (s *Standby) update(fn func(*StandbyStatus)) {
	s.mu.Lock()
	fn(&s.st)
	s.mu.Unlock()
}

// Run keeps the standby until gctx ends, retrying with backoff when it
// fails. It returns only then: kafka-go ends the generation as soon as one
// of its functions returns.
func (s *Standby) Run(gctx context.Context) {
	b := s.g.backoff()
	for {
		err := s.tail(gctx)
		if gctx.Err() != nil {
			s.update(func(st *StandbyStatus) { st.State = StandbyStopped })
			return
		}
		s.g.Counts.StandbyFailures.Add(1)
		s.update(func(st *StandbyStatus) { st.State, st.Error = StandbyFailed, err.Error() })
		s.log.Warn("kafka: standby of the partition failed; retrying", "err", err)
		if !retry.Sleep(gctx, b.NextBackOff()) {
			s.update(func(st *StandbyStatus) { st.State = StandbyStopped })
			return
		}
	}
}

// tail opens the standby's store and applies the changelog partition to it
// until gctx ends (nil) or something fails; either way it closes the store,
// with a checkpoint of what it applied unless applying failed.
func (s *Standby) tail(gctx context.Context) error {
	g := s.g
	ctx, cancel := context.WithTimeout(gctx, g.Config.DialTimeout)
	pr, err := g.changelogRange(ctx, s.p)
	cancel()
	if err != nil {
		return err
	}
	o, mode, from, epoch, err := s.open(pr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.store, s.begun = o, time.Now()
	s.st.State, s.st.Error, s.st.Mode = StandbyTailing, "", mode
	s.st.Applied, s.st.End = from, max(pr.Last, from)
	s.mu.Unlock()
	s.copy.publish(o, func() int64 { return s.Status().Applied })
	s.log.Info("kafka: standby started", "mode", mode, "from", from, "to", pr.Last)

	applied, epoch, applyErr, readErr := s.follow(gctx, o, from, epoch)

	s.mu.Lock()
	s.store = nil
	s.mu.Unlock()
	kept := s.close(o, applied, epoch, applyErr == nil)
	st := s.Status()
	s.log.Info("kafka: standby stopped", "applied", applied, "lag", st.Lag, "records", st.Records, "checkpoint", kept)
	if applyErr != nil {
		return applyErr
	}
	if gctx.Err() == nil {
		return readErr
	}
	return nil
}

// open opens the partition's local store for a standby: the kept one when
// its checkpoint is usable (it resumes from there), else a new one that is
// built from the changelog partition's first offset. The checkpoint is
// removed before the store changes, as an owner's restore does, so that a
// crash leaves none that vouches for it. A kept store is readable as a
// copy, at its checkpoint's offset, from then on. The store is maintained
// before it is returned: a kept one brings whatever its last maintenance
// did not trim (an owner ships the rest of its changelog after its last
// maintenance, at the hand-over), and on a quiet partition no record may
// arrive for a long time.
func (s *Standby) open(pr changelog.Range) (o *outbox.Outbox, mode string, from, epoch int64, err error) {
	g := s.g
	path := g.Files.Store(s.p)
	cfg := g.StoreConfig(s.p)
	mode, from = ModeRebuild, pr.First
	s.copy.expect() // reads wait for a kept store, as they cannot read its file any more
	o, cp, why, err := keptStore(g, s.p, pr)
	if why != "" {
		s.log.Info("kafka: building the standby store anew", "reason", why)
	}
	if err != nil {
		s.copy.retire()
		return nil, "", 0, 0, err
	}
	if cp != nil {
		mode, from, epoch = ModeCheckpoint, cp.Offset, cp.Epoch
		s.copy.publish(o, func() int64 { return cp.Offset })
	} else {
		s.copy.retire() // nothing to read until it is opened anew
	}
	if o == nil {
		if err := removeDurably(path, path+".restoring"); err != nil {
			return nil, "", 0, 0, err
		}
		if o, err = outbox.Open(path, cfg); err != nil {
			return nil, "", 0, 0, fmt.Errorf("creating the standby store %s: %w", path, err)
		}
	}
	if err := s.maintain(o); err != nil {
		s.copy.retire()
		_ = o.Stop(context.Background())
		return nil, "", 0, 0, err
	}
	return o, mode, from, epoch, nil
}

// follow reads the changelog partition from offset from and applies it to
// o, as an owner's restore does (in offset order, fenced records skipped,
// a tombstone deletes), in batches of what has arrived, until gctx ends or
// reading or applying fails. Every MaintenanceInterval of o's configuration
// it maintains o, whether records arrive or not, as a started store's
// punctuation would. It returns the offset every record below which is
// applied, the highest epoch seen, and what failed.
func (s *Standby) follow(gctx context.Context, o *outbox.Outbox, from, epoch int64) (applied, maxEpoch int64, applyErr, readErr error) {
	topic := s.g.Config.ChangelogTopic
	r := s.g.Reading.Reader(s.p)
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return from, epoch, nil, err
	}
	msgs, stopReading := s.read(gctx, r)
	defer func() {
		if err := stopReading(); readErr == nil && gctx.Err() == nil {
			readErr = fmt.Errorf("kafka: standby %s/%d: read: %w", topic, s.p, err)
		}
	}()

	applied, maxEpoch = from, epoch
	batch := make([]outbox.ChangelogEntry, 0, ApplyBatch)
	tick := time.NewTicker(o.Config().MaintenanceInterval)
	defer tick.Stop()
	for {
		var m kafkago.Message
		var ok bool
		select {
		case m, ok = <-msgs:
		case <-tick.C:
			if err := s.maintain(o); err != nil {
				return applied, maxEpoch, err, nil
			}
			continue
		case <-gctx.Done():
			return applied, maxEpoch, nil, nil
		}
		if !ok {
			return applied, maxEpoch, nil, nil // the deferred read error says why
		}
		var pos, fenced int64
		var err error
		batch, pos, fenced, maxEpoch, err = s.collect(m, msgs, batch[:0], maxEpoch)
		if err != nil {
			return applied, maxEpoch, err, nil
		}
		if len(batch) > 0 {
			// Not gctx: a restore cut short by the end of the generation
			// may still be under way, and the checkpoint must say what the
			// store holds.
			if err := o.Restore(s.g.Work, batch); err != nil {
				return applied, maxEpoch, fmt.Errorf("kafka: standby %s/%d: apply: %w", topic, s.p, err), nil
			}
		}
		applied = pos
		s.applied(applied, int64(len(batch)), fenced)
	}
}

// read fetches r's records into the returned channel, in a goroutine,
// noting the partition's end as it learns it, until reading fails or gctx
// ends or stop is called; stop waits for the goroutine and returns why it
// stopped reading.
func (s *Standby) read(gctx context.Context, r *kafkago.Reader) (msgs <-chan kafkago.Message, stop func() error) {
	rctx, stopReading := context.WithCancel(gctx)
	out := make(chan kafkago.Message, ApplyBatch)
	readDone := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			m, err := r.FetchMessage(rctx)
			if err != nil {
				readDone <- err
				return
			}
			end := m.Offset + 1 + r.Lag()
			s.update(func(st *StandbyStatus) { st.End = max(st.End, end) })
			select {
			case out <- m:
			case <-rctx.Done():
				readDone <- rctx.Err()
				return
			}
		}
	}()
	return out, func() error {
		stopReading()
		for range out { // let the reader goroutine finish
		}
		return <-readDone
	}
}

// collect decodes one batch into batch: m and whatever else has arrived on
// msgs already, up to ApplyBatch entries or applyBytes, skipping
// fenced records. It returns the batch, the offset after its last record,
// the records it skipped as fenced, and the highest epoch seen.
func (s *Standby) collect(m kafkago.Message, msgs <-chan kafkago.Message, batch []outbox.ChangelogEntry, maxEpoch int64) (
	out []outbox.ChangelogEntry, pos, fenced, epoch int64, err error) {
	size := 0
	for {
		en, ok, e, skipped, err := s.g.fencedEntry(&m, s.p, maxEpoch)
		maxEpoch = e
		if err != nil {
			return batch, pos, fenced, maxEpoch, err
		}
		if skipped {
			fenced++
		}
		if ok {
			batch = append(batch, en)
			size += len(m.Key) + len(m.Value)
		}
		pos = m.Offset + 1
		if len(batch) == cap(batch) || size >= applyBytes {
			return batch, pos, fenced, maxEpoch, nil
		}
		more := false
		select {
		case m, more = <-msgs:
		default:
		}
		if !more {
			return batch, pos, fenced, maxEpoch, nil
		}
	}
}

// maintain trims what the never started standby store's own changelog
// holds (all of it in the changelog topic already) and its tombstones, as
// a started store's maintenance would.
func (s *Standby) maintain(o *outbox.Outbox) error {
	topic := s.g.Config.ChangelogTopic
	cl := o.Changelog()
	last := cl.LastLSN()
	shipped, err := cl.ShippedLSN()
	if err == nil && shipped < last {
		err = cl.MarkShipped(s.g.Work, last)
	}
	if err != nil {
		return fmt.Errorf("kafka: standby %s/%d: %w", topic, s.p, err)
	}
	if err := o.Maintain(s.g.Work); err != nil {
		return fmt.Errorf("kafka: standby %s/%d: %w", topic, s.p, err)
	}
	return nil
}

// applied records progress, and logs the first catch-up of the generation.
func (s *Standby) applied(to, records, fenced int64) {
	s.mu.Lock()
	s.st.Applied = to
	s.st.Records += records
	s.st.Fenced += fenced
	first := !s.caughtUp && s.st.Applied >= s.st.End
	if first {
		s.caughtUp = true
	}
	st, took := s.st, time.Since(s.begun)
	s.mu.Unlock()
	if first {
		s.log.Info("kafka: standby caught up", "mode", st.Mode, "applied", st.Applied, "records", st.Records,
			"took", took.Round(time.Millisecond))
	}
}

// close closes the standby's store, which nothing writes to any more, and,
// when keep is true, writes its checkpoint at applied, so that the next
// ownership or standby of the partition here resumes from there. It
// reports whether it wrote it. The checkpoint is written first, so that
// the store can be read (as a copy) until it is closed and from its file
// after; it is removed again when the close fails.
func (s *Standby) close(o *outbox.Outbox, applied, epoch int64, keep bool) bool {
	kept := false
	if keep {
		kept = s.keepCheckpoint(o, applied, epoch)
	}
	s.copy.retire()
	if err := o.Stop(context.Background()); err != nil {
		s.log.Warn("kafka: closing the standby store", "err", err)
		if kept {
			_ = removeDurably(s.g.Files.Checkpoint(s.p))
		}
		return false
	}
	return kept
}

// keepCheckpoint marks what the standby's store wrote as shipped (it is in the
// changelog already) and writes the store's checkpoint at applied; it
// reports whether it did.
func (s *Standby) keepCheckpoint(o *outbox.Outbox, applied, epoch int64) bool {
	if err := o.Changelog().MarkShipped(s.g.Work, o.Changelog().LastLSN()); err != nil {
		s.log.Warn("kafka: closing the standby store", "err", err)
		return false
	}
	cp := checkpoint{Topic: s.g.Config.Topic, ChangelogTopic: s.g.Config.ChangelogTopic, Partition: s.p,
		Offset: applied, Epoch: epoch, LastLSN: o.Changelog().LastLSN()}
	if err := writeCheckpoint(s.g.Files.Checkpoint(s.p), cp); err != nil {
		s.log.Warn("kafka: writing the standby checkpoint", "err", err)
		return false
	}
	return true
}
