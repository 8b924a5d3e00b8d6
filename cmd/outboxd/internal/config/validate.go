package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
)

// SettingError is an invalid setting. Its message names the setting by its
// YAML path, flag and environment variable.
type SettingError struct {
	// Setting is the YAML path, e.g. "delivery.interval" or "endpoints[0].url".
	Setting string
	// Reason says what is wrong.
	Reason string
}

// Error names the setting with its flag and environment variable, if any.
func (e *SettingError) Error() string {
	name := e.Setting
	var alt []string
	base := name
	if i := strings.IndexByte(base, '['); i >= 0 {
		base = base[:i]
	}
	for _, s := range settings() {
		if s.path != base {
			continue
		}
		if s.flag != "" {
			alt = append(alt, "--"+s.flag)
		}
		if s.env != "" {
			alt = append(alt, s.env)
		}
	}
	if len(alt) > 0 {
		name += " (" + strings.Join(alt, ", ") + ")"
	}
	return "invalid setting " + name + ": " + e.Reason
}

func bad(setting, format string, args ...any) error {
	return &SettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks c and fills the defaults that depend on other settings.
func Validate(c *Config) error {
	if c.DB == "" {
		return bad("db", "must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "want HOST:PORT such as 127.0.0.1:8080, got %q", c.Listen)
	}
	if c.ShutdownGrace <= 0 {
		return bad("shutdown_grace", "must be positive, got %s", c.ShutdownGrace)
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "warning", "error":
	default:
		return bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	if err := validateLimits(&c.Limits); err != nil {
		return err
	}
	if err := validateDelivery(&c.Delivery); err != nil {
		return err
	}
	if err := validateEndpoints(c.Endpoints); err != nil {
		return err
	}
	return validateKafka(&c.Kafka)
}

func validateLimits(l *Limits) error {
	switch {
	case l.MaxBodyBytes <= 0:
		return bad("limits.max_body_bytes", "must be positive")
	case l.MaxPayloadBytes <= 0:
		return bad("limits.max_payload_bytes", "must be positive")
	case l.MaxPayloadBytes > l.MaxBodyBytes:
		return bad("limits.max_payload_bytes", "%s is more than limits.max_body_bytes (%s)", l.MaxPayloadBytes, l.MaxBodyBytes)
	case l.MaxBatch <= 0:
		return bad("limits.max_batch", "must be positive, got %d", l.MaxBatch)
	case l.MaxIDBytes <= 0:
		return bad("limits.max_id_bytes", "must be positive, got %d", l.MaxIDBytes)
	case l.MaxBodyMemory < l.MaxBodyBytes:
		return bad("limits.max_body_memory", "%s is less than limits.max_body_bytes (%s): a body of the largest size could never be read", l.MaxBodyMemory, l.MaxBodyBytes)
	case l.MaxConnections <= 0:
		return bad("limits.max_connections", "must be positive, got %d", l.MaxConnections)
	case l.MaxHeaderBytes < 1<<10:
		return bad("limits.max_header_bytes", "must be at least 1KiB, got %s", l.MaxHeaderBytes)
	case l.ReadHeaderTimeout <= 0:
		return bad("limits.read_header_timeout", "must be positive, got %s", l.ReadHeaderTimeout)
	case l.ReadBodyTimeout <= 0:
		return bad("limits.read_body_timeout", "must be positive, got %s", l.ReadBodyTimeout)
	case l.IdleTimeout <= 0:
		return bad("limits.idle_timeout", "must be positive, got %s", l.IdleTimeout)
	}
	return nil
}

func validateDelivery(d *Delivery) error {
	for _, p := range []struct {
		path string
		d    time.Duration
	}{
		{"delivery.interval", d.Interval},
		{"delivery.max_age", d.MaxAge},
		{"delivery.backoff_initial", d.BackoffInitial},
		{"delivery.backoff_max", d.BackoffMax},
		{"delivery.park_interval", d.ParkInterval},
		{"delivery.timeout", d.Timeout},
		{"delivery.max_retry_after", d.MaxRetryAfter},
		{"delivery.tombstone_retention", d.TombstoneRetention},
		{"delivery.maintenance_interval", d.MaintenanceInterval},
	} {
		if p.d <= 0 {
			return bad(p.path, "must be positive, got %s", p.d)
		}
	}
	for _, p := range []struct {
		path string
		n    int
	}{
		{"delivery.batch_size", d.BatchSize},
		{"delivery.concurrency", d.Concurrency},
		{"delivery.max_attempts", d.MaxAttempts},
		{"delivery.max_uncommitted", d.MaxUncommitted},
	} {
		if p.n <= 0 {
			return bad(p.path, "must be positive, got %d", p.n)
		}
	}
	// Zero is refused rather than taken as the outbox's default: it reads
	// as "keep nothing", which the outbox cannot do.
	if d.ChangelogRetention == 0 {
		return bad("delivery.changelog_retention", "must not be zero: a positive duration, or negative (e.g. -1s) for no age limit")
	}
	if d.ChangelogMaxEntries == 0 {
		return bad("delivery.changelog_max_entries", "must not be zero: a positive number, or negative (e.g. -1) for no count limit")
	}
	if d.MaxPerEndpoint < 0 || d.MaxPerEndpoint > d.Concurrency {
		return bad("delivery.max_per_endpoint", "must be from 0 (meaning delivery.concurrency) to delivery.concurrency (%d), got %d", d.Concurrency, d.MaxPerEndpoint)
	}
	if d.BackoffMax < d.BackoffInitial {
		return bad("delivery.backoff_max", "%s is less than delivery.backoff_initial (%s)", d.BackoffMax, d.BackoffInitial)
	}
	if _, err := httpsink.ParsePolicy(d.Policy...); err != nil {
		return bad("delivery.policy", "%v", err)
	}
	return nil
}

func validateEndpoints(eps []Endpoint) error {
	seen := make(map[string]bool, len(eps))
	for i, e := range eps {
		p := fmt.Sprintf("endpoints[%d]", i)
		if e.Name == "" {
			return bad(p+".name", "is required")
		}
		if seen[e.Name] {
			return bad(p+".name", "%q is configured twice", e.Name)
		}
		seen[e.Name] = true
		u, err := url.Parse(e.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// The URL is not quoted: it may hold credentials.
			return bad(p+".url", "endpoint %s: want an absolute http or https URL", e.Name)
		}
		for j, s := range e.Secrets {
			if !strings.HasPrefix(s, "whsec_") {
				return bad(fmt.Sprintf("%s.secrets[%d]", p, j), "endpoint %s: a secret starts with whsec_ followed by base64", e.Name)
			}
		}
		if e.Timeout < 0 {
			return bad(p+".timeout", "endpoint %s: must not be negative", e.Name)
		}
		if e.MaxInFlight < 0 {
			return bad(p+".max_in_flight", "endpoint %s: must not be negative", e.Name)
		}
	}
	return nil
}

// validateKafka checks the Kafka settings when any is set; the field names of
// package kafka's errors are translated to the settings' YAML paths.
func validateKafka(k *kafka.Config) error {
	if len(k.Brokers) == 0 && (k.Topic != "" || k.ChangelogTopic != "") {
		return bad("kafka.brokers", "required when kafka.topic or kafka.changelog_topic is set")
	}
	if len(k.Brokers) == 0 {
		return nil
	}
	if k.Topic == "" && k.ChangelogTopic == "" {
		return bad("kafka.topic", "kafka.brokers is set but neither kafka.topic nor kafka.changelog_topic is")
	}
	if err := k.Validate(); err != nil {
		var se *SettingError
		if errors.As(KafkaSettingError(err), &se) {
			return se
		}
		return bad("kafka", "%v", err)
	}
	return nil
}
