package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/outbox"
)

// changelogStore is what the shipper needs of the outbox's changelog
// (*outbox.Changelog).
type changelogStore interface {
	Entries(from uint64, limit int) ([]outbox.ChangelogEntry, error)
	LastLSN() uint64
	ShippedLSN() (uint64, error)
	MarkShipped(ctx context.Context, lsn uint64) error
	Snapshot(state outbox.State, after string, limit int) ([]outbox.ChangelogEntry, string, error)
}

// shipper tails the store's changelog from the last shipped LSN and produces
// it to the changelog topic, acknowledged by all in-sync replicas, recording
// the shipped LSN in the store only once the broker has acknowledged it (so
// the store's changelog trimming never passes what Kafka holds).
type shipper struct {
	cfg   Config
	st    changelogStore
	log   *slog.Logger
	conns *conns
	met   *metrics
	now   func() time.Time

	w *kafkago.Writer
	// stamp, in group mode, routes every record to the store's changelog
	// partition and adds the owner's epoch and generation.
	stamp *stamp
	// written, when set, counts the records acknowledged.
	written *atomic.Int64

	shipped atomic.Uint64
	ready   atomic.Bool // the topic is there and the last write succeeded
}

func newShipper(cfg Config, st changelogStore, log *slog.Logger, cn *conns, met *metrics) (*shipper, error) {
	shipped, err := st.ShippedLSN()
	if err != nil {
		return nil, fmt.Errorf("kafka: shipped LSN: %w", err)
	}
	s := &shipper{cfg: cfg, st: st, log: log, conns: cn, met: met, now: time.Now}
	s.shipped.Store(shipped)
	return s, nil
}

func (s *shipper) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = s.cfg.RetryBackoff
	b.MaxInterval = s.cfg.RetryBackoffMax
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// run ships until stop is cancelled; work bounds each write (cancelled only
// when Close runs out of time), so a write in flight at Close is finished.
func (s *shipper) run(stop, work context.Context) {
	b := s.newBackoff()
	maxBytes := 0
	for {
		var err error
		if maxBytes, err = s.ensureTopic(work); err == nil {
			break
		}
		s.met.shipErrors.Add(1)
		s.log.Warn("kafka: changelog topic not available; shipping waits", "topic", s.cfg.ChangelogTopic, "err", err)
		if !sleepCtx(stop, b.NextBackOff()) {
			return
		}
	}
	s.w = &kafkago.Writer{
		Addr:            kafkago.TCP(s.cfg.brokers()...),
		Topic:           s.cfg.ChangelogTopic,
		Balancer:        &kafkago.Hash{},
		RequiredAcks:    kafkago.RequireAll,
		BatchSize:       s.cfg.ShipBatch,
		BatchBytes:      int64(maxBytes),
		BatchTimeout:    time.Millisecond,
		MaxAttempts:     3,
		WriteBackoffMin: s.cfg.RetryBackoff,
		WriteBackoffMax: s.cfg.RetryBackoffMax,
		Transport:       s.conns.transport,
		Logger:          kafkaLogger(s.log, slog.LevelDebug),
		ErrorLogger:     kafkaLogger(s.log, slog.LevelDebug),
	}
	defer s.w.Close()

	if err := s.bootstrap(stop, work); err != nil {
		return
	}
	b.Reset()
	failing := false
	for {
		if stop.Err() != nil {
			return
		}
		n, err := s.shipOnce(work)
		switch {
		case errors.Is(err, outbox.ErrClosed):
			// The outbox stopped before the runner: nothing more will
			// be written, and what is left is shipped at the next start.
			s.log.Info("kafka: the store is closed; changelog shipping stops", "topic", s.cfg.ChangelogTopic)
			return
		case err != nil:
			s.ready.Store(false)
			s.met.shipErrors.Add(1)
			if !failing {
				s.log.Warn("kafka: changelog shipping failed; retrying", "topic", s.cfg.ChangelogTopic, "err", err)
				failing = true
			} else {
				s.log.Debug("kafka: changelog shipping", "err", err)
			}
			if !sleepCtx(stop, b.NextBackOff()) {
				return
			}
		case n == 0:
			if failing {
				s.log.Info("kafka: changelog shipping resumed", "topic", s.cfg.ChangelogTopic)
				failing = false
			}
			b.Reset()
			if !sleepCtx(stop, s.cfg.ShipInterval) {
				return
			}
		default:
			if failing {
				s.log.Info("kafka: changelog shipping resumed", "topic", s.cfg.ChangelogTopic)
				failing = false
			}
			b.Reset()
		}
	}
}

