package config

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// Zero means the default in outboxd as in the libraries: every delivery
// setting given as 0 opens an outbox (and a sink) with the library's
// default, and the config keeps the 0 rather than refusing it.
func TestZeroDeliverySettingsAreTheLibraryDefaults(t *testing.T) {
	var args []string
	for _, s := range settings() {
		if !strings.HasPrefix(s.path, "delivery.") || s.list || s.isBool {
			continue
		}
		if s.path == "delivery.attempt_excerpt" {
			continue // the one exception: 0 keeps no excerpt (TestAttemptLogSettings)
		}
		v := "0s" // a duration's default reads "1s", a count's "1000"
		if _, err := strconv.Atoi(defaultOf(s.path)); err == nil {
			v = "0"
		}
		args = append(args, "--"+s.flag, v)
	}
	cfg, err := load(t, args, nil)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	if cfg.Delivery.ChangelogRetention != 0 || cfg.Delivery.Interval != 0 || cfg.Delivery.MaxUncommitted != 0 {
		t.Errorf("delivery %+v, want the zeros kept", cfg.Delivery)
	}
	sc, err := cfg.SinkConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := httpsink.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	oc, err := cfg.OutboxConfig(sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := outbox.Open(filepath.Join(t.TempDir(), "o.db"), oc)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	got := o.Config()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"interval", got.Interval, outbox.DefaultInterval},
		{"batch_size", got.BatchSize, outbox.DefaultBatchSize},
		{"concurrency", got.Concurrency, outbox.DefaultConcurrency},
		{"max_per_endpoint", got.MaxPerEndpoint, outbox.DefaultConcurrency},
		{"max_attempts", got.MaxAttempts, outbox.DefaultMaxAttempts},
		{"max_age", got.MaxAge, outbox.DefaultMaxAge},
		{"max_schedule", got.MaxSchedule, outbox.DefaultMaxSchedule},
		{"backoff_initial", got.BackoffInitial, outbox.DefaultBackoffInitial},
		{"backoff_max", got.BackoffMax, outbox.DefaultBackoffMax},
		{"park_interval", got.ParkInterval, outbox.DefaultParkInterval},
		{"commit_interval", got.CommitInterval, outbox.DefaultCommitInterval},
		{"max_uncommitted", got.MaxUncommitted, outbox.DefaultMaxUncommitted},
		{"max_retry_after", got.MaxThrottle, outbox.DefaultMaxThrottle},
		{"tombstone_retention", got.TombstoneRetention, outbox.DefaultTombstoneRetention},
		{"changelog_retention", got.ChangelogRetention, outbox.DefaultChangelogRetention},
		{"changelog_max_entries", got.ChangelogMaxEntries, outbox.DefaultChangelogMaxEntries},
		{"maintenance_interval", got.MaintenanceInterval, outbox.DefaultMaintenanceInterval},
	} {
		if c.got != c.want {
			t.Errorf("delivery.%s: 0 opened the outbox with %v, want its default %v", c.name, c.got, c.want)
		}
	}
}

// The delivery settings and endpoints are refused by the libraries' own
// validation, at load time; the error names outboxd's setting, with its
// flag and variable, and still matches the library's sentinel.
func TestLibraryRefusalsNameOurSettings(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		sentinel error
		want     []string
		not      string
	}{
		{"max per endpoint", []string{"--concurrency", "4", "--max-per-endpoint", "8"}, outbox.ErrInvalidConfig,
			[]string{"invalid setting delivery.max_per_endpoint (--max-per-endpoint, OUTBOXD_MAX_PER_ENDPOINT): must not exceed delivery.concurrency"}, ""},
		{"backoff", []string{"--backoff-initial", "1m", "--backoff-max", "1s"}, outbox.ErrInvalidConfig,
			[]string{"delivery.backoff_max (--backoff-max, OUTBOXD_BACKOFF_MAX): must not be less than delivery.backoff_initial"}, ""},
		{"max schedule", []string{"--max-schedule", "-1h"}, outbox.ErrInvalidConfig,
			[]string{"invalid setting delivery.max_schedule (--max-schedule, OUTBOXD_MAX_SCHEDULE): must not be negative"}, ""},
		{"retry after", []string{"--max-retry-after", "-1s"}, httpsink.ErrInvalidConfig,
			[]string{"delivery.max_retry_after (--max-retry-after, OUTBOXD_MAX_RETRY_AFTER): must not be negative"}, ""},
		{"timeout", []string{"--timeout", "-1s"}, httpsink.ErrInvalidConfig,
			[]string{"delivery.timeout (--timeout, OUTBOXD_TIMEOUT): must not be negative"}, ""},
		{"endpoint name", []string{"--endpoint", "a b=https://a.example.com/"}, httpsink.ErrInvalidConfig,
			[]string{"endpoints[0].name (--endpoint, OUTBOXD_ENDPOINTS)"}, ""},
		{"endpoint timeout", []string{"--endpoint", "a=https://a.example.com/", "--endpoint", "b=https://b.example.com/,timeout=-1s"}, httpsink.ErrInvalidConfig,
			[]string{"endpoints[1].timeout (--endpoint, OUTBOXD_ENDPOINTS): must not be negative"}, ""},
		{"private endpoint", []string{"--endpoint", "a=http://127.0.0.1:9/"}, httpsink.ErrBlockedAddress,
			[]string{"endpoints[0].url (--endpoint, OUTBOXD_ENDPOINTS)", "loopback", "--allow-private-networks", "Config.AllowPrivateNetworks"}, "allow_private_networks,"},
		{"short secret", []string{"--endpoint", "a=https://a.example.com/,secret=whsec_c2hvcnQ="}, httpsink.ErrInvalidConfig,
			[]string{"endpoints[0].secrets[0] (--endpoint, OUTBOXD_ENDPOINTS)", "shorter than 16 bytes"}, "c2hvcnQ"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, nil)
			var se *SettingError
			if !errors.As(err, &se) || !errors.Is(err, c.sentinel) {
				t.Fatalf("%v: want a *SettingError matching %v", err, c.sentinel)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c.not != "" && strings.Contains(err.Error(), c.not) {
				t.Errorf("error %q says %q", err, c.not)
			}
		})
	}
}

