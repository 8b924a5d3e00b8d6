package cli

import (
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strings"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// newLogger builds the process logger from the log settings.
func newLogger(l config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(l.Level) {
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// sinkConfig maps the settings onto the HTTP sink's configuration.
func sinkConfig(c *config.Config, logger *slog.Logger) (httpsink.Config, error) {
	policy, err := httpsink.ParsePolicy(c.Delivery.Policy...)
	if err != nil {
		return httpsink.Config{}, &config.SettingError{Setting: "delivery.policy", Reason: err.Error()}
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
		Logger:               logger.With("component", "httpsink"),
	}, nil
}

// outboxConfig maps the settings onto the outbox's configuration.
func outboxConfig(c *config.Config, sink outbox.Sink, logger *slog.Logger) outbox.Config {
	d := c.Delivery
	return outbox.Config{
		Sink:                sink,
		Logger:              logger.With("component", "outbox"),
		Interval:            d.Interval,
		BatchSize:           d.BatchSize,
		Concurrency:         d.Concurrency,
		MaxPerEndpoint:      d.MaxPerEndpoint,
		MaxAttempts:         d.MaxAttempts,
		MaxAge:              d.MaxAge,
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

// groupCommitRecords is how many records concurrent enqueues may share in
// one store commit: eight full API batches. The store's default (1,000)
// suits an embedded outbox fed one event at a time; the sidecar takes
// batches of up to limits.max_batch from many clients at once, and several
// of them sharing a commit share its two fsyncs.
func groupCommitRecords(maxBatch int) int {
	return min(max(8*maxBatch, 1000), 64000)
}

// apiConfig maps the settings onto the HTTP API's configuration.
func apiConfig(c *config.Config, logger *slog.Logger) httpapi.Config {
	return httpapi.Config{
		Token:           c.Token,
		MaxBodyBytes:    int64(c.Limits.MaxBodyBytes),
		MaxPayloadBytes: int(c.Limits.MaxPayloadBytes),
		MaxBatch:        c.Limits.MaxBatch,
		MaxIDBytes:      c.Limits.MaxIDBytes,
		MaxBodyMemory:   int64(c.Limits.MaxBodyMemory),
		ReadBodyTimeout: c.Limits.ReadBodyTimeout,
		Logger:          logger.With("component", "httpapi"),
	}
}

var camel = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// settingName turns a Go field path of a package's ConfigError
// ("Endpoints[0].MaxInFlight") into the setting's YAML path
// ("endpoints[0].max_in_flight").
func settingName(field string) string {
	parts := strings.Split(field, ".")
	for i, p := range parts {
		name, rest, _ := strings.Cut(p, "[")
		if rest != "" {
			rest = "[" + rest
		}
		name = strings.ToLower(camel.ReplaceAllString(name, "${1}_${2}"))
		parts[i] = name + rest
	}
	return strings.Join(parts, ".")
}

// explainConfigError rewrites the configuration errors of the sink and the
// outbox so that they name outboxd's settings.
func explainConfigError(err error) error {
	var se *httpsink.ConfigError
	if errors.As(err, &se) {
		return &config.SettingError{Setting: settingName(se.Field), Reason: se.Reason}
	}
	var oe *outbox.ConfigError
	if errors.As(err, &oe) {
		name := "delivery." + settingName(oe.Field)
		switch oe.Field {
		case "MaxThrottle":
			name = "delivery.max_retry_after"
		case "MaxPayloadBytes", "MaxIDBytes":
			name = "limits." + settingName(oe.Field)
		}
		return &config.SettingError{Setting: name, Reason: oe.Reason}
	}
	return err
}