// shipOnce ships the next batch of entries and returns how many it shipped.
func (s *shipper) shipOnce(ctx context.Context) (int, error) {
	from := s.shipped.Load() + 1
	entries, err := s.st.Entries(from, s.cfg.ShipBatch)
	if err != nil {
		return 0, fmt.Errorf("read changelog: %w", err)
	}
	if len(entries) == 0 {
		s.ready.Store(true)
		return 0, nil
	}
	msgs := make([]kafkago.Message, len(entries))
	for i, e := range entries {
		msgs[i] = entryMessage(e)
		if s.stamp != nil {
			s.stamp.apply(&msgs[i])
		}
	}
	if err := s.w.WriteMessages(ctx, msgs...); err != nil {
		// Some of the batch may have landed: the whole batch is sent again
		// in LSN order, so the last record of every ID is still its latest.
		return 0, fmt.Errorf("produce %d entries from LSN %d: %w", len(msgs), from, err)
	}
	if s.written != nil {
		s.written.Add(int64(len(msgs)))
	}
	last := entries[len(entries)-1].LSN
	if err := s.st.MarkShipped(ctx, last); err != nil {
		return 0, fmt.Errorf("record shipped LSN %d: %w", last, err)
	}
	s.shipped.Store(last)
	s.ready.Store(true)
	s.met.shipped.Add(uint64(len(entries)))
	return len(entries), nil
}

// bootstrap handles a store that has never shipped and whose changelog no
// longer starts at LSN 1 (trimmed before shipping was turned on): it turns
// the trimming floor on, then ships the current pending and dead records as
// a snapshot, before the retained changelog follows (later in the topic, so
// it wins). Without this a restore would miss events whose entries were
// trimmed.
func (s *shipper) bootstrap(stop, work context.Context) error {
	if s.shipped.Load() != 0 {
		return nil
	}
	b := s.newBackoff()
	for {
		err := s.snapshotIfTrimmed(work)
		if err == nil {
			return nil
		}
		s.met.shipErrors.Add(1)
		s.log.Warn("kafka: changelog snapshot failed; retrying", "topic", s.cfg.ChangelogTopic, "err", err)
		if !sleepCtx(stop, b.NextBackOff()) {
			return stop.Err()
		}
	}
}