// delivery.attempt_excerpt is a size whose 0 keeps no excerpt, and
// delivery.attempt_log=false turns the log off; an excerpt beyond the
// outbox's limit is refused naming the setting.
func TestAttemptLogSettings(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		excerpt int
		off     bool
	}{
		{nil, outbox.DefaultAttemptExcerptBytes, false},
		{[]string{"--attempt-excerpt", "0"}, -1, false},
		{[]string{"--attempt-excerpt", "4KiB"}, 4096, false},
		{[]string{"--attempt-log=false"}, outbox.DefaultAttemptExcerptBytes, true},
	} {
		cfg, err := load(t, tc.args, nil)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		oc, err := cfg.OutboxConfig(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if oc.AttemptExcerptBytes != tc.excerpt || oc.NoAttemptLog != tc.off {
			t.Errorf("%v: excerpt %d, off %v; want %d, %v", tc.args, oc.AttemptExcerptBytes, oc.NoAttemptLog, tc.excerpt, tc.off)
		}
	}
	_, err := load(t, []string{"--attempt-excerpt", "1MiB"}, nil)
	var se *SettingError
	if !errors.As(err, &se) || se.Setting != "delivery.attempt_excerpt" || !strings.Contains(err.Error(), "--attempt-excerpt") {
		t.Fatalf("an excerpt over the limit: %v, want a SettingError naming delivery.attempt_excerpt", err)
	}
}

// limits.max_deliveries_per_request is the outbox's MaxDeliveriesPerCall,
// from the file, the environment or a flag, negative for no bound; the
// outbox's refusal of the field names the setting.
func TestMaxDeliveriesPerRequestMapsToTheOutbox(t *testing.T) {
	for _, c := range []struct {
		name string
		file string
		args []string
		env  map[string]string
		want int
	}{
		{name: "default", want: outbox.DefaultMaxDeliveriesPerCall},
		{name: "file", file: "limits:\n  max_deliveries_per_request: 500\n", want: 500},
		{name: "env", env: map[string]string{"OUTBOXD_MAX_DELIVERIES_PER_REQUEST": "250000"}, want: 250000},
		{name: "flag over env", args: []string{"--max-deliveries-per-request", "7"},
			env: map[string]string{"OUTBOXD_MAX_DELIVERIES_PER_REQUEST": "9"}, want: 7},
		{name: "no bound", args: []string{"--max-deliveries-per-request", "-1"}, want: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			if c.file != "" {
				args = append([]string{"--config", writeFile(t, c.file)}, args...)
			}
			cfg, err := load(t, args, c.env)
			if err != nil {
				t.Fatal(err)
			}
			oc, err := cfg.OutboxConfig(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if oc.MaxDeliveriesPerCall != c.want {
				t.Errorf("outbox MaxDeliveriesPerCall = %d, want %d", oc.MaxDeliveriesPerCall, c.want)
			}
		})
	}
	err := Explain(&outbox.ConfigError{Field: "MaxDeliveriesPerCall", Reason: "x"})
	if want := "limits.max_deliveries_per_request (--max-deliveries-per-request, OUTBOXD_MAX_DELIVERIES_PER_REQUEST)"; !strings.Contains(err.Error(), want) {
		t.Errorf("Explain = %v, want it to name %q", err, want)
	}
	if got, want := SettingName("limits.max_deliveries_per_request"),
		"limits.max_deliveries_per_request (--max-deliveries-per-request, OUTBOXD_MAX_DELIVERIES_PER_REQUEST)"; got != want {
		t.Errorf("SettingName = %q, want %q", got, want)
	}
}
