package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/outboxd/outbox/kafka/internal/changelog"
	"github.com/outboxd/outbox/kafka/internal/ship"
	"github.com/outboxd/outbox/outbox"
)

// Defaults of Config. Every field of Config documents its own default; these
// are the same values, for callers that want to show them (flag help, say).
const (
	DefaultGroup             = "outboxd"
	DefaultDestinationHeader = "outbox-destination"
	DefaultIDHeader          = "outbox-id"
	DefaultTopicHeader       = "outbox-topic"
	DefaultDeliverAtHeader   = "outbox-deliver-at"
	DefaultMethodHeader      = "outbox-method"
	DefaultClientID          = "outboxd"
	DefaultStartOffset       = "earliest"
	DefaultBatchSize         = 1000
	DefaultCommitInterval    = time.Second
	DefaultSessionTimeout    = 30 * time.Second
	DefaultHeartbeatInterval = 3 * time.Second
	DefaultRebalanceTimeout  = 30 * time.Second
	DefaultShipBatch         = 1000
	DefaultShipInterval      = 100 * time.Millisecond
	DefaultRetryBackoff      = 100 * time.Millisecond
	DefaultRetryBackoffMax   = 5 * time.Second
	DefaultDialTimeout       = 10 * time.Second
	DefaultChangelogMaxBytes = 8 << 20
	DefaultHandoverTimeout   = 10 * time.Second
	DefaultProduceTimeout    = 10 * time.Second
	// MaxStandbyReplicas bounds Config.StandbyReplicas.
	MaxStandbyReplicas = 8
)

