package ship

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/outbox"
)

// Store is what a Shipper needs of the outbox's changelog
// (*outbox.Changelog).
type Store interface {
	Entries(from uint64, limit int) ([]outbox.ChangelogEntry, error)
	LastLSN() uint64
	ShippedLSN() (uint64, error)
	MarkShipped(ctx context.Context, lsn uint64) error
	Snapshot(state outbox.State, after string, limit int) ([]outbox.ChangelogEntry, string, error)
}

var _ Store = (*outbox.Changelog)(nil)

// Config is the shipping part of the package kafka's Config.
type Config struct {
	// Topic is the changelog topic.
	Topic string
	// Batch is the most entries shipped in one write.
	Batch int
	// Interval is the pause when there is nothing to ship.
	Interval time.Duration
	// RetryBackoff and RetryBackoffMax pace the retries.
	RetryBackoff, RetryBackoffMax time.Duration
	// Partitions and Replication are those of a topic Run creates.
	Partitions, Replication int
	// MaxBytes is the largest batch a write holds, and the
	// max.message.bytes of a topic Run creates.
	MaxBytes int
}

// Counts are the shipping counters, shared by every Shipper of a Runner
// or a Group.
type Counts struct {
	// Shipped counts the entries shipped.
	Shipped atomic.Uint64
	// Errors counts the failed attempts.
	Errors atomic.Uint64
}

// Params is what a Shipper is made of.
type Params struct {
	// Config is the shipping configuration.
	Config Config
	// Store is the changelog shipped.
	Store Store
	// Log is where the Shipper logs.
	Log *slog.Logger
	// Counts are the counters it adds to.
	Counts *Counts
	// Writer writes the records: in group mode, the group's writer. Run
	// makes its own with NewWriter.
	Writer *kafkago.Writer
	// NewWriter makes the writer of Run, given the largest batch the
	// topic accepts.
	NewWriter func(maxBytes int) *kafkago.Writer
	// Client is what Run checks and creates the topic with.
	Client *kafkago.Client
	// Stamp, in group mode, routes every record to the store's changelog
	// partition and adds the owner's epoch and generation.
	Stamp *changelog.Stamp
	// Written, when set, counts the records acknowledged.
	Written *atomic.Int64
	// Now is the clock of Lag; nil is time.Now.
	Now func() time.Time
}

// Shipper tails a store's changelog and produces it to the changelog
// topic.
type Shipper struct {
	p       Params
	cfg     Config
	log     *slog.Logger
	w       *kafkago.Writer
	shipped atomic.Uint64
}

// New returns a Shipper of p.Store that has shipped up to the LSN shipped.
func New(p Params, shipped uint64) *Shipper {
	if p.Now == nil {
		p.Now = time.Now
	}
	s := &Shipper{p: p, cfg: p.Config, log: p.Log, w: p.Writer}
	s.shipped.Store(shipped)
	return s
}

// Shipped returns the LSN the store's changelog is shipped up to.
func (s *Shipper) Shipped() uint64 { return s.shipped.Load() }

// Run ships until stop is cancelled; work bounds each write (cancelled only
// when Close runs out of time), so a write in flight at Close is finished.
// It first makes sure the topic is there, then makes its writer.
func (s *Shipper) Run(stop, work context.Context) {
	maxBytes, ok := s.waitForTopic(stop, work)
	if !ok {
		return
	}
	s.w = s.p.NewWriter(maxBytes)
	defer s.w.Close()
	if err := s.bootstrap(stop, work); err != nil {
		return
	}
	b := retry.Backoff(s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
	failing := false
	resumed := func() {
		if failing {
			s.log.Info("kafka: changelog shipping resumed", "topic", s.cfg.Topic)
			failing = false
		}
		b.Reset()
	}
	for {
		if stop.Err() != nil {
			return
		}
		n, err := s.ShipOnce(work)
		switch {
		case errors.Is(err, outbox.ErrClosed):
			// The outbox stopped before the runner: nothing more will
			// be written, and what is left is shipped at the next start.
			s.log.Info("kafka: the store is closed; changelog shipping stops", "topic", s.cfg.Topic)
			return
		case err != nil:
			s.p.Counts.Errors.Add(1)
			if !failing {
				s.log.Warn("kafka: changelog shipping failed; retrying", "topic", s.cfg.Topic, "err", err)
				failing = true
			} else {
				s.log.Debug("kafka: changelog shipping", "err", err)
			}
			if !retry.Sleep(stop, b.NextBackOff()) {
				return
			}
		case n == 0:
			resumed()
			if !retry.Sleep(stop, s.cfg.Interval) {
				return
			}
		default:
			resumed()
		}
	}
}

// waitForTopic makes sure the topic is there, retrying until it is or stop
// ends (false), and returns the largest batch it accepts.
func (s *Shipper) waitForTopic(stop, work context.Context) (int, bool) {
	b := retry.Backoff(s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
	for {
		maxBytes, err := s.ensureTopic(work)
		if err == nil {
			return maxBytes, true
		}
		s.p.Counts.Errors.Add(1)
		s.log.Warn("kafka: changelog topic not available; shipping waits", "topic", s.cfg.Topic, "err", err)
		if !retry.Sleep(stop, b.NextBackOff()) {
			return 0, false
		}
	}
}

// ShipOnce ships the next batch of entries and returns how many it shipped.
func (s *Shipper) ShipOnce(ctx context.Context) (int, error) {
	from := s.shipped.Load() + 1
	entries, err := s.p.Store.Entries(from, s.cfg.Batch)
	if err != nil {
		return 0, fmt.Errorf("read changelog: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	msgs := make([]kafkago.Message, len(entries))
	for i, e := range entries {
		msgs[i] = changelog.EntryMessage(e)
		if s.p.Stamp != nil {
			s.p.Stamp.Apply(&msgs[i])
		}
	}
	if err := s.w.WriteMessages(ctx, msgs...); err != nil {
		// Some of the batch may have landed: the whole batch is sent again
		// in LSN order, so the last record of every ID is still its latest.
		return 0, fmt.Errorf("produce %d entries from LSN %d: %w", len(msgs), from, err)
	}
	if s.p.Written != nil {
		s.p.Written.Add(int64(len(msgs)))
	}
	last := entries[len(entries)-1].LSN
	if err := s.p.Store.MarkShipped(ctx, last); err != nil {
		return 0, fmt.Errorf("record shipped LSN %d: %w", last, err)
	}
	s.shipped.Store(last)
	s.p.Counts.Shipped.Add(uint64(len(entries)))
	return len(entries), nil
}

// Lag returns how far shipping is behind: in LSNs, and in seconds since the
// oldest entry not yet shipped was written.
func (s *Shipper) Lag() (lsns uint64, seconds float64) {
	last := s.p.Store.LastLSN()
	shipped := s.shipped.Load()
	if last <= shipped {
		return 0, 0
	}
	lsns = last - shipped
	if es, err := s.p.Store.Entries(shipped+1, 1); err == nil && len(es) > 0 {
		seconds = max(s.p.Now().Sub(es[0].Time).Seconds(), 0)
	}
	return lsns, seconds
}
