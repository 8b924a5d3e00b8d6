package config

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// SinkConfig maps the settings onto the HTTP sink's configuration: the
// endpoints of kind http. logger may be nil (the sink's default: discard).
// The error is a *SettingError for a policy rule that does not parse.
func (c *Config) SinkConfig(logger *slog.Logger) (httpsink.Config, error) {
	policy, err := httpsink.ParsePolicy(c.Delivery.Policy...)
	if err != nil {
		return httpsink.Config{}, &SettingError{Setting: "delivery.policy", Reason: err.Error(), Err: err}
	}
	eps := make([]httpsink.Endpoint, 0, len(c.Endpoints))
	for _, e := range c.Endpoints {
		if e.IsKafka() {
			continue
		}
		eps = append(eps, httpsink.Endpoint{
			Name:         e.Name,
			URL:          e.URL,
			Secrets:      e.Secrets,
			Timeout:      e.Timeout,
			Headers:      e.Headers,
			MaxInFlight:  e.MaxInFlight,
			AllowPrivate: e.AllowPrivate,
		})
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
// settings stay zero: the outbox takes them as its defaults. The endpoints'
// rate limits are built anew: outboxes that are to share them (the local
// store and the partition stores of one process) share one Config. The
// error is a *SettingError naming an endpoint's rate limit it refuses.
func (c *Config) OutboxConfig(sink outbox.Sink, logger *slog.Logger) (outbox.Config, error) {
	d := c.Delivery
	limits, err := c.rateLimits()
	if err != nil {
		return outbox.Config{}, err
	}
	subs, err := c.subscriptions()
	if err != nil {
		return outbox.Config{}, err
	}
	unrouted := outbox.UnroutedKeep
	if d.DropUnrouted {
		unrouted = outbox.UnroutedDrop
	}
	return outbox.Config{
		Sink:                  sink,
		Logger:                component(logger, "outbox"),
		Interval:              d.Interval,
		BatchSize:             d.BatchSize,
		Concurrency:           d.Concurrency,
		MaxPerEndpoint:        d.MaxPerEndpoint,
		InitialPerEndpoint:    d.InitialPerEndpoint,
		NoAdaptiveConcurrency: !d.AdaptiveConcurrency,
		MaxAttempts:           d.MaxAttempts,
		MaxAge:                d.MaxAge,
		MaxSchedule:           d.MaxSchedule,
		BackoffInitial:        d.BackoffInitial,
		BackoffMax:            d.BackoffMax,
		ParkInterval:          d.ParkInterval,
		MaxThrottle:           d.MaxRetryAfter,
		RateLimits:            limits,
		Subscriptions:         subs,
		Unrouted:              unrouted,

		UnroutedRetention: d.UnroutedRetention,
		Breaker: outbox.Breaker{
			Threshold:   d.BreakerThreshold,
			CoolDown:    d.BreakerCoolDown,
			MaxCoolDown: d.BreakerMaxCoolDown,
		},
		Ordered:              d.Ordered,
		CommitInterval:       d.CommitInterval,
		MaxUncommitted:       d.MaxUncommitted,
		TombstoneRetention:   d.TombstoneRetention,
		ChangelogRetention:   d.ChangelogRetention,
		ChangelogMaxEntries:  d.ChangelogMaxEntries,
		MaintenanceInterval:  d.MaintenanceInterval,
		Retain:               time.Duration(d.Retain),
		RetainMaxBytes:       int64(d.RetainMaxBytes),
		MaxPayloadBytes:      int(c.Limits.MaxPayloadBytes),
		MaxIDBytes:           c.Limits.MaxIDBytes,
		MaxCommitBatch:       groupCommitRecords(c.Limits.MaxBatch),
		MaxDeliveriesPerCall: c.Limits.MaxDeliveriesPerRequest,
		// The key index serves per-key order and Upsert, which the
		// sidecar's API does not offer: without ordering it would only
		// slow keyed enqueues down as the backlog grows. Turning ordering
		// on later rebuilds it when the file is opened.
		NoKeyIndex:          !d.Ordered,
		NoAttemptLog:        !d.AttemptLog,
		AttemptExcerptBytes: attemptExcerpt(d.AttemptExcerpt),
	}, nil
}

// rateLimits builds the endpoints' rate limits, an empty set when none has
// one: limits of endpoints managed through the API are added at run time.
func (c *Config) rateLimits() (*outbox.RateLimits, error) {
	var limits map[string]outbox.RateLimit
	for i, e := range c.Endpoints {
		setting := fmt.Sprintf("endpoints[%d]", i)
		switch {
		case e.RateLimit != 0 && outbox.ValidateRate(e.RateLimit) != nil:
			return nil, bad(setting+".rate_limit", "%s", rateReason(e.RateLimit))
		case e.Burst < 0:
			return nil, bad(setting+".burst", "want a whole number of at least 1, got %d", e.Burst)
		case e.Burst > 0 && e.RateLimit == 0:
			return nil, bad(setting+".burst", "is set but rate_limit is not")
		case e.RateLimit == 0:
			continue
		}
		if limits == nil {
			limits = make(map[string]outbox.RateLimit)
		}
		limits[e.Name] = outbox.RateLimit{PerSecond: e.RateLimit, Burst: max(1, e.Burst)}
	}
	rl, err := outbox.NewRateLimits(limits)
	if err != nil {
		return nil, Explain(err)
	}
	return rl, nil
}

// rateReason returns why outbox.ValidateRate refuses perSecond.
func rateReason(perSecond float64) string {
	var ve *outbox.ValidationError
	if errors.As(outbox.ValidateRate(perSecond), &ve) {
		return ve.Reason
	}
	return ""
}

// subscriptions builds the subscriptions of the endpoints' topics and
// filters. The error is a *SettingError naming the endpoint's setting.
func (c *Config) subscriptions() ([]outbox.Subscription, error) {
	var subs []outbox.Subscription
	for i, e := range c.Endpoints {
		setting := fmt.Sprintf("endpoints[%d]", i)
		if len(e.Filter) > 0 && len(e.Topics) == 0 {
			return nil, bad(setting+".filter", "narrows a subscription: set topics too")
		}
		for j, p := range e.Topics {
			if err := outbox.ValidateTopicPattern(p); err != nil {
				return nil, bad(fmt.Sprintf("%s.topics[%d]", setting, j), "%q: %v", p, err)
			}
		}
		for k, v := range e.Filter {
			if !outbox.ValidHeaderName(k) || !outbox.ValidHeaderValue(v) {
				return nil, bad(fmt.Sprintf("%s.filter[%q]", setting, k), "not a valid header name and value")
			}
		}
		if len(e.Topics) > 0 {
			subs = append(subs, outbox.Subscription{Endpoint: e.Name, Topics: e.Topics, Headers: e.Filter})
		}
	}
	return subs, nil
}

// attemptExcerpt maps delivery.attempt_excerpt, where 0 keeps none, onto
// outbox.Config.AttemptExcerptBytes, where 0 is the default and negative
// keeps none. A size beyond an int stays beyond the outbox's limit.
func attemptExcerpt(b ByteSize) int {
	if b == 0 {
		return -1
	}
	return int(min(b, 1<<31-1))
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

// validateLibraries checks the settings the sinks and the outbox take with
// their own validation, as serve will configure them, and names the setting
// of the field they refuse.
func validateLibraries(c *Config) error {
	hs, ks, err := c.NewSinks(nil)
	if err != nil {
		return err
	}
	defer hs.Close()
	if ks != nil {
		defer ks.Close()
	}
	oc, err := c.OutboxConfig(hs, nil)
	if err != nil {
		return err
	}
	return Explain(oc.Validate())
}
