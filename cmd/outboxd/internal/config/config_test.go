package config

import (
	"errors"
	"flag"
	"github.com/outboxd/outbox/outbox"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// envOf returns an Env backed by a map.
func envOf(m map[string]string) Env {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	return NewLoader("outboxd serve", io.Discard).Load(args, envOf(env))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "outboxd.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNothingSetGivesTheDocumentedDefaults(t *testing.T) {
	cfg, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DB != "./outboxd.db" || cfg.Listen != "127.0.0.1:8080" {
		t.Errorf("db %q listen %q, want ./outboxd.db and 127.0.0.1:8080", cfg.DB, cfg.Listen)
	}
	if cfg.Limits.MaxBodyBytes != 5<<20 || cfg.Limits.MaxPayloadBytes != 1<<20 || cfg.Limits.MaxBatch != 1000 {
		t.Errorf("limits %+v, want 5 MiB body, 1 MiB payload, 1000 per batch", cfg.Limits)
	}
	if cfg.Delivery.MaxAttempts != 25 || cfg.Delivery.MaxAge != 72*time.Hour {
		t.Errorf("delivery %+v, want 25 attempts and 72h", cfg.Delivery)
	}
	if cfg.Kafka.Enabled() {
		t.Error("Kafka enabled by default")
	}
}

func TestPrecedenceFlagOverEnvOverFileOverDefault(t *testing.T) {
	file := writeFile(t, "delivery:\n  interval: 2s\n  park_interval: 7s\nlisten: 127.0.0.1:9000\n")
	env := map[string]string{"OUTBOXD_INTERVAL": "3s", "OUTBOXD_LISTEN": "127.0.0.1:9001"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
	}{
		{"default", nil, nil, time.Second},
		{"file", []string{"--config", file}, nil, 2 * time.Second},
		{"env over file", []string{"--config", file}, env, 3 * time.Second},
		{"flag over env", []string{"--config", file, "--interval", "4s"}, env, 4 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Delivery.Interval != c.want {
				t.Errorf("interval %s, want %s", cfg.Delivery.Interval, c.want)
			}
		})
	}
	// Settings the flags do not touch keep the file's value.
	cfg, err := load(t, []string{"--config", file, "--interval", "4s"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Delivery.ParkInterval != 7*time.Second || cfg.Listen != "127.0.0.1:9001" {
		t.Errorf("park interval %s listen %s, want 7s from the file and 127.0.0.1:9001 from env", cfg.Delivery.ParkInterval, cfg.Listen)
	}
	// OUTBOXD_CONFIG names the file when --config does not.
	cfg, err = load(t, nil, map[string]string{"OUTBOXD_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Delivery.Interval != 2*time.Second {
		t.Errorf("OUTBOXD_CONFIG: interval %s, want 2s", cfg.Delivery.Interval)
	}
}

func TestExampleFileIsAcceptedAsIs(t *testing.T) {
	cfg, err := load(t, []string{"--config", "../../outboxd.example.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Endpoints) != 2 || cfg.Endpoints[0].Name != "orders" || len(cfg.Endpoints[0].Secrets) != 1 {
		t.Errorf("endpoints %+v, want orders (one secret) and billing", cfg.Endpoints)
	}
	// The example documents the defaults: apart from endpoints it must
	// change nothing.
	def := Default()
	if len(cfg.Delivery.Policy) != 0 || cfg.Kafka.Enabled() {
		t.Errorf("policy %v kafka %+v, want none", cfg.Delivery.Policy, cfg.Kafka)
	}
	cfg.Delivery.Policy = nil
	if !reflect.DeepEqual(cfg.Delivery, def.Delivery) || cfg.Limits != def.Limits || cfg.Log != def.Log ||
		cfg.DB != def.DB || cfg.Listen != def.Listen || cfg.ShutdownGrace != def.ShutdownGrace {
		t.Errorf("the example's values differ from the defaults:\n got %+v\nwant %+v", cfg, def)
	}
}

func TestEndpointsFromFlagsAndEnv(t *testing.T) {
	file := writeFile(t, "endpoints:\n  - name: orders\n    url: https://old.example.com/\n    max_in_flight: 3\n  - name: billing\n    url: https://billing.example.com/\n")
	cfg, err := load(t, []string{"--config", file,
		"--endpoint", "orders=https://new.example.com/hook,secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw,allow-private,timeout=2s,max-in-flight=4",
		"--endpoint", "audit=http://127.0.0.1:9/x,allow-private,rate=2.5,burst=3"},
		map[string]string{"OUTBOXD_ENDPOINTS": "fromenv=https://env.example.com/ other=https://other.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Endpoint{}
	for _, e := range cfg.Endpoints {
		got[e.Name] = e
	}
	if len(got) != 5 {
		t.Fatalf("endpoints %v, want orders, billing, audit, fromenv, other", cfg.Endpoints)
	}
	o := got["orders"]
	if o.URL != "https://new.example.com/hook" || !o.AllowPrivate || o.Timeout != 2*time.Second || o.MaxInFlight != 4 || len(o.Secrets) != 1 {
		t.Errorf("orders %+v: the flag must replace the file's endpoint", o)
	}
	if a := got["audit"]; a.RateLimit != 2.5 || a.Burst != 3 {
		t.Errorf("audit %+v: want rate 2.5 and burst 3", a)
	}
	oc, err := cfg.OutboxConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := oc.RateLimits.Limit("audit"); !ok || l != (outbox.RateLimit{PerSecond: 2.5, Burst: 3}) {
		t.Errorf("the outbox's limit of audit = %v, %v; want 2.5/s burst 3", l, ok)
	}
	if _, ok := oc.RateLimits.Limit("orders"); ok {
		t.Error("orders has a rate limit; want none")
	}
}

func TestBadSettingsAreRefusedNamingTheSetting(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "negative flag duration", args: []string{"--interval", "-1s"}, want: []string{"delivery.interval", "--interval", "OUTBOXD_INTERVAL", "must not be negative"}},
		{name: "unparsable flag", args: []string{"--max-attempts", "many"}, want: []string{"flag --max-attempts", "many"}},
		{name: "unparsable env", env: map[string]string{"OUTBOXD_BACKOFF_MAX": "soon"}, want: []string{"OUTBOXD_BACKOFF_MAX", "soon"}},
		{name: "unparsable max schedule", env: map[string]string{"OUTBOXD_MAX_SCHEDULE": "a month"}, want: []string{"OUTBOXD_MAX_SCHEDULE", "a month"}},
		{name: "negative max uncommitted", env: map[string]string{"OUTBOXD_MAX_UNCOMMITTED": "-1"}, want: []string{"delivery.max_uncommitted", "OUTBOXD_MAX_UNCOMMITTED", "must not be negative"}},
		{name: "backoff order", args: []string{"--backoff-initial", "1m", "--backoff-max", "1s"}, want: []string{"delivery.backoff_max", "backoff_initial"}},
		{name: "policy", args: []string{"--policy", "404=maybe"}, want: []string{"delivery.policy", "--policy"}},
		{name: "listen", args: []string{"--listen", "8080"}, want: []string{"listen", "HOST:PORT"}},
		{name: "log level", env: map[string]string{"OUTBOXD_LOG_LEVEL": "loud"}, want: []string{"log.level", "loud"}},
		{name: "payload over body", args: []string{"--max-body-bytes", "1KiB", "--max-payload-bytes", "2KiB"}, want: []string{"limits.max_payload_bytes"}},
		{name: "size", args: []string{"--max-body-bytes", "big"}, want: []string{"--max-body-bytes", "big"}},
		{name: "zero deliveries per request", args: []string{"--max-deliveries-per-request", "0"}, want: []string{"limits.max_deliveries_per_request",
			"--max-deliveries-per-request", "OUTBOXD_MAX_DELIVERIES_PER_REQUEST", "negative for no bound"}},
		{name: "endpoint spec", args: []string{"--endpoint", "orders"}, want: []string{"--endpoint", "NAME=URL"}},
		{name: "endpoint option", args: []string{"--endpoint", "a=https://a.example.com/,colour=red"}, want: []string{"unknown option", "colour"}},
		{name: "endpoint url", args: []string{"--endpoint", "a=ftp://a.example.com/"}, want: []string{"endpoints[0].url", "http"}},
		{name: "secret", args: []string{"--endpoint", "a=https://a.example.com/,secret=hunter2"}, want: []string{"endpoints[0].secrets[0]", "whsec_"}},
		{name: "zero rate", args: []string{"--endpoint", "a=https://a.example.com/,rate=0"}, want: []string{"endpoint a: rate: 0 is out of range", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "negative rate", args: []string{"--endpoint", "a=https://a.example.com/,rate=-5"}, want: []string{"endpoint a: rate: -5 is out of range", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "rate below one a day", args: []string{"--endpoint", "a=https://a.example.com/,rate=1e-300"}, want: []string{"endpoint a: rate: 1e-300 is out of range", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "rate above the ceiling", args: []string{"--endpoint", "a=https://a.example.com/,rate=1000001"}, want: []string{"endpoint a: rate: 1.000001e+06 is out of range", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "zero burst", args: []string{"--endpoint", "a=https://a.example.com/,rate=5,burst=0"}, want: []string{"endpoint a: burst", "at least 1"}},
		{name: "negative rate in the file", file: "endpoints:\n  - {name: a, url: 'https://a.example.com/', rate_limit: -1}\n", want: []string{"endpoints[0].rate_limit", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "tiny rate in the file", file: "endpoints:\n  - {name: a, url: 'https://a.example.com/', rate_limit: 1e-300}\n", want: []string{"endpoints[0].rate_limit", "1e-300 is out of range", "from 1/86400 (one per day) to 1000000 per second"}},
		{name: "burst without rate", file: "endpoints:\n  - {name: a, url: 'https://a.example.com/', burst: 5}\n", want: []string{"endpoints[0].burst", "rate_limit is not"}},
		{name: "breaker cool-down order", args: []string{"--breaker-cool-down", "1m", "--breaker-max-cool-down", "1s"}, want: []string{"delivery.breaker_max_cool_down", "--breaker-max-cool-down"}},
		{name: "negative breaker cool-down", env: map[string]string{"OUTBOXD_BREAKER_COOL_DOWN": "-1s"}, want: []string{"delivery.breaker_cool_down", "OUTBOXD_BREAKER_COOL_DOWN", "must not be negative"}},
		{name: "duplicate endpoint", file: "endpoints:\n  - {name: a, url: 'https://a.example.com/'}\n  - {name: a, url: 'https://b.example.com/'}\n", want: []string{"endpoints[1].name", `"a" is already the name of endpoints[0]`}},
		{name: "unknown file setting", file: "delivery:\n  intervall: 1s\n", want: []string{"config file", "unknown setting intervall", "line 2"}},
		{name: "wrong file type", file: "delivery:\n  max_attempts: lots\n", want: []string{"config file", "line 2"}},
		{name: "kafka topic without brokers", args: []string{"--kafka-topic", "events"}, want: []string{"kafka.brokers", "--kafka-brokers"}},
		{name: "kafka broker address", args: []string{"--kafka-brokers", "kafka-1", "--kafka-topic", "events"}, want: []string{"kafka.brokers (--kafka-brokers, OUTBOXD_KAFKA_BROKERS)", "host:port"}},
		{name: "kafka sasl from the file", file: "kafka:\n  brokers: [k:9092]\n  changelog_topic: cl\n  sasl:\n    mechanism: plain\n    username: u\n", want: []string{"kafka.sasl.password (OUTBOXD_KAFKA_SASL_PASSWORD)"}},
		{name: "stray argument", args: []string{"now"}, want: []string{"unexpected argument"}},
		{name: "short token", env: map[string]string{"OUTBOXD_TOKEN": "hunter2"}, want: []string{"token (--token, OUTBOXD_TOKEN)", "7 bytes, shorter than 16", "outboxd token", "allow_short_token"}},
		{name: "blank token", args: []string{"--token", " ", "--allow-short-token"}, want: []string{"token (--token, OUTBOXD_TOKEN)", "white space"}},
		{name: "trusted proxy", args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.example"}, want: []string{"trusted_proxies (--trusted-proxies, OUTBOXD_TRUSTED_PROXIES)", `"proxy.example" is neither a CIDR`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append([]string{"--config", writeFile(t, c.file)}, args...)
			}
			_, err := load(t, args, c.env)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestKafkaSettingsFromFlagsFileAndEnv(t *testing.T) {
	file := writeFile(t, "kafka:\n  sasl:\n    mechanism: scram-sha-512\n    username: svc\n  tls:\n    enabled: true\n  commit_interval: 250ms\n")
	cfg, err := load(t, []string{"--config", file, "--kafka-brokers", "k1:9092, k2:9092", "--kafka-topic", "events",
		"--kafka-group", "g", "--kafka-destination", "orders", "--changelog-topic", "cl", "--standby-replicas", "1"},
		map[string]string{"OUTBOXD_KAFKA_SASL_PASSWORD": "pw"})
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kafka
	if !k.Enabled() || len(k.Brokers) != 2 || k.Brokers[1] != "k2:9092" || k.Topic != "events" || k.Group != "g" ||
		k.Destination != "orders" || k.ChangelogTopic != "cl" || k.SASL.Password != "pw" || !k.TLS.Enabled ||
		k.CommitInterval != 250*time.Millisecond || k.StandbyReplicas != 1 {
		t.Errorf("kafka settings %+v", k)
	}
}

func TestMissingConfigFileIsAnError(t *testing.T) {
	_, err := load(t, []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	_, err := load(t, []string{"-h"}, nil)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "1048576": 1 << 20, "5MiB": 5 << 20, "512 KiB": 512 << 10, "1GB": 1 << 30, "10B": 10} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "MiB", "1TiB", "99999999999999999999"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", in)
		}
	}
	if s := ByteSize(5 << 20).String(); s != "5MiB" {
		t.Errorf("String = %q", s)
	}
}

// The changelog grows with every event; an operator bounds it by age and by
// count from the file, the environment or a flag, and may lift either bound.
func TestChangelogRetentionSettings(t *testing.T) {
	def, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := def.Delivery; d.ChangelogRetention != 24*time.Hour || d.ChangelogMaxEntries != 1_000_000 || d.MaintenanceInterval != time.Minute {
		t.Errorf("defaults: retention %s, max entries %d, maintenance %s; want 24h, 1000000, 1m",
			d.ChangelogRetention, d.ChangelogMaxEntries, d.MaintenanceInterval)
	}
	file := writeFile(t, "delivery:\n  changelog_retention: 2h\n  changelog_max_entries: 5000\n  maintenance_interval: 30s\n")
	env := map[string]string{"OUTBOXD_CHANGELOG_RETENTION": "3h", "OUTBOXD_CHANGELOG_MAX_ENTRIES": "6000", "OUTBOXD_MAINTENANCE_INTERVAL": "20s"}
	flags := []string{"--changelog-retention", "4h", "--changelog-max-entries", "7000", "--maintenance-interval", "10s"}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		age     time.Duration
		entries int
		maint   time.Duration
	}{
		{"file", []string{"--config", file}, nil, 2 * time.Hour, 5000, 30 * time.Second},
		{"env over file", []string{"--config", file}, env, 3 * time.Hour, 6000, 20 * time.Second},
		{"flag over env", append([]string{"--config", file}, flags...), env, 4 * time.Hour, 7000, 10 * time.Second},
		{"negative lifts the limits", []string{"--changelog-retention", "-1s", "--changelog-max-entries", "-1"}, nil, -time.Second, -1, time.Minute},
		// Zero is the default, as in outbox.Config: the setting is
		// kept at 0 and the outbox takes it as 24h, 1,000,000 and 1m.
		{"zero is the default", []string{"--changelog-retention", "0s", "--changelog-max-entries", "0", "--maintenance-interval", "0s"}, nil, 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			d := cfg.Delivery
			if d.ChangelogRetention != c.age || d.ChangelogMaxEntries != c.entries || d.MaintenanceInterval != c.maint {
				t.Errorf("retention %s, max entries %d, maintenance %s; want %s, %d, %s",
					d.ChangelogRetention, d.ChangelogMaxEntries, d.MaintenanceInterval, c.age, c.entries, c.maint)
			}
		})
	}

	bad := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "unparsable retention", env: map[string]string{"OUTBOXD_CHANGELOG_RETENTION": "a week"},
			want: []string{"OUTBOXD_CHANGELOG_RETENTION", "a week"}},
		{name: "unparsable max entries", args: []string{"--changelog-max-entries", "lots"},
			want: []string{"--changelog-max-entries", "lots"}},
		{name: "negative maintenance interval", args: []string{"--maintenance-interval", "-1s"},
			want: []string{"delivery.maintenance_interval (--maintenance-interval, OUTBOXD_MAINTENANCE_INTERVAL)", "must not be negative"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.env)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// serve -h shows each flag with the kind of value it takes: a count for a
// number whose default is 0, a duration only for durations.
func TestHelpNamesTheKindOfEachValue(t *testing.T) {
	var out strings.Builder
	_, err := NewLoader("outboxd serve", &out).Load([]string{"-h"}, envOf(nil))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-max-per-endpoint n\n", "-max-attempts n\n", "-interval duration\n", "-commit-interval duration\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve -h lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "(0: concurrency) (duration)") {
		t.Errorf("serve -h calls --max-per-endpoint a duration:\n%s", out.String())
	}
}

func TestServerLimitSettings(t *testing.T) {
	cfg, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{MaxBodyBytes: 5 << 20, MaxPayloadBytes: 1 << 20, MaxBatch: 1000, MaxDeliveriesPerRequest: 10000, MaxIDBytes: 200,
		MaxBodyMemory: 64 << 20, MaxConnections: 1024, MaxHeaderBytes: 64 << 10,
		ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	if cfg.Limits != want {
		t.Errorf("limits %+v, want the documented defaults %+v", cfg.Limits, want)
	}
	file := writeFile(t, "limits:\n  max_connections: 10\n  read_body_timeout: 5s\n")
	cfg, err = load(t, []string{"--config", file, "--max-body-memory", "8MiB", "--idle-timeout", "1m"},
		map[string]string{"OUTBOXD_READ_HEADER_TIMEOUT": "2s", "OUTBOXD_MAX_HEADER_BYTES": "16KiB"})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Limits
	if l.MaxConnections != 10 || l.ReadBodyTimeout != 5*time.Second || l.MaxBodyMemory != 8<<20 ||
		l.IdleTimeout != time.Minute || l.ReadHeaderTimeout != 2*time.Second || l.MaxHeaderBytes != 16<<10 {
		t.Errorf("limits %+v, want the file's, the flags' and the environment's values", l)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--max-body-memory", "1MiB"}, []string{"limits.max_body_memory (--max-body-memory, OUTBOXD_MAX_BODY_MEMORY)", "less than limits.max_body_bytes"}},
		{[]string{"--max-connections", "0"}, []string{"limits.max_connections", "positive"}},
		{[]string{"--max-header-bytes", "100B"}, []string{"limits.max_header_bytes", "at least 1KiB"}},
		{[]string{"--read-header-timeout", "0s"}, []string{"limits.read_header_timeout", "positive"}},
		{[]string{"--read-body-timeout", "-1s"}, []string{"limits.read_body_timeout", "positive"}},
		{[]string{"--idle-timeout", "0s"}, []string{"limits.idle_timeout", "positive"}},
	} {
		_, err := load(t, c.args, nil)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want it to mention %q", c.args, err, w)
			}
		}
	}
}

// TestAuthSettings: a short token with allow_short_token, the trusted
// proxies and metrics_open, from flags, variables and the file.
func TestAuthSettings(t *testing.T) {
	cfg, err := load(t, []string{"--token", "short", "--allow-short-token", "--trusted-proxies", "10.0.0.0/8, 192.0.2.7"},
		map[string]string{"OUTBOXD_METRICS_OPEN": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Token != "short" || !cfg.AllowShortToken || !cfg.MetricsOpen {
		t.Errorf("token %q allow %v metrics_open %v", cfg.Token, cfg.AllowShortToken, cfg.MetricsOpen)
	}
	proxies, err := ParseProxies(cfg.TrustedProxies)
	if err != nil || len(proxies) != 2 || proxies[0].String() != "10.0.0.0/8" || proxies[1].String() != "192.0.2.7/32" {
		t.Errorf("trusted proxies %v, %v", proxies, err)
	}
	file := writeFile(t, "token: sixteen-bytes-ok\ntrusted_proxies: ['fd00::/8']\nmetrics_open: true\n")
	if cfg, err = load(t, []string{"--config", file}, nil); err != nil || len(cfg.TrustedProxies) != 1 || !cfg.MetricsOpen {
		t.Errorf("from the file: %+v, %v", cfg.TrustedProxies, err)
	}
	if def := Default(); def.AllowShortToken || def.MetricsOpen || len(def.TrustedProxies) != 0 {
		t.Errorf("defaults: allow_short_token %v metrics_open %v trusted_proxies %v", def.AllowShortToken, def.MetricsOpen, def.TrustedProxies)
	}
}
