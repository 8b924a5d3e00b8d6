package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/outboxd/outbox/kafka"
)

// SettingError is an invalid setting. Its message names the setting by its
// YAML path, flag and environment variable.
type SettingError struct {
	// Setting is the YAML path, e.g. "delivery.interval" or "endpoints[0].url".
	Setting string
	// Reason says what is wrong.
	Reason string
	// Err is the library's error the setting was refused with (a
	// *outbox.ConfigError, *httpsink.ConfigError or *kafka.ConfigError), if
	// any.
	Err error
}

// Error names the setting with its flag and environment variable, if any.
func (e *SettingError) Error() string {
	return "invalid setting " + SettingName(e.Setting) + ": " + e.Reason
}

// SettingName returns the setting at the YAML path name with its flag and
// environment variable, if any: "limits.max_batch (--max-batch,
// OUTBOXD_MAX_BATCH)", for messages that tell an operator what to change.
func SettingName(name string) string {
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
	return name
}

// Unwrap returns the library's error, if any.
func (e *SettingError) Unwrap() error { return e.Err }

func bad(setting, format string, args ...any) error {
	return &SettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks c. The settings of outboxd alone (db, listen,
// shutdown_grace, log, limits, and whether Kafka is on) are checked here;
// the delivery settings and the endpoints are checked by the validation of
// package outbox and httpsink, on the configurations serve builds from c,
// and the kafka settings by kafka.Config.Validate, each error naming the
// setting (see Explain).
func Validate(c *Config) error {
	if c.DB == "" {
		return bad("db", "must not be empty")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "want HOST:PORT such as 127.0.0.1:8080, got %q", c.Listen)
	}
	if err := validateAuth(c); err != nil {
		return err
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
	if err := validateLibraries(c); err != nil {
		return err
	}
	if err := validateKafka(&c.Kafka, c.kafkaEndpoint()); err != nil {
		return err
	}
	if c.Delivery.Retain != 0 && len(c.Kafka.Brokers) > 0 {
		return bad("delivery.retain", "is not supported with Kafka: the kept delivered events are not carried by the changelog, so they would not move with a partition or survive a restore; run without delivery.retain, or without Kafka")
	}
	if c.EndpointSecretKeyFile != "" && c.Kafka.Topic == "" {
		return bad("endpoint_secret_key_file", "is only used in Kafka group mode (kafka.topic), where managed endpoints are kept in the group's endpoints topic")
	}
	if c.Kafka.Topic != "" && c.Kafka.AdvertiseURL == "" {
		if _, err := AdvertiseURL(c.Listen, nil); err != nil {
			return bad("kafka.advertise_url", "%v", err)
		}
	}
	return nil
}

// validateAuth checks the token and the trusted proxies.
func validateAuth(c *Config) error {
	switch {
	case c.Token != strings.TrimSpace(c.Token):
		return bad("token", "starts or ends with white space, which a bearer token cannot carry")
	case c.Token != "" && len(c.Token) < MinTokenBytes && !c.AllowShortToken:
		return bad("token", "is %d bytes, shorter than %d: `outboxd token` makes a good one (allow_short_token accepts a short one)", len(c.Token), MinTokenBytes)
	}
	if _, err := ParseProxies(c.TrustedProxies); err != nil {
		return bad("trusted_proxies", "%v", err)
	}
	return nil
}

// ParseProxies parses trusted_proxies: CIDRs, or single addresses.
func ParseProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
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
	case l.MaxDeliveriesPerRequest == 0:
		return bad("limits.max_deliveries_per_request", "must be positive, or negative for no bound, got 0")
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

// validateKafka checks the Kafka settings when any is set; the field names of
// package kafka's errors are translated to the settings' YAML paths.
// validateKafka checks the kafka section. endpoint is the name of an
// endpoint of kind kafka, "" when there is none: it needs the brokers, and
// is a use of them without an ingest or changelog topic.
func validateKafka(k *kafka.Config, endpoint string) error {
	if len(k.Brokers) == 0 && (k.Topic != "" || k.ChangelogTopic != "") {
		return bad("kafka.brokers", "required when kafka.topic or kafka.changelog_topic is set")
	}
	if len(k.Brokers) == 0 && endpoint != "" {
		return bad("kafka.brokers", "required by endpoint %s, of kind kafka: the brokers it produces to", endpoint)
	}
	if len(k.Brokers) == 0 {
		return nil
	}
	if k.Topic == "" && k.ChangelogTopic == "" && endpoint == "" {
		return bad("kafka.topic", "kafka.brokers is set but neither kafka.topic nor kafka.changelog_topic is")
	}
	if err := k.Validate(); err != nil {
		var se *SettingError
		if errors.As(Explain(err), &se) {
			return se
		}
		return bad("kafka", "%v", err)
	}
	return nil
}
