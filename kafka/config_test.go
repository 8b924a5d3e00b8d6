package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestValidateNamesTheField(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := Config{Brokers: []string{"localhost:9092"}, Topic: "events"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "Brokers"},
		{"no port", func(c *Config) { c.Brokers = []string{"localhost"} }, "Brokers"},
		{"bad port", func(c *Config) { c.Brokers = []string{"localhost:99999"} }, "Brokers"},
		{"bad topic", func(c *Config) { c.Topic = "a topic" }, "Topic"},
		{"bad changelog topic", func(c *Config) { c.ChangelogTopic = "x/y" }, "ChangelogTopic"},
		{"changelog is the topic", func(c *Config) { c.ChangelogTopic = "events" }, "ChangelogTopic"},
		{"start offset", func(c *Config) { c.StartOffset = "middle" }, "StartOffset"},
		{"advertise not a URL", func(c *Config) { c.AdvertiseURL = "10.0.0.7:8080" }, "AdvertiseURL"},
		{"advertise wildcard", func(c *Config) { c.AdvertiseURL = "http://0.0.0.0:8080" }, "AdvertiseURL"},
		{"advertise credentials", func(c *Config) { c.AdvertiseURL = "http://u:secret@10.0.0.7:8080" }, "AdvertiseURL"},
		{"advertise query", func(c *Config) { c.AdvertiseURL = "http://10.0.0.7:8080/?a=b" }, "AdvertiseURL"},
		{"dest header", func(c *Config) { c.DestinationHeader = "a b" }, "DestinationHeader"},
		{"same headers", func(c *Config) { c.IDHeader = "h"; c.DestinationHeader = "h" }, "IDHeader"},
		{"deliver-at header", func(c *Config) { c.DeliverAtHeader = "a b" }, "DeliverAtHeader"},
		{"deliver-at header is the ID's", func(c *Config) { c.DeliverAtHeader = "outbox-id" }, "DeliverAtHeader"},
		{"heartbeat", func(c *Config) { c.HeartbeatInterval = time.Minute }, "HeartbeatInterval"},
		{"negative", func(c *Config) { c.CommitInterval = -time.Second }, "CommitInterval"},
		{"backoff", func(c *Config) { c.RetryBackoff = time.Minute }, "RetryBackoffMax"},
		{"batch", func(c *Config) { c.BatchSize = -1 }, "BatchSize"},
		{"replication", func(c *Config) { c.ChangelogReplication = -3 }, "ChangelogReplication"},
		{"mechanism", func(c *Config) { c.SASL.Mechanism = "kerberos" }, "SASL.Mechanism"},
		{"user without mechanism", func(c *Config) { c.SASL.Username = "u" }, "SASL.Mechanism"},
		{"no user", func(c *Config) { c.SASL.Mechanism = "scram-sha-512"; c.SASL.Password = "p" }, "SASL.Username"},
		{"no password", func(c *Config) { c.SASL.Mechanism = "plain"; c.SASL.Username = "u" }, "SASL.Password"},
		{"missing CA", func(c *Config) { c.TLS = TLSConfig{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")} }, "TLS.CAFile"},
		{"CA not PEM", func(c *Config) { c.TLS = TLSConfig{Enabled: true, CAFile: notPEM} }, "TLS.CAFile"},
		{"cert without key", func(c *Config) { c.TLS = TLSConfig{Enabled: true, CertFile: notPEM} }, "TLS.CertFile"},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want a *ConfigError", tc.name, err)
			continue
		}
		if ce.Field != tc.field || !strings.HasPrefix(err.Error(), "kafka: config: "+tc.field+": ") {
			t.Errorf("%s: %q names %s, want %s", tc.name, err, ce.Field, tc.field)
		}
	}
	// A password in the advertised address is not repeated.
	withCred := ok
	withCred.AdvertiseURL = "http://u:secret@10.0.0.7:8080"
	if err := withCred.Validate(); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("advertised address with a password: %v, want an error without it", err)
	}
	// TLS off: its files are not looked at.
	c := ok
	c.TLS.CAFile = filepath.Join(dir, "missing.pem")
	if err := c.Validate(); err != nil {
		t.Errorf("TLS off but its files checked: %v", err)
	}
}

func TestEnabledAndStartErrors(t *testing.T) {
	if (Config{Topic: "t"}).Enabled() || (Config{Brokers: []string{"b:1"}}).Enabled() {
		t.Error("enabled without brokers or topics")
	}
	if !(Config{Brokers: []string{"b:1"}, ChangelogTopic: "c"}).Enabled() {
		t.Error("changelog shipping alone is enabled")
	}
	ctx := context.Background()
	if _, err := start(ctx, nil, nil, Config{Brokers: []string{"b:1"}}, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("start without topics: %v", err)
	}
	if _, err := Start(ctx, nil, Config{Brokers: []string{"b:1"}, Topic: "t"}, nil); err == nil {
		t.Error("Start with a nil outbox")
	}
	if _, err := Restore(ctx, Config{Brokers: []string{"b:1"}}, filepath.Join(t.TempDir(), "x.db"), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("restore without a changelog topic: %v", err)
	}
}

