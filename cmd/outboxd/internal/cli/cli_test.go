package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestHistoryInWords(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(attempts, deliveries, status int, lastErr string) *store.Record {
		return &store.Record{ID: "e", Destination: "orders", Method: "POST", Payload: []byte("abc"),
			Attempts: attempts, Deliveries: deliveries, LastStatus: status, LastError: lastErr,
			NextAttemptAt: t0.Add(time.Minute)}
	}
	dead := rec(1, 3, 400, "status 400: bad")
	dead.DeadReason = "status 400: bad"
	entries := []*store.Entry{
		{LSN: 1, Op: store.OpEnqueue, Time: t0, Record: rec(0, 0, 0, "")},
		{LSN: 2, Op: store.OpReschedule, Time: t0, Record: rec(0, 1, 404, "status 404")},
		{LSN: 3, Op: store.OpReschedule, Time: t0, Record: rec(1, 2, 0, "dial tcp: connection refused")},
		{LSN: 4, Op: store.OpDead, Time: t0, Record: dead, Reason: dead.DeadReason},
		{LSN: 5, Op: store.OpReplay, Time: t0, Record: rec(0, 3, 400, "")},
		{LSN: 6, Op: store.OpDelete, Time: t0, Reason: "delivered"},
	}
	// The entries reach inspect through the outbox's changelog view, as
	// their binary encoding decoded.
	views := make([]outbox.ChangelogEntry, len(entries))
	for i, en := range entries {
		en.ID = "e"
		v, err := outbox.DecodeChangelogEntry(store.EncodeEntry(en))
		if err != nil {
			t.Fatal(err)
		}
		views[i] = v
	}
	var got []string
	for _, h := range describeHistory(views) {
		got = append(got, h.What)
	}
	want := []string{
		"enqueued: POST to orders, 3-byte payload",
		"delivery 1 parked (not yet; no attempt spent): status 404; next attempt 2026-03-01T12:01:00.000Z",
		"attempt 1 failed, will retry: no response: dial tcp: connection refused; next attempt 2026-03-01T12:01:00.000Z",
		"dead after delivery 3: status 400: bad",
		"replayed: moved from dead back to pending, attempts reset",
		"deleted: delivered",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMainDispatch(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Getenv: func(string) (string, bool) { return "", false }, Stdout: &out, Stderr: &errOut, Exit: func(int) {}}
	env.Args = nil
	if code := Main(env); code != exitUsage || !strings.Contains(errOut.String(), "Usage:") {
		t.Errorf("no command: %d %q", code, errOut.String())
	}
	env.Args = []string{"help"}
	if code := Main(env); code != exitOK || !strings.Contains(out.String(), "outboxd serve") {
		t.Errorf("help: %d %q", code, out.String())
	}
	errOut.Reset()
	env.Args = []string{"inspect", "--state", "gone"}
	if code := Main(env); code != exitUsage || !strings.Contains(errOut.String(), "--state: want pending, dead or unrouted") {
		t.Errorf("inspect --state gone: %d %q", code, errOut.String())
	}
	errOut.Reset()
	env.Args = []string{"restore", "--changelog-topic", "cl", "--kafka-brokers", "k:9092"}
	if code := Main(env); code != exitUsage || !strings.Contains(errOut.String(), "--from-kafka") {
		t.Errorf("restore without a source: %d %q", code, errOut.String())
	}
}

// commit_interval means what the outbox's CommitInterval means: zero is the
// default, negative commits at once; it and max_uncommitted go through as
// they are.
func TestOutboxConfigCarriesTheCommitSettings(t *testing.T) {
	c := config.Default()
	oc := outboxConfig(t, c, nil, newLogger(c.Log, io.Discard))
	if oc.CommitInterval != outbox.DefaultCommitInterval || oc.MaxUncommitted != outbox.DefaultMaxUncommitted {
		t.Errorf("defaults: commit interval %s, max uncommitted %d; want %s, %d",
			oc.CommitInterval, oc.MaxUncommitted, outbox.DefaultCommitInterval, outbox.DefaultMaxUncommitted)
	}
	c.Delivery.CommitInterval = -time.Millisecond
	c.Delivery.MaxUncommitted = 16
	oc = outboxConfig(t, c, nil, newLogger(c.Log, io.Discard))
	if oc.CommitInterval >= 0 || oc.MaxUncommitted != 16 {
		t.Errorf("commit_interval -1ms, max_uncommitted 16: outbox got %s, %d; want a negative interval (never wait), 16",
			oc.CommitInterval, oc.MaxUncommitted)
	}
	c.Delivery.CommitInterval = 0
	sink, err := httpsink.New(httpsink.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	if oc = outboxConfig(t, c, sink, newLogger(c.Log, io.Discard)); oc.CommitInterval != 0 {
		t.Errorf("commit_interval 0: outbox got %s, want 0 (the outbox's default)", oc.CommitInterval)
	}
	o, err := outbox.Open(t.TempDir()+"/o.db", oc)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	if got := o.Config().CommitInterval; got != outbox.DefaultCommitInterval {
		t.Errorf("commit_interval 0 opens an outbox with %s, want the default %s", got, outbox.DefaultCommitInterval)
	}
}

// The key index is kept only for per-key order: the sidecar offers no
// Upsert, and the index slows keyed enqueues on a large backlog.
func TestOutboxConfigKeepsTheKeyIndexOnlyWhenOrdered(t *testing.T) {
	c := config.Default()
	if oc := outboxConfig(t, c, nil, newLogger(c.Log, io.Discard)); oc.Ordered || !oc.NoKeyIndex {
		t.Errorf("defaults: Ordered %v, NoKeyIndex %v; want false, true", oc.Ordered, oc.NoKeyIndex)
	}
	c.Delivery.Ordered = true
	if oc := outboxConfig(t, c, nil, newLogger(c.Log, io.Discard)); !oc.Ordered || oc.NoKeyIndex {
		t.Errorf("ordered: Ordered %v, NoKeyIndex %v; want true, false", oc.Ordered, oc.NoKeyIndex)
	}
}

func TestOutboxConfigCarriesTheChangelogSettings(t *testing.T) {
	c := config.Default()
	c.Delivery.ChangelogRetention = 2 * time.Hour
	c.Delivery.ChangelogMaxEntries = -1
	c.Delivery.MaintenanceInterval = 10 * time.Second
	oc := outboxConfig(t, c, nil, newLogger(c.Log, io.Discard))
	if oc.ChangelogRetention != 2*time.Hour || oc.ChangelogMaxEntries != -1 || oc.MaintenanceInterval != 10*time.Second {
		t.Errorf("outbox config: retention %s, max entries %d, maintenance %s; want 2h, -1, 10s",
			oc.ChangelogRetention, oc.ChangelogMaxEntries, oc.MaintenanceInterval)
	}
}

// The warning about an open API without a token depends on this.
func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1": true, "127.3.2.1": true, "::1": true,
		"0.0.0.0": false, "::": false, "10.0.0.1": false, "192.168.1.2": false} {
		if got := loopback(&net.TCPAddr{IP: net.ParseIP(addr), Port: 8080}); got != want {
			t.Errorf("loopback(%s) = %v, want %v", addr, got, want)
		}
	}
}

// outboxConfig is c.OutboxConfig for settings it cannot refuse.
func outboxConfig(t *testing.T, c config.Config, sink outbox.Sink, logger *slog.Logger) outbox.Config {
	t.Helper()
	oc, err := c.OutboxConfig(sink, logger)
	if err != nil {
		t.Fatal(err)
	}
	return oc
}
