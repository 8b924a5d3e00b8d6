package ship

import (
	"context"
	"errors"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/outbox"
)

// bootstrap handles a store that has never shipped and whose changelog no
// longer starts at LSN 1 (trimmed before shipping was turned on): it turns
// the trimming floor on, then ships the current pending and dead records as
// a snapshot, before the retained changelog follows (later in the topic, so
// it wins). Without this a restore would miss events whose entries were
// trimmed.
func (s *Shipper) bootstrap(stop, work context.Context) error {
	if s.shipped.Load() != 0 {
		return nil
	}
	b := retry.Backoff(s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
	for {
		err := s.snapshotIfTrimmed(work)
		if err == nil {
			return nil
		}
		s.p.Counts.Errors.Add(1)
		s.log.Warn("kafka: changelog snapshot failed; retrying", "topic", s.cfg.Topic, "err", err)
		if !retry.Sleep(stop, b.NextBackOff()) {
			return stop.Err()
		}
	}
}

func (s *Shipper) snapshotIfTrimmed(ctx context.Context) error {
	first, err := s.p.Store.Entries(1, 1)
	if err != nil {
		return err
	}
	if len(first) == 0 || first[0].LSN <= 1 {
		return nil
	}
	start := first[0].LSN
	// From here on the store keeps every entry from start.
	if err := s.p.Store.MarkShipped(ctx, start-1); err != nil {
		return err
	}
	n := 0
	for _, state := range []outbox.State{outbox.StatePending, outbox.StateDead} {
		k, err := s.shipSnapshot(ctx, state)
		if err != nil {
			return err
		}
		n += k
	}
	s.shipped.Store(start - 1)
	s.log.Info("kafka: shipped a snapshot of the store before its retained changelog",
		"topic", s.cfg.Topic, "records", n, "changelog_from", start)
	return nil
}

// shipSnapshot ships the store's records in state and returns how many.
func (s *Shipper) shipSnapshot(ctx context.Context, state outbox.State) (int, error) {
	n := 0
	after := ""
	for {
		entries, next, err := s.p.Store.Snapshot(state, after, s.cfg.Batch)
		if err != nil {
			return n, err
		}
		if len(entries) > 0 {
			msgs := make([]kafkago.Message, len(entries))
			for i, e := range entries {
				msgs[i] = changelog.EntryMessage(e)
			}
			if err := s.w.WriteMessages(ctx, msgs...); err != nil {
				return n, err
			}
			n += len(entries)
		}
		if next == "" {
			return n, nil
		}
		after = next
	}
}

// ensureTopic creates the changelog topic compacted when it is missing and
// returns the largest batch the topic accepts.
func (s *Shipper) ensureTopic(ctx context.Context) (int, error) {
	cl := s.p.Client
	topic := s.cfg.Topic
	md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	exists := false
	for _, t := range md.Topics {
		if t.Name == topic {
			switch {
			case t.Error == nil:
				exists = true
			case errors.Is(t.Error, kafkago.UnknownTopicOrPartition):
			default:
				return 0, t.Error
			}
		}
	}
	if !exists {
		if err := s.createTopic(ctx); err != nil {
			return 0, err
		}
	}
	lim, err := changelog.Describe(ctx, cl, topic, s.cfg.MaxBytes)
	if err != nil {
		s.log.Debug("kafka: describe changelog topic", "err", err)
		return lim.MaxBytes, nil
	}
	if !lim.Compacted {
		s.log.Warn("kafka: the changelog topic is not compacted; it will grow without bound and a restore replays all of it",
			"topic", topic, "cleanup.policy", lim.Policy)
	}
	return lim.MaxBytes, nil
}

// createTopic creates the changelog topic, compacted.
func (s *Shipper) createTopic(ctx context.Context) error {
	topic := s.cfg.Topic
	if err := changelog.CreateCompacted(ctx, s.p.Client, topic, s.cfg.Partitions, s.cfg.Replication, s.cfg.MaxBytes); err != nil {
		return err
	}
	s.log.Info("kafka: created the changelog topic, compacted", "topic", topic, "partitions", s.cfg.Partitions)
	return nil
}