// Ingest and shipping authenticate with SASL/PLAIN and SCRAM against a broker
// that requires it, and a wrong password is refused.
func TestSASL(t *testing.T) {
	for _, mech := range []struct{ name, kfake string }{
		{"plain", "PLAIN"}, {"scram-sha-256", "SCRAM-SHA-256"}, {"scram-sha-512", "SCRAM-SHA-512"},
	} {
		t.Run(mech.name, func(t *testing.T) {
			c := newCluster(t, kfake.EnableSASL(), kfake.Superuser(mech.kfake, "outboxd", "s3cret"), kfake.SeedTopics(1, "in"))
			brokers := c.ListenAddrs()
			cfg := testConfig(brokers, "in")
			cfg.SASL = SASLConfig{Mechanism: mech.name, Username: "outboxd", Password: "s3cret"}
			cn, err := cfg.WithDefaults().conns()
			if err != nil {
				t.Fatal(err)
			}
			defer cn.close()
			cl := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: cn.transport, Timeout: 5 * time.Second}
			if _, err := cl.Metadata(context.Background(), &kafkago.MetadataRequest{Topics: []string{"in"}}); err != nil {
				t.Fatalf("metadata with %s: %v", mech.name, err)
			}
			conn, err := cn.dialer.DialContext(context.Background(), "tcp", brokers[0])
			if err != nil {
				t.Fatalf("dial with %s: %v", mech.name, err)
			}
			_ = conn.Close()

			cfg.SASL.Password = "wrong"
			bad, err := cfg.WithDefaults().conns()
			if err != nil {
				t.Fatal(err)
			}
			defer bad.close()
			if conn, err := bad.dialer.DialContext(context.Background(), "tcp", brokers[0]); err == nil {
				_ = conn.Close()
				t.Fatalf("%s accepted a wrong password", mech.name)
			}
		})
	}
}

// The SCRAM client refuses a server that does not follow the protocol: a
// nonce not its own or not extended, too few iterations, a malformed salt, an
// error.
func TestSCRAMRefusesBadServers(t *testing.T) {
	m, err := newSCRAM(scram.SHA256, "user,=x", "pw")
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "n,,n=user=2C=3Dx,r="
	for name, challenge := range map[string]func(nonce string) string{
		"foreign nonce":   func(string) string { return "r=abc,s=c2FsdA==,i=4096" },
		"few iterations":  func(n string) string { return "r=" + n + "x,s=c2FsdA==,i=1" },
		"server error":    func(string) string { return "e=unknown-user" },
		"malformed salt":  func(n string) string { return "r=" + n + "x,s=!!,i=4096" },
		"nonce not grown": func(n string) string { return "r=" + n + ",s=c2FsdA==,i=4096" },
	} {
		sm, first, err := m.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(first), prefix) {
			t.Fatalf("client-first %q", first)
		}
		if _, _, err := sm.Next(context.Background(), []byte(challenge(strings.TrimPrefix(string(first), prefix)))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A SCRAM credential that SASLprep refuses is a configuration error found by
// Validate, and the error does not quote the password.
func TestSCRAMCredentialRefusedBySASLprep(t *testing.T) {
	cfg := Config{Brokers: []string{"b:1"}, Topic: "in",
		SASL: SASLConfig{Mechanism: "scram-sha-256", Username: "svc", Password: "pw\u0007secret"}}
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalidConfig) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Validate: %v", err)
	}
	cfg.SASL.Password = "pw secret"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of an ASCII password: %v", err)
	}
}

// The brokers' certificate is verified against TLS.CAFile.
func TestTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kfake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}), kfake.SeedTopics(1, "in"))
	cfg := testConfig(c.ListenAddrs(), "in")
	cfg.TLS = TLSConfig{Enabled: true, CAFile: caFile}
	cn, err := cfg.WithDefaults().conns()
	if err != nil {
		t.Fatal(err)
	}
	defer cn.close()
	cl := &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...), Transport: cn.transport, Timeout: 5 * time.Second}
	if _, err := cl.Metadata(context.Background(), &kafkago.MetadataRequest{Topics: []string{"in"}}); err != nil {
		t.Fatalf("metadata over TLS: %v", err)
	}
	cfg.TLS = TLSConfig{Enabled: true} // system roots do not know this CA
	untrusted, err := cfg.WithDefaults().conns()
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.close()
	if conn, err := untrusted.dialer.DialContext(context.Background(), "tcp", c.ListenAddrs()[0]); err == nil {
		_ = conn.Close()
		t.Fatal("an untrusted certificate was accepted")
	}
}
