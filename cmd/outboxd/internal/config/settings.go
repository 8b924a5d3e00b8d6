package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// setting is one configurable value: its YAML path, flag and environment
// variable, and how a string sets it.
type setting struct {
	path   string // YAML path, e.g. "delivery.interval"
	flag   string // flag name without dashes; "" when there is none
	env    string // environment variable; "" when there is none
	usage  string
	isBool bool
	// set applies one value. For list settings it adds to the list.
	set func(c *Config, v string) error
	// list settings take several values: a repeated flag, or an
	// environment variable holding several separated by split.
	list  bool
	split func(string) []string
}

func str(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

func dur(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("invalid duration %q (want e.g. 500ms, 30s, 5m, 72h)", v)
		}
		*f(c) = d
		return nil
	}
}

func integer(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("invalid whole number %q", v)
		}
		*f(c) = n
		return nil
	}
}

func boolean(f func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("invalid boolean %q (want true or false)", v)
		}
		*f(c) = b
		return nil
	}
}

func size(f func(*Config) *ByteSize) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := ParseByteSize(v)
		if err != nil {
			return err
		}
		*f(c) = b
		return nil
	}
}

func commaList(f func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*f(c) = out
		return nil
	}
}

// settings lists every setting that has a flag or an environment variable,
// group by group. Settings only the YAML file can hold (endpoint headers,
// Kafka TLS...) are documented in outboxd.example.yaml.
func settings() []setting {
	var all []setting
	for _, group := range [][]setting{
		serverSettings(), limitSettings(), deliverySettings(), retentionSettings(),
		outcomeSettings(), endpointSettings(), kafkaSettings(),
	} {
		all = append(all, group...)
	}
	return all
}

// serverSettings are the process's own: its database, its listener, its
// console, its shutdown and its log.
func serverSettings() []setting {
	return []setting{
		{path: "db", flag: "db", env: "OUTBOXD_DB", usage: "database `file`",
			set: str(func(c *Config) *string { return &c.DB })},
		{path: "listen", flag: "listen", env: "OUTBOXD_LISTEN", usage: "HTTP API `address` (port 0 picks a free one)",
			set: str(func(c *Config) *string { return &c.Listen })},
		{path: "token", flag: "token", env: "OUTBOXD_TOKEN", usage: "bearer `token` required on /v1 requests (prefer OUTBOXD_TOKEN: flags show in ps)",
			set: str(func(c *Config) *string { return &c.Token })},
		{path: "allow_short_token", flag: "allow-short-token", env: "OUTBOXD_ALLOW_SHORT_TOKEN", usage: "accept a token shorter than 16 bytes", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.AllowShortToken })},
		{path: "metrics_open", flag: "metrics-open", env: "OUTBOXD_METRICS_OPEN", usage: "serve /metrics without the token (keep the listener private)", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.MetricsOpen })},
		{path: "trusted_proxies", flag: "trusted-proxies", env: "OUTBOXD_TRUSTED_PROXIES", usage: "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed",
			set: commaList(func(c *Config) *[]string { return &c.TrustedProxies })},
		{path: "ui", flag: "ui", env: "OUTBOXD_UI", usage: "serve the web console at /ui/ (a login when a token is set)", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.UI })},
		{path: "shutdown_grace", flag: "shutdown-grace", env: "OUTBOXD_SHUTDOWN_GRACE", usage: "how long a graceful shutdown may take",
			set: dur(func(c *Config) *time.Duration { return &c.ShutdownGrace })},
		{path: "log.level", flag: "log-level", env: "OUTBOXD_LOG_LEVEL", usage: "log `level`: debug, info, warn or error",
			set: str(func(c *Config) *string { return &c.Log.Level })},
		{path: "log.format", flag: "log-format", env: "OUTBOXD_LOG_FORMAT", usage: "log `format`: text or json",
			set: str(func(c *Config) *string { return &c.Log.Format })},
	}
}

