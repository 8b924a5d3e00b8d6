package cli

import (
	"io"
	"log/slog"
	"strings"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
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

// apiConfig maps the settings onto the HTTP API's configuration.
func apiConfig(c *config.Config, logger *slog.Logger) httpapi.Config {
	return httpapi.Config{
		Token:                c.Token,
		MaxBodyBytes:         int64(c.Limits.MaxBodyBytes),
		MaxPayloadBytes:      int(c.Limits.MaxPayloadBytes),
		MaxBatch:             c.Limits.MaxBatch,
		MaxDeliveriesSetting: config.SettingName("limits.max_deliveries_per_request"),
		MaxIDBytes:           c.Limits.MaxIDBytes,
		MaxBodyMemory:        int64(c.Limits.MaxBodyMemory),
		ReadBodyTimeout:      c.Limits.ReadBodyTimeout,
		Logger:               logger.With("component", "httpapi"),
	}
}
