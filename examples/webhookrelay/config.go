package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/outboxd/outbox/outbox"
)

// Config is the relay's configuration file (YAML).
//
//	listen: 127.0.0.1:8080          # where providers post to /hooks/{source}
//	db: relay.db                    # the outbox's bbolt file
//	dedup_window: 72h               # how long a delivered provider ID is remembered
//	policy: ["404=park"]            # changes to the status policy table (httpsink.ParsePolicy)
//	admin:                          # optional: the outbox's admin API (dead letters, replay, stats)
//	  listen: 127.0.0.1:8081
//	  token_env: RELAY_ADMIN_TOKEN  # bearer token; required unless listen is a loopback address
//	targets:                        # internal services the relay delivers to
//	  billing:
//	    url: https://billing.internal/webhooks
//	    topics: ["stripe.invoice.*"]  # what it subscribes to (see below)
//	    filter: {X-Relay-Event-Type: invoice.paid}  # optional: only events with these headers
//	    secret_env: BILLING_SIGNING_SECRET  # optional whsec_ secret: the relay signs (Standard Webhooks)
//	    timeout: 10s
//	    allow_private: true         # internal targets usually live on private networks
//	sources:                        # providers, by the {source} in /hooks/{source}
//	  stripe:
//	    scheme: stripe              # stripe, github or standard-webhooks
//	    secret_env: STRIPE_WEBHOOK_SECRET
//	    tolerance: 5m               # signed timestamps (stripe, standard-webhooks)
//
// A verified webhook is stored as one event on the topic
// "<source>.<provider's event type>" ("stripe.invoice.paid",
// "github.push"; "<source>.untyped" without a type), and every target whose
// topics match it gets its own delivery: a topic ("github.push"), a prefix
// and ".*" ("stripe.*", "stripe.invoice.*"), or "*" for everything. A
// webhook no target subscribes to is kept (unrouted) for the dedup window
// and goes to a target that subscribes within that time.
//
// Each secret can be given inline (secrets: [...]) or by the name of an
// environment variable (secret_env), which keeps it out of the file. Several
// secrets are accepted at once while one is rotated.
type Config struct {
	Listen      string             `yaml:"listen"`
	DB          string             `yaml:"db"`
	DedupWindow time.Duration      `yaml:"dedup_window"`
	MaxBody     int                `yaml:"max_body_bytes"`
	Policy      []string           `yaml:"policy"`
	Admin       *Admin             `yaml:"admin"`
	Targets     map[string]*Target `yaml:"targets"`
	Sources     map[string]*Source `yaml:"sources"`
}

// Target is an internal service the relay delivers to.
type Target struct {
	URL          string            `yaml:"url"`
	Topics       []string          `yaml:"topics"`
	Filter       map[string]string `yaml:"filter"`
	Secrets      []string          `yaml:"secrets"`
	SecretEnv    string            `yaml:"secret_env"`
	Timeout      time.Duration     `yaml:"timeout"`
	AllowPrivate bool              `yaml:"allow_private"`
}

// Admin is where the outbox's admin API is served: list and replay dead
// letters, drop events, re-enable endpoints, stats (package outbox/httpapi).
type Admin struct {
	Listen   string `yaml:"listen"`
	TokenEnv string `yaml:"token_env"`

	token string
}

// Source is a provider whose webhooks arrive at /hooks/{source}.
type Source struct {
	Scheme    string        `yaml:"scheme"`
	Secrets   []string      `yaml:"secrets"`
	SecretEnv string        `yaml:"secret_env"`
	Tolerance time.Duration `yaml:"tolerance"`

	verifier verifier
}

// Defaults of Config.
const (
	defaultListen      = "127.0.0.1:8080"
	defaultDB          = "relay.db"
	defaultDedupWindow = 72 * time.Hour // Stripe retries for up to three days
	defaultMaxBody     = 1 << 20
)

// names are the allowed source and target names: they become part of URLs
// and event IDs.
var names = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// loadConfig reads and validates a configuration file.
func loadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.prepare(os.Getenv); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// prepare fills the defaults, resolves secrets from the environment, builds
// the verifiers and checks that everything refers to something that exists.
func (c *Config) prepare(getenv func(string) string) error {
	if err := c.fillDefaults(); err != nil {
		return err
	}
	if err := c.Admin.prepare(getenv); err != nil {
		return err
	}
	if len(c.Targets) == 0 {
		return errors.New("targets: at least one target is needed")
	}
	if len(c.Sources) == 0 {
		return errors.New("sources: at least one source is needed")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Targets)) {
		if err := prepareTarget(name, c.Targets[name], getenv); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Sources)) {
		if err := prepareSource(name, c.Sources[name], getenv); err != nil {
			return err
		}
	}
	return nil
}