// limitSettings bound what a client may send and hold: sizes, connections
// and timeouts.
func limitSettings() []setting {
	return []setting{
		{path: "limits.max_body_bytes", flag: "max-body-bytes", env: "OUTBOXD_MAX_BODY_BYTES", usage: "largest request `size` (e.g. 5MiB)",
			set: size(func(c *Config) *ByteSize { return &c.Limits.MaxBodyBytes })},
		{path: "limits.max_payload_bytes", flag: "max-payload-bytes", env: "OUTBOXD_MAX_PAYLOAD_BYTES", usage: "largest event payload `size` (e.g. 1MiB)",
			set: size(func(c *Config) *ByteSize { return &c.Limits.MaxPayloadBytes })},
		{path: "limits.max_batch", flag: "max-batch", env: "OUTBOXD_MAX_BATCH", usage: "most events in one request",
			set: integer(func(c *Config) *int { return &c.Limits.MaxBatch })},
		{path: "limits.max_deliveries_per_request", flag: "max-deliveries-per-request", env: "OUTBOXD_MAX_DELIVERIES_PER_REQUEST",
			usage: "most deliveries one request or Kafka record creates (events × subscribed endpoints); negative: no bound",
			set:   integer(func(c *Config) *int { return &c.Limits.MaxDeliveriesPerRequest })},
		{path: "limits.max_id_bytes", flag: "max-id-bytes", env: "OUTBOXD_MAX_ID_BYTES", usage: "longest event ID in bytes",
			set: integer(func(c *Config) *int { return &c.Limits.MaxIDBytes })},
		{path: "limits.max_body_memory", flag: "max-body-memory", env: "OUTBOXD_MAX_BODY_MEMORY", usage: "request bodies in memory at once, over all requests; past it 503 (`size`, e.g. 64MiB)",
			set: size(func(c *Config) *ByteSize { return &c.Limits.MaxBodyMemory })},
		{path: "limits.max_connections", flag: "max-connections", env: "OUTBOXD_MAX_CONNECTIONS", usage: "open connections served; beyond it 503, beyond twice it accepting waits",
			set: integer(func(c *Config) *int { return &c.Limits.MaxConnections })},
		{path: "limits.max_header_bytes", flag: "max-header-bytes", env: "OUTBOXD_MAX_HEADER_BYTES", usage: "largest request header block `size` (e.g. 64KiB)",
			set: size(func(c *Config) *ByteSize { return &c.Limits.MaxHeaderBytes })},
		{path: "limits.read_header_timeout", flag: "read-header-timeout", env: "OUTBOXD_READ_HEADER_TIMEOUT", usage: "time a client has to send a request's headers",
			set: dur(func(c *Config) *time.Duration { return &c.Limits.ReadHeaderTimeout })},
		{path: "limits.read_body_timeout", flag: "read-body-timeout", env: "OUTBOXD_READ_BODY_TIMEOUT", usage: "time a client has to send a request's body (fixed when reading starts)",
			set: dur(func(c *Config) *time.Duration { return &c.Limits.ReadBodyTimeout })},
		{path: "limits.idle_timeout", flag: "idle-timeout", env: "OUTBOXD_IDLE_TIMEOUT", usage: "how long an idle keep-alive connection stays open",
			set: dur(func(c *Config) *time.Duration { return &c.Limits.IdleTimeout })},
	}
}

