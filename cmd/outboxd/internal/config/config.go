package config

import (
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// Config is everything outboxd serve can be told. Its YAML form is the
// configuration file (see outboxd.example.yaml); the field comments give
// each setting's default.
type Config struct {
	// DB is the path of the database file. Default ./outboxd.db.
	DB string `yaml:"db"`
	// Listen is the HTTP API's address. Default 127.0.0.1:8080; port 0
	// picks a free port (the bound address is logged).
	Listen string `yaml:"listen"`
	// Token, when set, is the bearer token every /v1 request must carry.
	// Default: none.
	Token string `yaml:"token"`
	// AllowShortToken lets Token be shorter than MinTokenBytes. Default
	// false: serve refuses such a token (outboxd token makes a good one).
	AllowShortToken bool `yaml:"allow_short_token"`
	// MetricsOpen serves GET /metrics without the token, for a scraper
	// that cannot send one (keep the listener private then). Default false:
	// with a token set, /metrics asks for it as /v1 does.
	MetricsOpen bool `yaml:"metrics_open"`
	// TrustedProxies are the networks (CIDRs, or single addresses) of
	// reverse proxies whose X-Forwarded-For names the client whose wrong
	// tokens are delayed, and whose "X-Forwarded-Proto: https" makes the
	// console's cookies Secure. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// UI serves the web console at /ui/ on the listener (behind the same
	// token, as a login). Default true.
	UI bool `yaml:"ui"`
	// ShutdownGrace bounds a graceful shutdown after SIGTERM or SIGINT.
	// Default 15s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Log configures logging to stderr.
	Log Log `yaml:"log"`
	// Limits bound what the HTTP API accepts.
	Limits Limits `yaml:"limits"`
	// Delivery configures the outbox's delivery loop and the HTTP sink.
	Delivery Delivery `yaml:"delivery"`
	// AllowRawURLs lets events name an absolute URL as destination.
	// Default false: only configured endpoint names.
	AllowRawURLs bool `yaml:"allow_raw_urls"`
	// AllowPrivateNetworks lets deliveries go to private, loopback and
	// link-local addresses. Default false.
	AllowPrivateNetworks bool `yaml:"allow_private_networks"`
	// Endpoints are the named delivery targets.
	Endpoints []Endpoint `yaml:"endpoints"`
	// Kafka configures ingest from a topic and changelog shipping (package
	// kafka documents each setting and its default). Default: off.
	Kafka kafka.Config `yaml:"kafka"`
	// EndpointSecretKeyFile is, in Kafka group mode, the file of the key
	// that encrypts the secrets of the endpoints managed through the API
	// in the group's endpoints topic: 32 bytes, raw or as 64 hexadecimal
	// digits. Required once such an endpoint exists; the same on every
	// instance. Default: none.
	EndpointSecretKeyFile string `yaml:"endpoint_secret_key_file"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
}

// Limits bound what the HTTP API accepts.
type Limits struct {
	// MaxBodyBytes bounds a request body. Default 5 MiB.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// MaxPayloadBytes bounds one event's payload. Default 1 MiB.
	MaxPayloadBytes ByteSize `yaml:"max_payload_bytes"`
	// MaxBatch bounds the events of one request. Default 1000.
	MaxBatch int `yaml:"max_batch"`
	// MaxDeliveriesPerRequest bounds the deliveries one request (or one
	// Kafka record) creates: one per event with a destination, one per
	// subscribed endpoint of a topic event. A request over it is answered
	// 413 and stores nothing; a Kafka record over it becomes a dead letter
	// saying why. Default 10,000; negative: no bound.
	MaxDeliveriesPerRequest int `yaml:"max_deliveries_per_request"`
	// MaxIDBytes bounds an event ID. Default 200.
	MaxIDBytes int `yaml:"max_id_bytes"`
	// MaxBodyMemory bounds the request bodies held in memory at once, over
	// all requests (a body takes memory as its bytes arrive); past it a
	// request is answered 503 with Retry-After. At least max_body_bytes.
	// Default 64 MiB.
	MaxBodyMemory ByteSize `yaml:"max_body_memory"`
	// MaxConnections bounds the open client connections served normally:
	// a request on a connection opened beyond it is answered 503 with
	// Retry-After and the connection closed; beyond twice it, new
	// connections wait to be accepted. Default 1024.
	MaxConnections int `yaml:"max_connections"`
	// MaxHeaderBytes bounds a request's header block. Default 64 KiB.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// ReadHeaderTimeout is the time a client has to send a request's
	// headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// ReadBodyTimeout is the time a client has to send a request's body,
	// fixed when the server starts reading it (a trickling client cannot
	// stretch it); a late body is answered 408. Default 30s.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// Delivery configures delivery. Zero in any of its settings means the
// default (that of package outbox or httpsink, which check these settings);
// negative durations and counts are refused except where a comment gives
// them a meaning.
type Delivery struct {
	// Interval is the delivery punctuation's period. Default 1s.
	Interval time.Duration `yaml:"interval"`
	// BatchSize caps the events taken in one punctuation. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// Concurrency caps the deliveries in flight. Default 64.
	Concurrency int `yaml:"concurrency"`
	// MaxPerEndpoint caps the deliveries in flight to one endpoint.
	// Default: concurrency.
	MaxPerEndpoint int `yaml:"max_per_endpoint"`
	// InitialPerEndpoint is the in-flight limit each endpoint starts with;
	// it adapts between 1 and MaxPerEndpoint. Default 4.
	InitialPerEndpoint int `yaml:"initial_per_endpoint"`
	// AdaptiveConcurrency adapts each endpoint's in-flight limit to what
	// its receiver shows it can take; false keeps every endpoint at
	// MaxPerEndpoint. Default true.
	AdaptiveConcurrency bool `yaml:"adaptive_concurrency"`
	// MaxAttempts moves an event to the dead letters after this many
	// attempts (parks do not count). Default 25.
	MaxAttempts int `yaml:"max_attempts"`
	// MaxAge moves a failing or parked event older than this to the dead
	// letters. Default 72h.
	MaxAge time.Duration `yaml:"max_age"`
	// MaxSchedule is the scheduling horizon: an event's deliver_at (or
	// delay) may be at most this far ahead. Default 720h (30 days).
	MaxSchedule time.Duration `yaml:"max_schedule"`
	// BackoffInitial is the first retry's wait. Default 1s.
	BackoffInitial time.Duration `yaml:"backoff_initial"`
	// BackoffMax caps the wait between attempts. Default 1h.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// ParkInterval is the wait after a "not yet" answer (404). Default 30s.
	ParkInterval time.Duration `yaml:"park_interval"`
	// Ordered turns on per-key FIFO delivery. Default false.
	Ordered bool `yaml:"ordered"`
	// CommitInterval is how long delivery outcomes may wait to share a
	// commit while other deliveries are under way. Zero means the default,
	// 25ms; negative commits without waiting (as outbox.Config.CommitInterval).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// MaxUncommitted caps the delivered events whose outcome awaits its
	// commit: a crash delivers at most concurrency + max_uncommitted events
	// again. Default 1024.
	MaxUncommitted int `yaml:"max_uncommitted"`
	// Timeout bounds one delivery: from 1s to 15m. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetryAfter caps a receiver's Retry-After and an endpoint's
	// throttle. Default 1h.
	MaxRetryAfter time.Duration `yaml:"max_retry_after"`
	// BreakerThreshold is the number of consecutive failures (no answer, a
	// timeout, 5xx) that opens an endpoint's circuit breaker. Default 5;
	// negative: never.
	BreakerThreshold int `yaml:"breaker_threshold"`
	// BreakerCoolDown is how long an endpoint's breaker stays open the
	// first time; it doubles at each consecutive opening. Default 5s.
	BreakerCoolDown time.Duration `yaml:"breaker_cool_down"`
	// BreakerMaxCoolDown caps the breaker's cool-down. Default 5m.
	BreakerMaxCoolDown time.Duration `yaml:"breaker_max_cool_down"`
	// TombstoneRetention is the dedup window for delivered IDs. Default 24h.
	TombstoneRetention time.Duration `yaml:"tombstone_retention"`
	// ChangelogRetention is how long changelog entries (each event's
	// history, and what is shipped to Kafka) are kept; entries not yet
	// shipped are kept regardless. Zero means the default, 24h; negative:
	// no age limit (as outbox.Config.ChangelogRetention).
	ChangelogRetention time.Duration `yaml:"changelog_retention"`
	// ChangelogMaxEntries caps the changelog entries kept, oldest trimmed
	// first. Zero means the default, 1,000,000; negative: no count limit
	// (as outbox.Config.ChangelogMaxEntries).
	ChangelogMaxEntries int `yaml:"changelog_max_entries"`
	// Retain keeps every delivered event (each delivery of a topic event)
	// in the archive for this long after its delivery, for search (GET
	// /v1/archive, inspect --archive). A duration or whole days ("7d").
	// Default 0: delivered events are not kept, only their tombstone. Not
	// in Kafka group mode, where the archive would not move with its
	// partition.
	Retain Retention `yaml:"retain"`
	// RetainMaxBytes caps the archive's size; the oldest deliveries go
	// first. Needs retain. Default 0: no size limit.
	RetainMaxBytes ByteSize `yaml:"retain_max_bytes"`
	// MaintenanceInterval is how often tombstones, the changelog and the
	// archive are trimmed and the stats refreshed. Default 1m.
	MaintenanceInterval time.Duration `yaml:"maintenance_interval"`
	// Policy overrides rows of the status policy table, e.g. "404=retry",
	// "4xx=dead", "error=throttle". Default: none (the design's table).
	Policy []string `yaml:"policy"`
	// AttemptLog records every attempt (GET /v1/events/{id}/attempts,
	// inspect --id). Default true.
	AttemptLog bool `yaml:"attempt_log"`
	// DropUnrouted drops an event published on a topic no endpoint
	// subscribes to (counted and logged). Default false: it is kept as
	// unrouted for unrouted_retention, delivered if a subscription for it
	// appears within that time, and dead-lettered after it.
	DropUnrouted bool `yaml:"drop_unrouted"`
	// UnroutedRetention is how long an unrouted event waits for a
	// subscriber. Default: max_age.
	UnroutedRetention time.Duration `yaml:"unrouted_retention"`
	// AttemptExcerpt is how much of each response body the attempt log
	// keeps; unlike the other delivery settings, 0 keeps none. At most
	// 64 KiB. Default 1 KiB.
	AttemptExcerpt ByteSize `yaml:"attempt_excerpt"`
}

// Endpoint is a named delivery target.
type Endpoint struct {
	// Name is what events give as destination: letters, digits, '.', '_'
	// and '-', not starting with '.'. Required.
	Name string `yaml:"name"`
	// Kind is how events reach the endpoint: "http" (POST to URL) or
	// "kafka" (a record produced to the topic URL names,
	// kafka://TOPIC, through the brokers of kafka.brokers). Default: kafka
	// for a kafka:// URL, else http.
	Kind string `yaml:"kind"`
	// URL is, for an endpoint of kind http, the absolute http(s) URL, at
	// most 2 KiB, whose host is not loopback or private (by address,
	// localhost, or a numeric form) unless AllowPrivate; for one of kind
	// kafka, kafka://TOPIC. Required.
	URL string `yaml:"url"`
	// Secrets are Standard Webhooks signing secrets (whsec_...). Default:
	// none (no signature).
	Secrets []string `yaml:"secrets"`
	// Timeout bounds one delivery here: from 1s to 15m. Default:
	// delivery.timeout.
	Timeout time.Duration `yaml:"timeout"`
	// Headers are sent on every request to this endpoint: at most 64, of
	// at most 8 KiB of names and values together.
	Headers map[string]string `yaml:"headers"`
	// MaxInFlight caps deliveries to this endpoint. Default 0: no cap
	// beyond delivery.max_per_endpoint.
	MaxInFlight int `yaml:"max_in_flight"`
	// AllowPrivate lets this endpoint be on a private or loopback address.
	// Default false.
	AllowPrivate bool `yaml:"allow_private"`
	// RateLimit caps the deliveries started to this endpoint, per second:
	// from 1/86400 (one a day) to 1,000,000 (outbox.MinRate and MaxRate).
	// Default 0: no limit.
	RateLimit float64 `yaml:"rate_limit"`
	// Burst is how many deliveries may start at once above RateLimit.
	// Default 1 when RateLimit is set.
	Burst int `yaml:"burst"`
	// Topics subscribe this endpoint to events published on these topics:
	// names ("order.paid") or patterns ("order.*", "*"). Default: none
	// (only events naming it as their destination reach it).
	Topics []string `yaml:"topics"`
	// Filter narrows the subscription to events carrying these headers
	// with these exact values. Only with Topics. Default: none.
	Filter map[string]string `yaml:"filter"`
}

// Defaults of Config.
const (
	// MinTokenBytes is the shortest token serve accepts without
	// allow_short_token.
	MinTokenBytes        = 16
	DefaultDB            = "./outboxd.db"
	DefaultListen        = "127.0.0.1:8080"
	DefaultShutdownGrace = 15 * time.Second
	// DefaultMaxConnections is the default of limits.max_connections.
	DefaultMaxConnections = 1024
	// DefaultMaxHeaderBytes is the default of limits.max_header_bytes.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultReadHeaderTimeout is the default of limits.read_header_timeout.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is the default of limits.idle_timeout.
	DefaultIdleTimeout = 2 * time.Minute
)

// Default returns the configuration used when nothing is set.
func Default() Config {
	return Config{
		DB:            DefaultDB,
		Listen:        DefaultListen,
		ShutdownGrace: DefaultShutdownGrace,
		UI:            true,
		Log:           Log{Level: "info", Format: "text"},
		Limits: Limits{
			MaxBodyBytes:            httpapi.DefaultMaxBodyBytes,
			MaxPayloadBytes:         httpapi.DefaultMaxPayloadBytes,
			MaxBatch:                httpapi.DefaultMaxBatch,
			MaxDeliveriesPerRequest: outbox.DefaultMaxDeliveriesPerCall,
			MaxIDBytes:              httpapi.DefaultMaxIDBytes,
			MaxBodyMemory:           httpapi.DefaultMaxBodyMemory,
			MaxConnections:          DefaultMaxConnections,
			MaxHeaderBytes:          DefaultMaxHeaderBytes,
			ReadHeaderTimeout:       DefaultReadHeaderTimeout,
			ReadBodyTimeout:         httpapi.DefaultReadBodyTimeout,
			IdleTimeout:             DefaultIdleTimeout,
		},
		Delivery: Delivery{
			Interval:            outbox.DefaultInterval,
			BatchSize:           outbox.DefaultBatchSize,
			Concurrency:         outbox.DefaultConcurrency,
			MaxAttempts:         outbox.DefaultMaxAttempts,
			MaxAge:              outbox.DefaultMaxAge,
			MaxSchedule:         outbox.DefaultMaxSchedule,
			BackoffInitial:      outbox.DefaultBackoffInitial,
			BackoffMax:          outbox.DefaultBackoffMax,
			ParkInterval:        outbox.DefaultParkInterval,
			CommitInterval:      outbox.DefaultCommitInterval,
			MaxUncommitted:      outbox.DefaultMaxUncommitted,
			Timeout:             httpsink.DefaultTimeout,
			MaxRetryAfter:       httpsink.DefaultMaxRetryAfter,
			BreakerThreshold:    outbox.DefaultBreakerThreshold,
			BreakerCoolDown:     outbox.DefaultBreakerCoolDown,
			BreakerMaxCoolDown:  outbox.DefaultBreakerMaxCoolDown,
			TombstoneRetention:  outbox.DefaultTombstoneRetention,
			ChangelogRetention:  outbox.DefaultChangelogRetention,
			ChangelogMaxEntries: outbox.DefaultChangelogMaxEntries,
			MaintenanceInterval: outbox.DefaultMaintenanceInterval,
			AttemptLog:          true,
			AdaptiveConcurrency: true,
			AttemptExcerpt:      outbox.DefaultAttemptExcerptBytes,
		},
	}
}
