package cli

import (
	"context"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// kafkaFixedReason is why the API does not change endpoints in Kafka mode:
// every instance must deliver to the same endpoints, and only the settings
// file is the same on every instance.
const kafkaFixedReason = "endpoints are managed in the settings file in Kafka mode"

// openEndpoints returns the registry of the endpoints: in Kafka mode the
// settings' only, refusing changes; otherwise the settings' and those
// managed through the API, loaded from the database file and put in force
// (call it before the outbox starts delivering).
func (s *server) openEndpoints(o *outbox.Outbox, sink *httpsink.Sink, limits *outbox.RateLimits) (*managed.Registry, error) {
	static := staticEndpoints(s.cfg.Endpoints)
	if s.cfg.Kafka.Enabled() {
		return managed.Fixed(static, kafkaFixedReason), nil
	}
	return managed.Open(context.Background(), managed.Config{
		Outbox: o, Sink: sink, Limits: limits, Static: static,
		Logger: s.log.With("component", "endpoints"),
	})
}

// staticEndpoints describes the settings' endpoints for the registry.
func staticEndpoints(eps []config.Endpoint) []managed.Static {
	out := make([]managed.Static, len(eps))
	for i, e := range eps {
		out[i] = managed.Static{
			Name: e.Name, URL: e.URL, Topics: e.Topics, Filter: e.Filter, Headers: e.Headers,
			Timeout: e.Timeout, MaxInFlight: e.MaxInFlight, Secrets: len(e.Secrets),
		}
	}
	return out
}
