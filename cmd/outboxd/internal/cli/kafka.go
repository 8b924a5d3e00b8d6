package cli

import (
	"context"
	"log/slog"

	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// kafkaRunner is what serve needs of a running Kafka integration: a
// *kafka.Runner, or a *kafka.Group in group mode. /readyz's kafka and
// restores checks find what they read by type assertion (kafkaGroup,
// kafkaReadiness in ready.go).
type kafkaRunner interface {
	Close(ctx context.Context) error
	Metrics() kafka.Metrics
}

// partitionStores is where group mode keeps the partition stores: the
// directory <db>.partitions beside the local store.
func partitionStores(db string, cfg outbox.Config) kafka.StoreConfig {
	return kafka.StoreConfig{Dir: db + ".partitions", Outbox: cfg}
}

// startKafka validates the Kafka settings and starts them: with an ingest
// topic, group mode (a store per partition in sc.Dir, restored from the
// group's changelog topic); with only a changelog topic, shipping of the
// local store's changelog.
func startKafka(ctx context.Context, o *outbox.Outbox, k kafka.Config, sc kafka.StoreConfig, logger *slog.Logger) (kafkaRunner, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	logger = logger.With("component", "kafka")
	if k.Topic != "" {
		return kafka.StartGroup(ctx, k, sc, logger)
	}
	return kafka.Start(ctx, o, k, logger)
}

// restoreFromKafka rebuilds the database at dbPath from the changelog topic.
func restoreFromKafka(ctx context.Context, k kafka.Config, dbPath string, progress func(kafka.RestoreProgress)) (kafka.RestoreStats, error) {
	return kafka.Restore(ctx, k, dbPath, progress)
}