// deliverySettings pace the deliveries: punctuation, concurrency, attempts,
// backoff, commits and circuit breakers.
func deliverySettings() []setting {
	return []setting{
		{path: "delivery.interval", flag: "interval", env: "OUTBOXD_INTERVAL", usage: "delivery punctuation period",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.Interval })},
		{path: "delivery.batch_size", flag: "batch-size", env: "OUTBOXD_BATCH_SIZE", usage: "most events taken in one punctuation",
			set: integer(func(c *Config) *int { return &c.Delivery.BatchSize })},
		{path: "delivery.concurrency", flag: "concurrency", env: "OUTBOXD_CONCURRENCY", usage: "most deliveries in flight",
			set: integer(func(c *Config) *int { return &c.Delivery.Concurrency })},
		{path: "delivery.max_per_endpoint", flag: "max-per-endpoint", env: "OUTBOXD_MAX_PER_ENDPOINT", usage: "most deliveries in flight to one endpoint (0: concurrency)",
			set: integer(func(c *Config) *int { return &c.Delivery.MaxPerEndpoint })},
		{path: "delivery.initial_per_endpoint", flag: "initial-per-endpoint", env: "OUTBOXD_INITIAL_PER_ENDPOINT", usage: "deliveries in flight an endpoint starts with; adapts up to max-per-endpoint (0: 4)",
			set: integer(func(c *Config) *int { return &c.Delivery.InitialPerEndpoint })},
		{path: "delivery.adaptive_concurrency", flag: "adaptive-concurrency", env: "OUTBOXD_ADAPTIVE_CONCURRENCY", usage: "adapt each endpoint's in-flight limit to its receiver (default true; false keeps every endpoint at max-per-endpoint)", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.Delivery.AdaptiveConcurrency })},
		{path: "delivery.max_attempts", flag: "max-attempts", env: "OUTBOXD_MAX_ATTEMPTS", usage: "attempts before an event is dead (parks do not count)",
			set: integer(func(c *Config) *int { return &c.Delivery.MaxAttempts })},
		{path: "delivery.max_age", flag: "max-age", env: "OUTBOXD_MAX_AGE", usage: "age at which a failing or parked event is dead",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.MaxAge })},
		{path: "delivery.max_schedule", flag: "max-schedule", env: "OUTBOXD_MAX_SCHEDULE", usage: "how far ahead an event's deliver_at (or delay) may be",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.MaxSchedule })},
		{path: "delivery.backoff_initial", flag: "backoff-initial", env: "OUTBOXD_BACKOFF_INITIAL", usage: "first retry's wait",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.BackoffInitial })},
		{path: "delivery.backoff_max", flag: "backoff-max", env: "OUTBOXD_BACKOFF_MAX", usage: "longest wait between attempts",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.BackoffMax })},
		{path: "delivery.park_interval", flag: "park-interval", env: "OUTBOXD_PARK_INTERVAL", usage: "wait after a \"not yet\" answer (404 by default)",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.ParkInterval })},
		{path: "delivery.commit_interval", flag: "commit-interval", env: "OUTBOXD_COMMIT_INTERVAL", usage: "longest wait of a delivery outcome to share a commit (0: the default; negative: none)",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.CommitInterval })},
		{path: "delivery.max_uncommitted", flag: "max-uncommitted", env: "OUTBOXD_MAX_UNCOMMITTED", usage: "most delivered events awaiting the commit of their outcome",
			set: integer(func(c *Config) *int { return &c.Delivery.MaxUncommitted })},
		{path: "delivery.ordered", flag: "ordered", env: "OUTBOXD_ORDERED", usage: "deliver events of one key in order", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.Delivery.Ordered })},
		{path: "delivery.timeout", flag: "timeout", env: "OUTBOXD_TIMEOUT", usage: "bound of one delivery",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.Timeout })},
		{path: "delivery.max_retry_after", flag: "max-retry-after", env: "OUTBOXD_MAX_RETRY_AFTER", usage: "cap of a receiver's Retry-After and of an endpoint throttle",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.MaxRetryAfter })},
		{path: "delivery.breaker_threshold", flag: "breaker-threshold", env: "OUTBOXD_BREAKER_THRESHOLD", usage: "consecutive failures that open an endpoint's circuit breaker (negative: never)",
			set: integer(func(c *Config) *int { return &c.Delivery.BreakerThreshold })},
		{path: "delivery.breaker_cool_down", flag: "breaker-cool-down", env: "OUTBOXD_BREAKER_COOL_DOWN", usage: "how long an open circuit breaker waits before its probe, doubling at each opening",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.BreakerCoolDown })},
		{path: "delivery.breaker_max_cool_down", flag: "breaker-max-cool-down", env: "OUTBOXD_BREAKER_MAX_COOL_DOWN", usage: "cap of the circuit breaker's cool-down",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.BreakerMaxCoolDown })},
	}
}

