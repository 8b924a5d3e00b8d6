package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

// package kafka names its Go fields; outboxd's messages name the YAML
// settings, with their flags and environment variables.
func TestKafkaErrorsNameOurSettings(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := kafka.Config{Brokers: []string{"localhost:9092"}, Topic: "events"}
	for _, tc := range []struct {
		name    string
		edit    func(*kafka.Config)
		setting string
		reason  string // a part of the reason, "" for any
	}{
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }, "kafka.brokers", ""},
		{"no port", func(c *kafka.Config) { c.Brokers = []string{"localhost"} }, "kafka.brokers", "host:port"},
		{"bad port", func(c *kafka.Config) { c.Brokers = []string{"localhost:99999"} }, "kafka.brokers", ""},
		{"bad topic", func(c *kafka.Config) { c.Topic = "a topic" }, "kafka.topic", ""},
		{"bad changelog topic", func(c *kafka.Config) { c.ChangelogTopic = "x/y" }, "kafka.changelog_topic", ""},
		{"changelog is the topic", func(c *kafka.Config) { c.ChangelogTopic = "events" }, "kafka.changelog_topic", `must differ from kafka.topic "events"`},
		{"a topic called Topic", func(c *kafka.Config) { c.Topic, c.ChangelogTopic = "Topic", "Topic" }, "kafka.changelog_topic", `must differ from kafka.topic "Topic"`},
		{"start offset", func(c *kafka.Config) { c.StartOffset = "middle" }, "kafka.start_offset", ""},
		{"dest header", func(c *kafka.Config) { c.DestinationHeader = "a b" }, "kafka.destination_header", ""},
		{"same headers", func(c *kafka.Config) { c.IDHeader = "h"; c.DestinationHeader = "h" }, "kafka.id_header", "must differ from kafka.destination_header"},
		{"heartbeat", func(c *kafka.Config) { c.HeartbeatInterval = time.Minute }, "kafka.heartbeat_interval", "shorter than kafka.session_timeout (30s)"},
		{"negative", func(c *kafka.Config) { c.CommitInterval = -time.Second }, "kafka.commit_interval", "negative"},
		{"backoff", func(c *kafka.Config) { c.RetryBackoff = time.Minute }, "kafka.retry_backoff_max", "shorter than kafka.retry_backoff (1m0s)"},
		{"batch", func(c *kafka.Config) { c.BatchSize = -1 }, "kafka.batch_size", ""},
		{"replication", func(c *kafka.Config) { c.ChangelogReplication = -3 }, "kafka.changelog_replication", ""},
		{"standbys", func(c *kafka.Config) { c.StandbyReplicas = -1 }, "kafka.standby_replicas", "out of range 0..8"},
		{"mechanism", func(c *kafka.Config) { c.SASL.Mechanism = "kerberos" }, "kafka.sasl.mechanism", ""},
		{"user without mechanism", func(c *kafka.Config) { c.SASL.Username = "u" }, "kafka.sasl.mechanism", "kafka.sasl.username or kafka.sasl.password"},
		{"no user", func(c *kafka.Config) { c.SASL.Mechanism = "scram-sha-512"; c.SASL.Password = "p" }, "kafka.sasl.username", `with kafka.sasl.mechanism "scram-sha-512"`},
		{"no password", func(c *kafka.Config) { c.SASL.Mechanism = "plain"; c.SASL.Username = "u" }, "kafka.sasl.password", ""},
		{"missing CA", func(c *kafka.Config) {
			c.TLS = kafka.TLSConfig{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}
		}, "kafka.tls.ca_file", ""},
		{"CA not PEM", func(c *kafka.Config) { c.TLS = kafka.TLSConfig{Enabled: true, CAFile: notPEM} }, "kafka.tls.ca_file", ""},
		{"cert without key", func(c *kafka.Config) { c.TLS = kafka.TLSConfig{Enabled: true, CertFile: notPEM} }, "kafka.tls.cert_file", "kafka.tls.cert_file and kafka.tls.key_file go together"},
	} {
		c := ok
		tc.edit(&c)
		err := Explain(c.Validate())
		var se *SettingError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a *SettingError", tc.name, err)
			continue
		}
		if se.Setting != tc.setting || !strings.HasPrefix(err.Error(), "invalid setting "+tc.setting) {
			t.Errorf("%s: %q names %s, want %s", tc.name, err, se.Setting, tc.setting)
		}
		if !strings.Contains(se.Reason, tc.reason) {
			t.Errorf("%s: reason %q, want it to say %q", tc.name, se.Reason, tc.reason)
		}
	}
	other := errors.New("not a configuration error")
	if got := Explain(other); got != other {
		t.Errorf("another error became %v", got)
	}
}

func TestConfigErrorsOfOtherPackagesNameOurSettings(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&httpsink.ConfigError{Field: "Endpoints[2].MaxInFlight", Reason: "must not be negative"}, "invalid setting endpoints[2].max_in_flight (--endpoint, OUTBOXD_ENDPOINTS): must not be negative"},
		{&httpsink.ConfigError{Field: "Endpoints[0].URL", Reason: "no host"}, "invalid setting endpoints[0].url (--endpoint, OUTBOXD_ENDPOINTS): no host"},
		{&outbox.ConfigError{Field: "MaxPerEndpoint", Reason: "must not exceed Concurrency"}, "invalid setting delivery.max_per_endpoint (--max-per-endpoint, OUTBOXD_MAX_PER_ENDPOINT)"},
		{&outbox.ConfigError{Field: "MaxThrottle", Reason: "x"}, "delivery.max_retry_after (--max-retry-after"},
		{&outbox.ConfigError{Field: "MaxPayloadBytes", Reason: "x"}, "limits.max_payload_bytes (--max-payload-bytes"},
	}
	for _, c := range cases {
		got := Explain(c.err)
		var se *SettingError
		if !errors.As(got, &se) || !strings.Contains(got.Error(), c.want) {
			t.Errorf("%v -> %v, want %q", c.err, got, c.want)
		}
	}
}

// The libraries outboxd configures refuse a field alike, which is what lets
// Explain treat them as one: a *ConfigError naming the field's Go path,
// matching the package's ErrInvalidConfig, reading
// "<package>: config: <field>: <reason>".
func TestLibrariesRefuseAConfigAlike(t *testing.T) {
	_, herr := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{
		{Name: "a", URL: "https://a.example.com/"}, {Name: "b", URL: "ftp://b.example.com/"}}})
	for _, c := range []struct {
		err      error
		sentinel error
		prefix   string
	}{
		{herr, httpsink.ErrInvalidConfig, "httpsink: config: Endpoints[1].URL: "},
		{outbox.Config{}.Validate(), outbox.ErrInvalidConfig, "outbox: config: Sink: "},
		{kafka.Config{}.Validate(), kafka.ErrInvalidConfig, "kafka: config: Brokers: "},
	} {
		if !errors.Is(c.err, c.sentinel) || c.err == nil || !strings.HasPrefix(c.err.Error(), c.prefix) {
			t.Errorf("%v: want an error matching %v that reads %q...", c.err, c.sentinel, c.prefix)
		}
		var se *SettingError
		if !errors.As(Explain(c.err), &se) || !errors.Is(se, c.sentinel) {
			t.Errorf("Explain(%v) = %v, want a *SettingError matching %v", c.err, Explain(c.err), c.sentinel)
		}
	}
}
