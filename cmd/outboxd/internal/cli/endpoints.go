package cli

import (
	"context"
	"errors"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/cmd/outboxd/internal/managed"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// kafkaFixedReason is why the API does not change endpoints when Kafka
// ships the local store's changelog (no group): there is no group to
// share them with through a topic, and a restore from the changelog would
// not bring them back.
const kafkaFixedReason = "endpoints are managed in the settings file when only the changelog is shipped to Kafka"

// openEndpoints returns the registry of the endpoints: in Kafka group mode
// the settings' and those of the group's endpoints topic; with changelog
// shipping only, the settings' only, refusing changes; otherwise the
// settings' and those managed through the API, loaded from the database
// file and put in force (call it before the outbox starts delivering).
func (s *server) openEndpoints(o *outbox.Outbox, sink *httpsink.Sink, limits *outbox.RateLimits) (*managed.Registry, error) {
	static := staticEndpoints(s.cfg.Endpoints)
	switch {
	case s.cfg.Kafka.Enabled() && s.cfg.Kafka.Topic != "":
		return s.openGroupEndpoints(static, sink, limits)
	case s.cfg.Kafka.Enabled():
		return managed.Fixed(static, kafkaFixedReason), nil
	}
	return managed.Open(context.Background(), managed.Config{
		Outbox: o, Sink: sink, Limits: limits, Static: static,
		Logger: s.log.With("component", "endpoints"),
	})
}

// openGroupEndpoints reads the group's endpoints topic whole into a
// registry, which then writes its changes there; the partition stores get
// its subscriptions through kafka.StoreConfig.Prepare (partitionStores).
// The topic's endpoint transitions ("state/" records) are applied to the
// shared endpoint state as they are read, those written before the open
// included, so a disable holds from before the first delivery; then the
// instance's own transitions start to be written there. The table is
// closed by closeGroupTable, after every store stopped.
func (s *server) openGroupEndpoints(static []managed.Static, sink *httpsink.Sink, limits *outbox.RateLimits) (*managed.Registry, error) {
	var key []byte
	if f := s.cfg.EndpointSecretKeyFile; f != "" {
		k, err := managed.LoadKey(f)
		if err != nil {
			return nil, failed(exitUsage, "%v", err)
		}
		key = k
	}
	log := s.log.With("component", "endpoints")
	reg, err := managed.NewGroup(managed.GroupConfig{
		Sink: sink, Limits: limits, Static: static, Subscriptions: s.ocfg.Subscriptions, Key: key, Logger: log,
	})
	if err != nil {
		return nil, failed(exitUsage, "%v", err)
	}
	k := s.cfg.Kafka
	ctx, cancel := context.WithTimeout(context.Background(), k.WithDefaults().DialTimeout*3)
	defer cancel()
	t, err := kafka.OpenTable(ctx, k, kafka.TableConfig{Logger: log, Handlers: map[string]kafka.TableHandler{
		managed.RecordPrefix: func(r kafka.TableRecord) error { return reg.ApplyRecord(r.Offset, r.Key, r.Value) },
		statePrefix:          applyState(s.shared),
	}})
	if err != nil {
		return nil, failed(exitError, "reading the group's endpoints topic %s: %v", kafka.EndpointsTopic(k), err)
	}
	if err := reg.Attach(ctx, t); err != nil {
		t.Close()
		code := exitError
		if errors.Is(err, managed.ErrKey) {
			code = exitUsage
		}
		return nil, failed(code, "%v", err)
	}
	s.table = t
	s.pub.start(t)
	return reg, nil
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