// retentionSettings say how long tombstones, the changelog and delivered
// events are kept, and how often they are trimmed.
func retentionSettings() []setting {
	return []setting{
		{path: "delivery.tombstone_retention", flag: "tombstone-retention", env: "OUTBOXD_TOMBSTONE_RETENTION", usage: "dedup window for delivered and dropped IDs",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.TombstoneRetention })},
		{path: "delivery.changelog_retention", flag: "changelog-retention", env: "OUTBOXD_CHANGELOG_RETENTION", usage: "how long changelog entries (event history) are kept (0: the default; negative: no age limit)",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.ChangelogRetention })},
		{path: "delivery.changelog_max_entries", flag: "changelog-max-entries", env: "OUTBOXD_CHANGELOG_MAX_ENTRIES", usage: "most changelog entries kept (0: the default; negative: no count limit)",
			set: integer(func(c *Config) *int { return &c.Delivery.ChangelogMaxEntries })},
		{path: "delivery.retain", flag: "retain", env: "OUTBOXD_RETAIN", usage: "keep delivered events searchable for this `duration` (e.g. 7d, 36h; 0: not kept; not in Kafka mode)",
			set: retention(func(c *Config) *Retention { return &c.Delivery.Retain })},
		{path: "delivery.retain_max_bytes", flag: "retain-max-bytes", env: "OUTBOXD_RETAIN_MAX_BYTES", usage: "largest `size` of the kept delivered events, oldest removed first (e.g. 10GiB; 0: no limit)",
			set: size(func(c *Config) *ByteSize { return &c.Delivery.RetainMaxBytes })},
		{path: "delivery.maintenance_interval", flag: "maintenance-interval", env: "OUTBOXD_MAINTENANCE_INTERVAL", usage: "period of the trimming of tombstones, changelog and kept delivered events",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.MaintenanceInterval })},
	}
}

// outcomeSettings say what an answer means, what an attempt leaves on record
// and what becomes of an event no endpoint subscribes to.
func outcomeSettings() []setting {
	return []setting{
		{path: "delivery.policy", flag: "policy", env: "OUTBOXD_POLICY", usage: "status policy `rule` such as 404=retry, 4xx=dead, error=throttle (repeatable; env: space or comma separated)",
			list: true, split: splitSpaceOrComma,
			set: func(c *Config, v string) error { c.Delivery.Policy = append(c.Delivery.Policy, v); return nil }},
		{path: "delivery.attempt_log", flag: "attempt-log", env: "OUTBOXD_ATTEMPT_LOG", usage: "record every attempt (default true; --attempt-log=false turns it off)", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.Delivery.AttemptLog })},
		{path: "delivery.attempt_excerpt", flag: "attempt-excerpt", env: "OUTBOXD_ATTEMPT_EXCERPT", usage: "response body bytes kept per attempt (`size`, e.g. 1KiB; 0 keeps none; at most 64KiB)",
			set: size(func(c *Config) *ByteSize { return &c.Delivery.AttemptExcerpt })},
		{path: "delivery.drop_unrouted", flag: "drop-unrouted", env: "OUTBOXD_DROP_UNROUTED", usage: "drop events on a topic no endpoint subscribes to (default: keep them as unrouted for unrouted_retention)", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.Delivery.DropUnrouted })},
		{path: "delivery.unrouted_retention", flag: "unrouted-retention", env: "OUTBOXD_UNROUTED_RETENTION", usage: "how long an event on a topic nobody subscribes to waits for a subscriber (0: max_age)",
			set: dur(func(c *Config) *time.Duration { return &c.Delivery.UnroutedRetention })},
	}
}

