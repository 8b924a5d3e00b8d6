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

// startKafka validates the Kafka settings and starts ingest and/or
// changelog shipping.
func startKafka(ctx context.Context, o *outbox.Outbox, k kafka.Config, logger *slog.Logger) (kafkaRunner, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	r, err := kafka.Start(ctx, o, k, logger.With("component", "kafka"))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// restoreFromKafka rebuilds the database at dbPath from the changelog topic.
func restoreFromKafka(ctx context.Context, k kafka.Config, dbPath string, progress func(kafka.RestoreProgress)) (kafka.RestoreStats, error) {
	return kafka.Restore(ctx, k, dbPath, progress)
}
