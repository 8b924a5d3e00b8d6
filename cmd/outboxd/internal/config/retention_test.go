package config

import (
	"strings"
	"testing"
	"time"
)

func TestRetainSettings(t *testing.T) {
	file := writeFile(t, "delivery:\n  retain: 7d\n  retain_max_bytes: 10GiB\n")
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		retain   time.Duration
		maxBytes ByteSize
	}{
		{"default: not kept", nil, nil, 0, 0},
		{"file, in days", []string{"--config", file}, nil, 7 * 24 * time.Hour, 10 << 30},
		{"env over file", []string{"--config", file}, map[string]string{"OUTBOXD_RETAIN": "36h"}, 36 * time.Hour, 10 << 30},
		{"flags", []string{"--retain", "1h", "--retain-max-bytes", "512MiB"}, nil, time.Hour, 512 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := load(t, c.args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			if d := cfg.Delivery; time.Duration(d.Retain) != c.retain || d.RetainMaxBytes != c.maxBytes {
				t.Fatalf("retain %s, max bytes %s; want %s, %s", d.Retain, d.RetainMaxBytes, c.retain, c.maxBytes)
			}
			oc, err := cfg.OutboxConfig(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if oc.Retain != c.retain || oc.RetainMaxBytes != int64(c.maxBytes) {
				t.Fatalf("outbox.Config: Retain %s, RetainMaxBytes %d", oc.Retain, oc.RetainMaxBytes)
			}
		})
	}
	bad := []struct {
		name string
		args []string
		want []string
	}{
		{"unparsable", []string{"--retain", "a week"}, []string{"--retain", "a week"}},
		{"negative", []string{"--retain", "-1h"}, []string{"delivery.retain (--retain, OUTBOXD_RETAIN)", "must not be negative"}},
		{"a size without a retention", []string{"--retain-max-bytes", "1GiB"}, []string{"delivery.retain_max_bytes", "needs"}},
		{"with Kafka", []string{"--retain", "7d", "--kafka-brokers", "127.0.0.1:9092", "--kafka-topic", "events"},
			[]string{"delivery.retain (--retain, OUTBOXD_RETAIN)", "not supported with Kafka"}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, nil)
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

func TestRetentionText(t *testing.T) {
	for in, want := range map[string]string{"7d": "7d", "48h": "2d", "36h": "36h0m0s", "0": "0s", " 90m ": "1h30m0s"} {
		r, err := ParseRetention(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRetention(%q) = %s, %v; want %s", in, r, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1d", "1.5d", "7 days", "99999999999d"} {
		if _, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) accepted", in)
		}
	}
}