// endpointSettings name the endpoints and where events may be delivered.
func endpointSettings() []setting {
	return []setting{
		{path: "allow_raw_urls", flag: "allow-raw-urls", env: "OUTBOXD_ALLOW_RAW_URLS", usage: "let events name an absolute URL as destination", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.AllowRawURLs })},
		{path: "allow_private_networks", flag: "allow-private-networks", env: "OUTBOXD_ALLOW_PRIVATE_NETWORKS", usage: "let deliveries reach private, loopback and link-local addresses", isBool: true,
			set: boolean(func(c *Config) *bool { return &c.AllowPrivateNetworks })},
		{path: "endpoints", flag: "endpoint", env: "OUTBOXD_ENDPOINTS",
			usage: "named `endpoint` as NAME=URL or NAME=kafka://TOPIC, then [,secret=whsec_...][,timeout=D][,max-in-flight=N][,rate=PER_SECOND[,burst=N]][,allow-private][,topic=PATTERN...] (repeatable; env: space separated); replaces a file endpoint of that name",
			list:  true, split: strings.Fields, set: addEndpointSpec},
	}
}

// kafkaSettings connect the Kafka ingest, the changelog shipping and the
// group.
func kafkaSettings() []setting {
	return []setting{
		{path: "kafka.brokers", flag: "kafka-brokers", env: "OUTBOXD_KAFKA_BROKERS", usage: "Kafka broker `addresses`, comma separated",
			set: commaList(func(c *Config) *[]string { return &c.Kafka.Brokers })},
		{path: "kafka.topic", flag: "kafka-topic", env: "OUTBOXD_KAFKA_TOPIC", usage: "Kafka `topic` to ingest events from (empty: no ingest)",
			set: str(func(c *Config) *string { return &c.Kafka.Topic })},
		{path: "kafka.group", flag: "kafka-group", env: "OUTBOXD_KAFKA_GROUP", usage: "Kafka consumer `group` (default outboxd)",
			set: str(func(c *Config) *string { return &c.Kafka.Group })},
		{path: "kafka.destination", flag: "kafka-destination", env: "OUTBOXD_KAFKA_DESTINATION", usage: "destination of Kafka records without the destination header",
			set: str(func(c *Config) *string { return &c.Kafka.Destination })},
		{path: "kafka.default_topic", flag: "kafka-default-topic", env: "OUTBOXD_KAFKA_DEFAULT_TOPIC", usage: "event `topic` of Kafka records with neither the destination nor the topic header (not with --kafka-destination)",
			set: str(func(c *Config) *string { return &c.Kafka.DefaultTopic })},
		{path: "kafka.changelog_topic", flag: "changelog-topic", env: "OUTBOXD_CHANGELOG_TOPIC", usage: "compacted Kafka `topic` the changelog is shipped to (empty: no shipping)",
			set: str(func(c *Config) *string { return &c.Kafka.ChangelogTopic })},
		{path: "kafka.endpoints_topic", flag: "endpoints-topic", env: "OUTBOXD_ENDPOINTS_TOPIC", usage: "compacted Kafka `topic` of the endpoints managed through the API in group mode (default <changelog topic>-endpoints)",
			set: str(func(c *Config) *string { return &c.Kafka.EndpointsTopic })},
		{path: "endpoint_secret_key_file", flag: "endpoint-secret-key-file", env: "OUTBOXD_ENDPOINT_SECRET_KEY_FILE",
			usage: "`file` of the AES-256 key (32 bytes, raw or 64 hex digits) encrypting the secrets of managed endpoints in the group's endpoints topic (group mode; required once one exists)",
			set:   str(func(c *Config) *string { return &c.EndpointSecretKeyFile })},
		{path: "kafka.advertise_url", flag: "kafka-advertise-url", env: "OUTBOXD_KAFKA_ADVERTISE_URL",
			usage: "`URL` of this instance's API as the other members of the group reach it (default: http:// and the listen address, unless that is a wildcard)",
			set:   str(func(c *Config) *string { return &c.Kafka.AdvertiseURL })},
		{path: "kafka.standby_replicas", flag: "standby-replicas", env: "OUTBOXD_STANDBY_REPLICAS", usage: "warm standby copies of each partition's store kept on other instances of the group, so that a lost instance's partitions move without a rebuild (group mode; 0: none)",
			set: integer(func(c *Config) *int { return &c.Kafka.StandbyReplicas })},
		{path: "kafka.client_id", flag: "kafka-client-id", env: "OUTBOXD_KAFKA_CLIENT_ID", usage: "Kafka client `ID` (default outboxd)",
			set: str(func(c *Config) *string { return &c.Kafka.ClientID })},
		{path: "kafka.sasl.username", env: "OUTBOXD_KAFKA_SASL_USERNAME",
			set: str(func(c *Config) *string { return &c.Kafka.SASL.Username })},
		{path: "kafka.sasl.password", env: "OUTBOXD_KAFKA_SASL_PASSWORD",
			set: str(func(c *Config) *string { return &c.Kafka.SASL.Password })},
	}
}