func (s *shipper) snapshotIfTrimmed(ctx context.Context) error {
	first, err := s.st.Entries(1, 1)
	if err != nil {
		return err
	}
	if len(first) == 0 || first[0].LSN <= 1 {
		return nil
	}
	start := first[0].LSN
	// From here on the store keeps every entry from start.
	if err := s.st.MarkShipped(ctx, start-1); err != nil {
		return err
	}
	n := 0
	for _, state := range []outbox.State{outbox.StatePending, outbox.StateDead} {
		after := ""
		for {
			entries, next, err := s.st.Snapshot(state, after, s.cfg.ShipBatch)
			if err != nil {
				return err
			}
			if len(entries) > 0 {
				msgs := make([]kafkago.Message, len(entries))
				for i, e := range entries {
					msgs[i] = entryMessage(e)
				}
				if err := s.w.WriteMessages(ctx, msgs...); err != nil {
					return err
				}
				n += len(entries)
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	s.shipped.Store(start - 1)
	s.log.Info("kafka: shipped a snapshot of the store before its retained changelog",
		"topic", s.cfg.ChangelogTopic, "records", n, "changelog_from", start)
	return nil
}

// ensureTopic creates the changelog topic compacted when it is missing and
// returns the largest batch the topic accepts.
func (s *shipper) ensureTopic(ctx context.Context) (int, error) {
	cl := &kafkago.Client{Addr: kafkago.TCP(s.cfg.brokers()...), Transport: s.conns.transport, Timeout: s.cfg.DialTimeout}
	topic := s.cfg.ChangelogTopic
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
		resp, err := cl.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
			Topic:             topic,
			NumPartitions:     s.cfg.ChangelogPartitions,
			ReplicationFactor: s.cfg.ChangelogReplication,
			ConfigEntries: []kafkago.ConfigEntry{
				{ConfigName: "cleanup.policy", ConfigValue: "compact"},
				{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(DefaultChangelogMaxBytes)},
			},
		}}})
		if err != nil {
			return 0, fmt.Errorf("create topic %s: %w", topic, err)
		}
		if err := resp.Errors[topic]; err != nil && !errors.Is(err, kafkago.TopicAlreadyExists) {
			return 0, fmt.Errorf("create topic %s: %w", topic, err)
		}
		s.log.Info("kafka: created the changelog topic, compacted", "topic", topic,
			"partitions", s.cfg.ChangelogPartitions)
	}
	lim, err := describeChangelog(ctx, cl, topic)
	if err != nil {
		s.log.Debug("kafka: describe changelog topic", "err", err)
		return lim.maxBytes, nil
	}
	if !lim.compacted {
		s.log.Warn("kafka: the changelog topic is not compacted; it will grow without bound and a restore replays all of it",
			"topic", topic, "cleanup.policy", lim.policy)
	}
	return lim.maxBytes, nil
}

// changelogLimits is what a changelog topic's configuration says.
type changelogLimits struct {
	maxBytes  int    // the largest batch it accepts, at most DefaultChangelogMaxBytes
	policy    string // cleanup.policy ("" when not described)
	compacted bool   // the policy compacts (true when not described)
}

// describeChangelog reads a changelog topic's cleanup.policy and
// max.message.bytes. On an error it returns the defaults (1 MiB,
// compacted): brokers that do not describe topics are taken at their word.
func describeChangelog(ctx context.Context, cl *kafkago.Client, topic string) (changelogLimits, error) {
	lim := changelogLimits{maxBytes: 1 << 20, compacted: true}
	dc, err := cl.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic,
		ConfigNames: []string{"cleanup.policy", "max.message.bytes"},
	}}})
	if err != nil {
		return lim, err
	}
	for _, res := range dc.Resources {
		for _, ce := range res.ConfigEntries {
			switch ce.ConfigName {
			case "cleanup.policy":
				lim.policy = ce.ConfigValue
				lim.compacted = strings.Contains(ce.ConfigValue, "compact")
			case "max.message.bytes":
				if n, err := strconv.Atoi(ce.ConfigValue); err == nil && n > 0 {
					lim.maxBytes = min(n, DefaultChangelogMaxBytes)
				}
			}
		}
	}
	return lim, nil
}

// lag returns how far shipping is behind: in LSNs, and in seconds since the
// oldest entry not yet shipped was written.
func (s *shipper) lag() (lsns uint64, seconds float64) {
	last := s.st.LastLSN()
	shipped := s.shipped.Load()
	if last <= shipped {
		return 0, 0
	}
	lsns = last - shipped
	if es, err := s.st.Entries(shipped+1, 1); err == nil && len(es) > 0 {
		seconds = max(s.now().Sub(es[0].Time).Seconds(), 0)
	}
	return lsns, seconds
}

// sleepCtx waits d or until ctx is done; it reports whether it waited d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
