package cli

import (
	"context"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// kafkaRunner is what serve needs of a running Kafka integration.
type kafkaRunner interface {
	Ready() bool
	Close(ctx context.Context) error
	Collectors() []prometheus.Collector
}

// kafkaConfig maps the settings onto package kafka's configuration.
func kafkaConfig(k config.Kafka) kafka.Config {
	return kafka.Config{
		Brokers:           k.Brokers,
		Topic:             k.Topic,
		Group:             k.Group,
		Destination:       k.Destination,
		DestinationHeader: k.DestinationHeader,
		IDHeader:          k.IDHeader,
		StartOffset:       k.StartOffset,
		ChangelogTopic:    k.ChangelogTopic,
		ClientID:          k.ClientID,
		TLS: kafka.TLSConfig{
			Enabled:            k.TLS.Enabled,
			CAFile:             k.TLS.CAFile,
			CertFile:           k.TLS.CertFile,
			KeyFile:            k.TLS.KeyFile,
			InsecureSkipVerify: k.TLS.InsecureSkipVerify,
		},
		SASL: kafka.SASLConfig{
			Mechanism: k.SASL.Mechanism,
			Username:  k.SASL.Username,
			Password:  k.SASL.Password,
		},
	}
}

// startKafka validates the Kafka settings and starts ingest and/or
// changelog shipping.
func startKafka(ctx context.Context, o *outbox.Outbox, k config.Kafka, logger *slog.Logger) (kafkaRunner, error) {
	kc := kafkaConfig(k)
	if err := kc.Validate(); err != nil {
		return nil, err
	}
	r, err := kafka.Start(ctx, o, kc, logger.With("component", "kafka"))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// restoreFromKafka rebuilds the database at dbPath from the changelog topic.
func restoreFromKafka(ctx context.Context, k config.Kafka, dbPath string, progress io.Writer) (kafka.RestoreStats, error) {
	kc := kafkaConfig(k)
	if err := kc.Validate(); err != nil {
		return kafka.RestoreStats{}, err
	}
	return kafka.Restore(ctx, kc, dbPath, progress)
}