// TLSConfig configures TLS towards the brokers.
type TLSConfig struct {
	// Enabled turns TLS on. The other fields are ignored when it is false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of CA certificates to trust instead of the system
	// roots. Default: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that authenticate clients by certificate. Both or neither.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the private key of CertFile.
	KeyFile string `yaml:"key_file"`
	// InsecureSkipVerify disables the verification of the brokers'
	// certificates. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASLConfig configures SASL authentication towards the brokers.
type SASLConfig struct {
	// Mechanism is "" (no SASL, the default), "plain", "scram-sha-256" or
	// "scram-sha-512". PLAIN sends the password in the clear: use it with TLS.
	Mechanism string `yaml:"mechanism"`
	// Username is required with a mechanism. SCRAM normalises it and the
	// password with SASLprep (RFC 4013), as kafka-go's client does; Kafka
	// brokers do not, so a non-ASCII name or password that SASLprep changes
	// (a no-break space, a compatibility character) does not authenticate
	// with SCRAM. ASCII credentials are unaffected.
	Username string `yaml:"username"`
	// Password is required with a mechanism.
	Password string `yaml:"password"`
}

// Config configures Kafka ingest, changelog shipping and restore. The zero
// value of every field means its documented default. (The yaml tags are the
// names of outboxd's "kafka" section, which maps one to one onto Config.)
type Config struct {
	// Brokers are the bootstrap brokers, host:port. Required.
	Brokers []string `yaml:"brokers"`
	// Topic is the topic to ingest events from, in consumer group Group.
	// Empty: no ingest.
	Topic string `yaml:"topic"`
	// Group is the consumer group of the ingest. Default "outboxd".
	Group string `yaml:"group"`
	// Destination is the destination of records without the
	// DestinationHeader. Empty: such records become dead letters.
	Destination string `yaml:"destination"`
	// DestinationHeader names the record header that holds the event's
	// destination. Default "outbox-destination".
	DestinationHeader string `yaml:"destination_header"`
	// TopicHeader names the record header that holds the event's topic
	// (outbox.Event.Topic: the event goes to the endpoints subscribed to
	// it). A record with both this header and DestinationHeader, or with
	// a malformed topic, becomes a dead letter. Default "outbox-topic".
	TopicHeader string `yaml:"topic_header"`
	// DefaultTopic is the event topic (outbox.Event.Topic, not a Kafka
	// topic) of records that carry neither DestinationHeader nor
	// TopicHeader. At most one of Destination and DefaultTopic may be set.
	// Empty: such records go to Destination, or become dead letters.
	DefaultTopic string `yaml:"default_topic"`
	// IDHeader names the record header that holds the event's ID. Records
	// without it get "kafka:<topic>:<partition>:<offset>", which is stable
	// across re-consumption. Default "outbox-id".
	IDHeader string `yaml:"id_header"`
	// DeliverAtHeader names the record header that holds the event's
	// not-before time (outbox.Event.DeliverAt), in RFC 3339. A record whose
	// header is not such a time, or is given twice, becomes a dead letter.
	// Default "outbox-deliver-at".
	DeliverAtHeader string `yaml:"deliver_at_header"`
	// MethodHeader names the record header that holds the event's HTTP
	// method (outbox.Event.Method). Records without it are delivered with
	// POST; a record whose header is not a method outbox.ValidMethod
	// accepts, or is given twice, becomes a dead letter. Default
	// "outbox-method".
	MethodHeader string `yaml:"method_header"`
	// StartOffset is where the group starts on a partition without a
	// committed offset: "earliest" (the default: records published before
	// the first start are not skipped) or "latest".
	StartOffset string `yaml:"start_offset"`
	// ChangelogTopic is the compacted topic changelogs are shipped to
	// (created compacted when missing) and restored from. For a Group it is
	// one topic for the whole group, with the ingest topic's partition count,
	// default "<Group>-<Topic>-changelog". For Start it ships that one
	// outbox (empty: no shipping); give each such outbox its own topic.
	ChangelogTopic string `yaml:"changelog_topic"`
	// EndpointsTopic is, in group mode, the compacted one-partition topic
	// of the group's table (OpenTable): the endpoints managed through the
	// API, shared by every member. It is created when missing. Default
	// "<changelog topic>-endpoints" (EndpointsTopic).
	EndpointsTopic string `yaml:"endpoints_topic"`
	// ClientID identifies this client to the brokers. Default "outboxd".
	ClientID string `yaml:"client_id"`
	// TLS configures TLS. Default: plaintext.
	TLS TLSConfig `yaml:"tls"`
	// SASL configures authentication. Default: none.
	SASL SASLConfig `yaml:"sasl"`
	// AdvertiseURL is the base URL of this instance's HTTP API as the other
	// members of the group reach it ("http://10.0.0.7:8080"), announced in
	// the member's group metadata so that any member can forward a request
	// to the owner of an event (Group.Members). Empty: none is announced
	// (outboxd derives one from its listen address).
	AdvertiseURL string `yaml:"advertise_url"`

	// BatchSize is the largest number of records of one partition enqueued
	// in one durable write (also bounded by 8 MiB of keys, values and
	// headers). Larger batches mean fewer fsyncs per record. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// CommitInterval is how often the durable offsets are committed; they
	// are also committed on every rebalance and on Close. Default 1s.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// SessionTimeout is the consumer group session timeout: how long a dead
	// instance keeps its partitions. Default 30s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval is the group heartbeat interval. Default 3s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RebalanceTimeout bounds how long the group waits for members to
	// rejoin during a rebalance. Default 30s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// ShipBatch is the largest number of changelog entries produced in one
	// acknowledged write. Default 1000.
	ShipBatch int `yaml:"ship_batch"`
	// ShipInterval is how often the shipper looks for new changelog entries
	// once it has caught up. Default 100ms.
	ShipInterval time.Duration `yaml:"ship_interval"`
	// ChangelogPartitions is the number of partitions of the changelog
	// topic when Start creates it. Default 1. A Group
	// creates its changelog with the ingest topic's partition count.
	ChangelogPartitions int `yaml:"changelog_partitions"`
	// ChangelogReplication is the replication factor of the changelog topic
	// when it is created. Default: the broker's default.
	ChangelogReplication int `yaml:"changelog_replication"`
	// RetryBackoff is the first wait after a failed enqueue, produce or
	// group join; it doubles up to RetryBackoffMax. Default 100ms.
	RetryBackoff time.Duration `yaml:"retry_backoff"`
	// RetryBackoffMax caps RetryBackoff. Default 5s.
	RetryBackoffMax time.Duration `yaml:"retry_backoff_max"`
	// DialTimeout bounds connecting to a broker. Default 10s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// HandoverTimeout bounds, in group mode, the hand-over of a revoked
	// partition: the deliveries in flight get two thirds of it before they
	// are cancelled (they stay pending, for the next owner), shipping the
	// store's changelog the rest. It is capped at two thirds of
	// SessionTimeout (no heartbeats are sent during a hand-over, and the
	// final offset commit needs the membership) and of RebalanceTimeout.
	// Default 10s.
	HandoverTimeout time.Duration `yaml:"handover_timeout"`
	// ProduceTimeout bounds one Producer.Produce call (in outboxd, the
	// produce of one POST /v1/events in group mode): finding the topic's
	// partitions, every produce request and the retries of retriable
	// errors. A call not acknowledged by then fails with a *ProduceError
	// (the caller's context may end it sooner). Default 10s.
	ProduceTimeout time.Duration `yaml:"produce_timeout"`
	// StandbyReplicas is, in group mode, the number of warm copies of each
	// partition's store the group keeps on members other than its owner,
	// each kept current by tailing the partition's changelog: when the
	// owner is lost, the group gives the partition to a standby, which
	// catches up from where it was instead of rebuilding the store from
	// the whole changelog. The group leader's value is used; only members
	// with a value above 0 keep standbys. Default 0 (none). At most
	// MaxStandbyReplicas.
	StandbyReplicas int `yaml:"standby_replicas"`

	// BeforeEnqueue, when set, is called before each enqueue of ingested
	// records with the events about to be stored; an error fails that
	// enqueue as a storage error would (it is retried). It is a
	// fault-injection seam for tests; leave it nil.
	BeforeEnqueue func(ctx context.Context, events []outbox.Event) error `yaml:"-"`
}

// Enabled reports whether the configuration asks for Kafka at all: brokers
// and an ingest or changelog topic.
func (c Config) Enabled() bool {
	return len(c.Brokers) > 0 && (c.Topic != "" || c.ChangelogTopic != "")
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	str := func(s *string, def string) {
		if *s == "" {
			*s = def
		}
	}
	dur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	num := func(n *int, def int) {
		if *n == 0 {
			*n = def
		}
	}
	str(&c.Group, DefaultGroup)
	str(&c.DestinationHeader, DefaultDestinationHeader)
	str(&c.IDHeader, DefaultIDHeader)
	str(&c.TopicHeader, DefaultTopicHeader)
	str(&c.DeliverAtHeader, DefaultDeliverAtHeader)
	str(&c.MethodHeader, DefaultMethodHeader)
	str(&c.StartOffset, DefaultStartOffset)
	str(&c.ClientID, DefaultClientID)
	num(&c.BatchSize, DefaultBatchSize)
	dur(&c.CommitInterval, DefaultCommitInterval)
	dur(&c.SessionTimeout, DefaultSessionTimeout)
	dur(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	dur(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	num(&c.ShipBatch, DefaultShipBatch)
	dur(&c.ShipInterval, DefaultShipInterval)
	num(&c.ChangelogPartitions, 1)
	num(&c.ChangelogReplication, -1)
	dur(&c.RetryBackoff, DefaultRetryBackoff)
	dur(&c.RetryBackoffMax, DefaultRetryBackoffMax)
	dur(&c.DialTimeout, DefaultDialTimeout)
	dur(&c.HandoverTimeout, DefaultHandoverTimeout)
	dur(&c.ProduceTimeout, DefaultProduceTimeout)
	return c
}

// Validate checks the configuration (with defaults applied) and returns a
// *ConfigError naming the first bad field, such as "Brokers" or
// "SASL.Mechanism". It also
// loads the TLS files, so that a missing or bad file is reported here rather
// than at the first connection.
func (c Config) Validate() error {
	c = c.WithDefaults()
	for _, check := range []func() error{
		c.validateBrokers, c.validateTopics, c.validateHeaders,
		c.validateDurations, c.validateLimits, c.validateAuth,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// badField returns the *ConfigError of a bad field.
func badField(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// validateBrokers checks that every broker is a host:port.
func (c Config) validateBrokers() error {
	if len(c.Brokers) == 0 {
		return badField("Brokers", "at least one broker (host:port) is required")
	}
	for _, b := range c.Brokers {
		host, port, err := net.SplitHostPort(strings.TrimSpace(b))
		if err != nil || host == "" {
			return badField("Brokers", "%q is not host:port", b)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return badField("Brokers", "%q has no valid port", b)
		}
	}
	return nil
}

// validateTopics checks the group's topics, the address it advertises to
// the other members and where it starts without committed offsets.
func (c Config) validateTopics() error {
	if c.Topic != "" {
		if err := checkTopic(c.Topic); err != nil {
			return badField("Topic", "%v", err)
		}
	}
	if c.ChangelogTopic != "" {
		if err := checkTopic(c.ChangelogTopic); err != nil {
			return badField("ChangelogTopic", "%v", err)
		}
		if c.ChangelogTopic == c.Topic {
			return badField("ChangelogTopic", "must differ from Topic %q", c.Topic)
		}
	}
	if c.EndpointsTopic != "" {
		if err := checkTopic(c.EndpointsTopic); err != nil {
			return badField("EndpointsTopic", "%v", err)
		}
		if c.EndpointsTopic == c.Topic || c.EndpointsTopic == c.ChangelogTopic {
			return badField("EndpointsTopic", "must differ from Topic and ChangelogTopic")
		}
	}
	if c.AdvertiseURL != "" {
		if err := checkAdvertiseURL(c.AdvertiseURL); err != nil {
			return badField("AdvertiseURL", "%v", err)
		}
	}
	if c.StartOffset != "earliest" && c.StartOffset != "latest" {
		return badField("StartOffset", "%q is neither \"earliest\" nor \"latest\"", c.StartOffset)
	}
	return nil
}

// validateHeaders checks the headers a record maps through: valid names,
// each one distinct from those it could be mistaken for, and where a
// record without a destination goes.
func (c Config) validateHeaders() error {
	if !validHeaderName(c.DestinationHeader) {
		return badField("DestinationHeader", "%q is not a valid header name", c.DestinationHeader)
	}
	if !validHeaderName(c.IDHeader) {
		return badField("IDHeader", "%q is not a valid header name", c.IDHeader)
	}
	if c.IDHeader == c.DestinationHeader {
		return badField("IDHeader", "must differ from DestinationHeader")
	}
	if !validHeaderName(c.TopicHeader) {
		return badField("TopicHeader", "%q is not a valid header name", c.TopicHeader)
	}
	if c.TopicHeader == c.IDHeader || c.TopicHeader == c.DestinationHeader {
		return badField("TopicHeader", "must differ from IDHeader and DestinationHeader")
	}
	if c.DefaultTopic != "" {
		if err := outbox.ValidateTopic(c.DefaultTopic); err != nil {
			return badField("DefaultTopic", "%q %v", c.DefaultTopic, err)
		}
		if c.Destination != "" {
			return badField("DefaultTopic", "set together with Destination: records without a header go to one or the other")
		}
	}
	if !validHeaderName(c.DeliverAtHeader) {
		return badField("DeliverAtHeader", "%q is not a valid header name", c.DeliverAtHeader)
	}
	if c.DeliverAtHeader == c.IDHeader || c.DeliverAtHeader == c.DestinationHeader || c.DeliverAtHeader == c.TopicHeader {
		return badField("DeliverAtHeader", "must differ from IDHeader, DestinationHeader and TopicHeader")
	}
	if !validHeaderName(c.MethodHeader) {
		return badField("MethodHeader", "%q is not a valid header name", c.MethodHeader)
	}
	if c.MethodHeader == c.IDHeader || c.MethodHeader == c.DestinationHeader || c.MethodHeader == c.DeliverAtHeader {
		return badField("MethodHeader", "must differ from IDHeader, DestinationHeader and DeliverAtHeader")
	}
	return nil
}

// validateDurations checks that no duration is negative and that those
// bounded by another are.
func (c Config) validateDurations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"CommitInterval", c.CommitInterval}, {"SessionTimeout", c.SessionTimeout},
		{"HeartbeatInterval", c.HeartbeatInterval}, {"RebalanceTimeout", c.RebalanceTimeout},
		{"ShipInterval", c.ShipInterval}, {"RetryBackoff", c.RetryBackoff},
		{"RetryBackoffMax", c.RetryBackoffMax}, {"DialTimeout", c.DialTimeout},
		{"HandoverTimeout", c.HandoverTimeout}, {"ProduceTimeout", c.ProduceTimeout},
	} {
		if d.v < 0 {
			return badField(d.name, "must not be negative (got %s)", d.v)
		}
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return badField("HeartbeatInterval", "%s must be shorter than SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	if c.RetryBackoffMax < c.RetryBackoff {
		return badField("RetryBackoffMax", "%s is shorter than RetryBackoff (%s)", c.RetryBackoffMax, c.RetryBackoff)
	}
	return nil
}

// validateLimits checks the sizes and counts, and the client ID.
func (c Config) validateLimits() error {
	if c.BatchSize < 0 || c.BatchSize > 100000 {
		return badField("BatchSize", "%d is out of range 1..100000", c.BatchSize)
	}
	if c.ShipBatch < 0 || c.ShipBatch > 100000 {
		return badField("ShipBatch", "%d is out of range 1..100000", c.ShipBatch)
	}
	if c.StandbyReplicas < 0 || c.StandbyReplicas > MaxStandbyReplicas {
		return badField("StandbyReplicas", "%d is out of range 0..%d", c.StandbyReplicas, MaxStandbyReplicas)
	}
	if c.ChangelogPartitions < 1 {
		return badField("ChangelogPartitions", "%d must be at least 1", c.ChangelogPartitions)
	}
	if c.ChangelogReplication < -1 || c.ChangelogReplication == 0 {
		return badField("ChangelogReplication", "%d must be positive (or unset for the broker default)", c.ChangelogReplication)
	}
	if strings.TrimSpace(c.ClientID) == "" {
		return badField("ClientID", "must not be blank")
	}
	return nil
}

// validateAuth checks the SASL settings and loads the TLS files.
func (c Config) validateAuth() error {
	switch strings.ToLower(c.SASL.Mechanism) {
	case "":
		if c.SASL.Username != "" || c.SASL.Password != "" {
			return badField("SASL.Mechanism", "required when SASL.Username or SASL.Password is set (plain, scram-sha-256 or scram-sha-512)")
		}
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.SASL.Username == "" {
			return badField("SASL.Username", "required with SASL.Mechanism %q", c.SASL.Mechanism)
		}
		if c.SASL.Password == "" {
			return badField("SASL.Password", "required with SASL.Mechanism %q", c.SASL.Mechanism)
		}
	default:
		return badField("SASL.Mechanism", "%q is not one of plain, scram-sha-256, scram-sha-512", c.SASL.Mechanism)
	}
	if _, err := c.tlsConfig(); err != nil {
		return err
	}
	if _, err := c.mechanism(); err != nil {
		return err
	}
	return nil
}

// checkTopic applies Kafka's rules for topic names.
func checkTopic(t string) error {
	if t == "." || t == ".." {
		return fmt.Errorf("%q is not a valid topic name", t)
	}
	if len(t) > 249 {
		return fmt.Errorf("longer than 249 characters")
	}
	for i := 0; i < len(t); i++ {
		b := t[i]
		ok := b == '.' || b == '_' || b == '-' || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9')
		if !ok {
			return fmt.Errorf("%q has a character other than ASCII letters, digits, '.', '_' and '-'", t)
		}
	}
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// tlsConfig builds the TLS configuration, or nil when TLS is off.
func (c Config) tlsConfig() (*tls.Config, error) {
	t := c.TLS
	if !t.Enabled {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // documented test setting
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &ConfigError{Field: "TLS.CAFile", Reason: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Field: "TLS.CAFile", Reason: fmt.Sprintf("no PEM certificate in %s", t.CAFile)}
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, &ConfigError{Field: "TLS.CertFile", Reason: "TLS.CertFile and TLS.KeyFile go together"}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &ConfigError{Field: "TLS.CertFile", Reason: err.Error()}
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// mechanism builds the SASL mechanism, or nil when SASL is off.
func (c Config) mechanism() (sasl.Mechanism, error) {
	s := c.SASL
	switch strings.ToLower(s.Mechanism) {
	case "":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: s.Username, Password: s.Password}, nil
	case "scram-sha-256":
		return newSCRAM(scram.SHA256, s.Username, s.Password)
	case "scram-sha-512":
		return newSCRAM(scram.SHA512, s.Username, s.Password)
	}
	return nil, &ConfigError{Field: "SASL.Mechanism", Reason: fmt.Sprintf("%q is not one of plain, scram-sha-256, scram-sha-512", s.Mechanism)}
}

// conns holds what every kafka-go client of one Runner or Restore uses to
// reach the brokers.
type conns struct {
	dialer    *kafkago.Dialer
	transport *kafkago.Transport
}

func (c Config) conns() (*conns, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	mech, err := c.mechanism()
	if err != nil {
		return nil, err
	}
	return &conns{
		dialer: &kafkago.Dialer{
			ClientID:      c.ClientID,
			Timeout:       c.DialTimeout,
			DualStack:     true,
			TLS:           tc,
			SASLMechanism: mech,
		},
		transport: &kafkago.Transport{
			ClientID:    c.ClientID,
			DialTimeout: c.DialTimeout,
			TLS:         tc,
			SASL:        mech,
			IdleTimeout: 30 * time.Second,
			MetadataTTL: 10 * time.Second,
		},
	}, nil
}

func (c *conns) close() {
	if c != nil && c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

func (c Config) brokers() []string {
	out := make([]string, len(c.Brokers))
	for i, b := range c.Brokers {
		out[i] = strings.TrimSpace(b)
	}
	return out
}

// reading is how to read the changelog topic over cn.
func (c Config) reading(cn *conns) changelog.Reading {
	return changelog.Reading{Topic: c.ChangelogTopic, Brokers: c.brokers(), Dialer: cn.dialer,
		FetchBytes: restoreFetchBytes, RetryBackoff: c.RetryBackoff, RetryBackoffMax: c.RetryBackoffMax}
}

// shipping is the configuration of changelog shipping.
func (c Config) shipping() ship.Config {
	return ship.Config{Topic: c.ChangelogTopic, Batch: c.ShipBatch, Interval: c.ShipInterval,
		RetryBackoff: c.RetryBackoff, RetryBackoffMax: c.RetryBackoffMax,
		Partitions: c.ChangelogPartitions, Replication: c.ChangelogReplication, MaxBytes: DefaultChangelogMaxBytes}
}