func splitSpaceOrComma(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// addEndpointSpec parses NAME=URL[,secret=whsec_...][,timeout=D]
// [,max-in-flight=N][,rate=R[,burst=N]][,allow-private] and puts the endpoint in c, replacing
// one of the same name.
func addEndpointSpec(c *Config, spec string) error {
	ep, err := ParseEndpointSpec(spec)
	if err != nil {
		return err
	}
	for i := range c.Endpoints {
		if c.Endpoints[i].Name == ep.Name {
			c.Endpoints[i] = ep
			return nil
		}
	}
	c.Endpoints = append(c.Endpoints, ep)
	return nil
}

// ParseEndpointSpec parses an endpoint given on the command line:
// NAME=URL (NAME=kafka://TOPIC for an endpoint of kind kafka), then optional comma-separated options secret=whsec_...
// (repeatable), timeout=DURATION, max-in-flight=N, rate=PER_SECOND,
// burst=N, allow-private and topic=PATTERN (repeatable: the endpoint's
// topics). The URL must not contain a comma.
func ParseEndpointSpec(spec string) (Endpoint, error) {
	parts := strings.Split(spec, ",")
	name, u, ok := strings.Cut(parts[0], "=")
	name, u = strings.TrimSpace(name), strings.TrimSpace(u)
	if !ok || name == "" || u == "" {
		return Endpoint{}, fmt.Errorf("endpoint %q: want NAME=URL[,secret=whsec_...]", redactSpec(spec))
	}
	ep := Endpoint{Name: name, URL: u}
	for _, opt := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(opt), "=")
		switch k {
		case "secret":
			ep.Secrets = append(ep.Secrets, v)
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Endpoint{}, fmt.Errorf("endpoint %s: timeout: invalid duration %q", name, v)
			}
			ep.Timeout = d
		case "max-in-flight":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Endpoint{}, fmt.Errorf("endpoint %s: max-in-flight: invalid whole number %q", name, v)
			}
			ep.MaxInFlight = n
		case "rate":
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return Endpoint{}, fmt.Errorf("endpoint %s: rate: want a number of deliveries per second, got %q", name, v)
			}
			if reason := rateReason(r); reason != "" {
				return Endpoint{}, fmt.Errorf("endpoint %s: rate: %s", name, reason)
			}
			ep.RateLimit = r
		case "burst":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return Endpoint{}, fmt.Errorf("endpoint %s: burst: want a whole number of at least 1, got %q", name, v)
			}
			ep.Burst = n
		case "topic":
			ep.Topics = append(ep.Topics, v)
		case "allow-private":
			b := true
			if v != "" {
				var err error
				if b, err = strconv.ParseBool(v); err != nil {
					return Endpoint{}, fmt.Errorf("endpoint %s: allow-private: invalid boolean %q", name, v)
				}
			}
			ep.AllowPrivate = b
		default:
			return Endpoint{}, fmt.Errorf("endpoint %s: unknown option %q (known: secret, timeout, max-in-flight, rate, burst, allow-private, topic)", name, k)
		}
	}
	return ep, nil
}

// redactSpec keeps secrets out of error messages.
func redactSpec(spec string) string {
	if i := strings.Index(spec, "secret="); i >= 0 {
		return spec[:i] + "secret=..."
	}
	return spec
}
