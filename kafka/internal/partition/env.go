package partition

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/offsets"
	"github.com/outboxd/outbox/kafka/internal/retry"
	"github.com/outboxd/outbox/kafka/internal/ship"
	"github.com/outboxd/outbox/outbox"
)

// Env is what the tasks and standbys of a group share: its configuration,
// its connections to the brokers, its files and its ingest.
type Env struct {
	// Config is the configuration the tasks and standbys use.
	Config Config
	// Log is the group's logger.
	Log *slog.Logger
	// Work bounds writes and hand-overs; it is cancelled only when the
	// group's Close runs out of time.
	Work context.Context
	// Writer writes the group's changelog records, each to the partition
	// its stamp names. It is set before the group's first generation.
	Writer *kafkago.Writer
	// Client asks for the changelog partitions' offsets.
	Client *kafkago.Client
	// Reading reads the changelog topic.
	Reading changelog.Reading
	// Files names the partitions' files.
	Files Files
	// StoreConfig is the configuration of partition p's store.
	StoreConfig func(p int) outbox.Config
	// BeforeStart, when not nil, is called with partition p's store after
	// it is restored and before it starts; an error keeps it from starting.
	BeforeStart func(p int, o *outbox.Outbox) error
	// Ingest ingests an owned partition into its store.
	Ingest Ingest
	// Counts are the group's counters of restores and standbys.
	Counts *Counts
	// ShipCounts are the group's shipping counters.
	ShipCounts *ship.Counts
	// TopicError is the error for a changelog topic that cannot serve:
	// reason says what is wrong with partition p of topic (-1 for the
	// whole topic), err is the underlying error or nil.
	TopicError func(topic string, p int, reason string, err error) error
}

// Config is the partitions' part of the group's configuration.
type Config struct {
	// Topic is the ingest topic, ChangelogTopic the changelog topic.
	Topic, ChangelogTopic string
	// DialTimeout bounds a request for offsets and a fence write (at
	// least 5s for the latter).
	DialTimeout time.Duration
	// RetryBackoff and RetryBackoffMax pace the retries of a restore, a
	// fence write, shipping and a standby.
	RetryBackoff, RetryBackoffMax time.Duration
	// HandoverBudget bounds a hand-over: deliveries finish within two
	// thirds of it, shipping the rest of the changelog within all of it.
	HandoverBudget time.Duration
	// Ship is the configuration of the stores' shipping.
	Ship ship.Config
}

// Ingest is the group's ingest, as the tasks use it.
type Ingest interface {
	// Consume ingests partition pa into o until gctx ends, marking in tr
	// what is durable.
	Consume(gctx context.Context, pa kafkago.PartitionAssignment, tr *offsets.Tracker, o *outbox.Outbox)
	// Committed returns the ingest offsets last committed, by partition.
	Committed() map[int]int64
}

// Counts are the group's counters of restores and standbys.
type Counts struct {
	// RestoresCheckpoint and RestoresRebuild count the finished restores
	// by mode; RestoreFailures the failed attempts.
	RestoresCheckpoint, RestoresRebuild, RestoreFailures atomic.Uint64
	// StandbyFailures counts the failed attempts of standbys.
	StandbyFailures atomic.Uint64
}

// backoff is the retry backoff of the group's configuration.
func (g *Env) backoff() *backoff.ExponentialBackOff {
	return retry.Backoff(g.Config.RetryBackoff, g.Config.RetryBackoffMax)
}
