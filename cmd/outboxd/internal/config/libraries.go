package config

import (
	"log/slog"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// SinkConfig maps the settings onto the HTTP sink's configuration. logger
// may be nil (the sink's default: discard). The error is a *SettingError
// for a policy rule that does not parse.
func (c *Config) SinkConfig(logger *slog.Logger) (httpsink.Config, error) {
	policy, err := httpsink.ParsePolicy(c.Delivery.Policy...)
	if err != nil {
		return httpsink.Config{}, &SettingError{Setting: "delivery.policy", Reason: err.Error(), Err: err}
	}
	eps := make([]httpsink.Endpoint, len(c.Endpoints))
	for i, e := range c.Endpoints {
		eps[i] = httpsink.Endpoint{
			Name:         e.Name,
			URL:          e.URL,
			Secrets:      e.Secrets,
			Timeout:      e.Timeout,
			Headers:      e.Headers,
			MaxInFlight:  e.MaxInFlight,
			AllowPrivate: e.AllowPrivate,
		}
	}
	return httpsink.Config{
		Endpoints:            eps,
		AllowRawURLs:         c.AllowRawURLs,
		AllowPrivateNetworks: c.AllowPrivateNetworks,
		Policy:               policy,
		Timeout:              c.Delivery.Timeout,
		MaxRetryAfter:        c.Delivery.MaxRetryAfter,
		PoolSize:             c.Delivery.Concurrency,
		Logger:               component(logger, "httpsink"),
	}, nil
}

// OutboxConfig maps the settings onto the outbox's configuration, delivering
// through sink. logger may be nil (the outbox's default: discard). Zero
// settings stay zero: the outbox takes them as its defaults.
func (c *Config) OutboxConfig(sink outbox.Sink, logger *slog.Logger) outbox.Config {
	d := c.Delivery
	return outbox.Config{
		Sink:                sink,
		Logger:              component(logger, "outbox"),
		Interval:            d.Interval,
		BatchSize:           d.BatchSize,
		Concurrency:         d.Concurrency,
		MaxPerEndpoint:      d.MaxPerEndpoint,
		MaxAttempts:         d.MaxAttempts,
		MaxAge:              d.MaxAge,
		MaxSchedule:         d.MaxSchedule,
		BackoffInitial:      d.BackoffInitial,
		BackoffMax:          d.BackoffMax,
		ParkInterval:        d.ParkInterval,
		MaxThrottle:         d.MaxRetryAfter,
		Ordered:             d.Ordered,
		CommitInterval:      d.CommitInterval,
		MaxUncommitted:      d.MaxUncommitted,
		TombstoneRetention:  d.TombstoneRetention,
		ChangelogRetention:  d.ChangelogRetention,
		ChangelogMaxEntries: d.ChangelogMaxEntries,
		MaintenanceInterval: d.MaintenanceInterval,
		MaxPayloadBytes:     int(c.Limits.MaxPayloadBytes),
		MaxIDBytes:          c.Limits.MaxIDBytes,
		MaxCommitBatch:      groupCommitRecords(c.Limits.MaxBatch),
		// The key index serves per-key order and Upsert, which the
		// sidecar's API does not offer: without ordering it would only
		// slow keyed enqueues down as the backlog grows. Turning ordering
		// on later rebuilds it when the file is opened.
		NoKeyIndex: !d.Ordered,
	}
}

func component(logger *slog.Logger, name string) *slog.Logger {
	if logger == nil {
		return nil
	}
	return logger.With("component", name)
}

// groupCommitRecords is how many records concurrent enqueues may share in
// one store commit: eight full API batches. The store's default (1,000)
// suits an embedded outbox fed one event at a time; the sidecar takes
// batches of up to limits.max_batch from many clients at once, and several
// of them sharing a commit share its two fsyncs.
func groupCommitRecords(maxBatch int) int {
	return min(max(8*maxBatch, 1000), 64000)
}

// validateLibraries checks the settings the sink and the outbox take with
// their own validation, as serve will configure them, and names the setting
// of the field they refuse.
func validateLibraries(c *Config) error {
	sc, err := c.SinkConfig(nil)
	if err != nil {
		return err
	}
	sink, err := httpsink.New(sc)
	if err != nil {
		return Explain(err)
	}
	defer sink.Close()
	return Explain(c.OutboxConfig(sink, nil).Validate())
}