// fillDefaults puts the defaults in the settings left out, and refuses
// negative ones.
func (c *Config) fillDefaults() error {
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	if c.DB == "" {
		c.DB = defaultDB
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = defaultDedupWindow
	}
	if c.DedupWindow < 0 {
		return errors.New("dedup_window: must not be negative")
	}
	if c.MaxBody == 0 {
		c.MaxBody = defaultMaxBody
	}
	if c.MaxBody < 0 {
		return errors.New("max_body_bytes: must not be negative")
	}
	return nil
}

// prepareTarget checks the target called name and resolves its secrets.
func prepareTarget(name string, t *Target, getenv func(string) string) error {
	if !names.MatchString(name) {
		return fmt.Errorf("targets.%s: a name is 1-32 of a-z, 0-9, _ and -", name)
	}
	if t == nil {
		return fmt.Errorf("targets.%s: url is required", name)
	}
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("targets.%s.url: want an absolute http(s) URL", name)
	}
	s, err := secrets(t.Secrets, t.SecretEnv, getenv)
	if err != nil {
		return fmt.Errorf("targets.%s: %w", name, err)
	}
	t.Secrets = s
	if t.Timeout < 0 {
		return fmt.Errorf("targets.%s.timeout: must not be negative", name)
	}
	if len(t.Topics) == 0 {
		return fmt.Errorf("targets.%s.topics: at least one topic or pattern, such as \"stripe.*\"", name)
	}
	for i, p := range t.Topics {
		if err := outbox.ValidateTopicPattern(p); err != nil {
			return fmt.Errorf("targets.%s.topics[%d]: %q %v", name, i, p, err)
		}
	}
	for k, v := range t.Filter {
		if !outbox.ValidHeaderName(k) || !outbox.ValidHeaderValue(v) {
			return fmt.Errorf("targets.%s.filter: %q is not a valid header name and value", name, k)
		}
	}
	return nil
}

// prepareSource checks the source called name, resolves its secrets and
// builds its verifier.
func prepareSource(name string, src *Source, getenv func(string) string) error {
	if !names.MatchString(name) {
		return fmt.Errorf("sources.%s: a name is 1-32 of a-z, 0-9, _ and -", name)
	}
	if src == nil {
		return fmt.Errorf("sources.%s: scheme and secret are required", name)
	}
	s, err := secrets(src.Secrets, src.SecretEnv, getenv)
	if err != nil {
		return fmt.Errorf("sources.%s: %w", name, err)
	}
	if len(s) == 0 {
		return fmt.Errorf("sources.%s: a secret is required (secrets or secret_env)", name)
	}
	if src.Tolerance < 0 {
		return fmt.Errorf("sources.%s.tolerance: must not be negative", name)
	}
	v, err := newVerifier(src.Scheme, s, src.Tolerance)
	if err != nil {
		return fmt.Errorf("sources.%s: %w", name, err)
	}
	src.verifier = v
	return nil
}

func (a *Admin) prepare(getenv func(string) string) error {
	if a == nil {
		return nil
	}
	if a.Listen == "" {
		return errors.New("admin.listen: required when admin is set")
	}
	if a.TokenEnv != "" {
		if a.token = getenv(a.TokenEnv); a.token == "" {
			return fmt.Errorf("admin.token_env: environment variable %s is empty or not set", a.TokenEnv)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen: %w", err)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return errors.New("admin.token_env: a token is required when the admin API listens beyond loopback")
	}
	return nil
}

// secrets gathers the inline secrets and the one named by env.
func secrets(inline []string, env string, getenv func(string) string) ([]string, error) {
	out := slices.Clone(inline)
	if env != "" {
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("secret_env: environment variable %s is empty or not set", env)
		}
		out = append(out, v)
	}
	for i, s := range out {
		if s == "" {
			return nil, fmt.Errorf("secrets[%d]: empty", i)
		}
	}
	return out, nil
}
