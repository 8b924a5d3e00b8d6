package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxd/outbox/cmd/outboxd/internal/config"
	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/kafka"
	"github.com/outboxd/outbox/outbox"
)

type nopSink struct{}

func (nopSink) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
}

// TestReadyzReportsAHungCommit: while a store commit does not return (a disk
// that stopped answering), /readyz answers 503 naming the cause, and ready
// again once the commit finishes.
func TestReadyzReportsAHungCommit(t *testing.T) {
	defer func(d time.Duration) { commitStallLimit = d }(commitStallLimit)
	commitStallLimit = 20 * time.Millisecond

	o, err := outbox.Open(filepath.Join(t.TempDir(), "outboxd.db"), outbox.Config{Sink: nopSink{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	defer o.Stop(context.Background())
	cfg := config.Default()
	s := &server{cfg: &cfg, log: slog.New(slog.DiscardHandler), o: o}
	srv := httptest.NewServer(openapitest.Handler(t, s.routes(prometheus.NewRegistry())))
	defer srv.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz = %d %s, want 200", code, body)
	}

	// Hold the committer inside a transaction, as an fsync that does not
	// return would: Upsert's fn runs inside the write transaction.
	started, release := make(chan struct{}), make(chan struct{})
	errHold := errors.New("hold")
	held := make(chan error, 1)
	go func() {
		_, err := o.Upsert(t.Context(), "hold", func(*outbox.Event) (outbox.Event, error) {
			close(started)
			<-release
			return outbox.Event{}, errHold
		})
		held <- err
	}()
	<-started
	for deadline := time.Now().Add(10 * time.Second); o.CommitStats().Running <= commitStallLimit; {
		if time.Now().After(deadline) {
			t.Fatal("the held commit never counted as running")
		}
		runtime.Gosched()
	}
	code, body := readyz()
	close(release)
	if err := <-held; !errors.Is(err, errHold) {
		t.Fatalf("Upsert = %v, want the hold error", err)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: store: a store commit has been running") ||
		!strings.Contains(body, "outboxd.db") || !strings.Contains(body, `"name":"store","ok":false`) {
		t.Fatalf("readyz during the hung commit = %d %s, want 503 naming the commit and the file", code, body)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("readyz after the commit finished = %d %s, want 200", code, body)
	}
}

// readyzClient serves s's routes on loopback and reads /readyz answers.
type readyzClient struct {
	t   *testing.T
	url string
}

func serveRoutes(t *testing.T, s *server) readyzClient {
	t.Helper()
	// Every answer is checked against the OpenAPI document.
	srv := httptest.NewServer(openapitest.Handler(t, s.routes(prometheus.NewRegistry())))
	t.Cleanup(srv.Close)
	return readyzClient{t: t, url: srv.URL}
}

// readyzAnswer is the JSON answer of /readyz (error for a 400), as a
// client reads it.
type readyzAnswer struct {
	Status string `json:"status"`
	Checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Reason string `json:"reason"`
	} `json:"checks"`
	Error string `json:"error"`
}

// get calls GET /readyz with query and decodes the answer.
func (c readyzClient) get(query string) (int, readyzAnswer) {
	c.t.Helper()
	resp, err := http.Get(c.url + "/readyz" + query)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		c.t.Fatalf("/readyz%s: Content-Type %q", query, ct)
	}
	var a readyzAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		c.t.Fatalf("/readyz%s answered %d %q: %v", query, resp.StatusCode, body, err)
	}
	return resp.StatusCode, a
}

// names lists the checks of an answer as name=ok|failed.
func names(a readyzAnswer) string {
	var out []string
	for _, c := range a.Checks {
		state := "ok"
		if !c.OK {
			state = "failed"
		}
		out = append(out, c.Name+"="+state)
	}
	return strings.Join(out, " ")
}

// newReadyServer returns a server over a running outbox in a temp dir,
// with k as its Kafka integration (nil: single-machine mode).
func newReadyServer(t *testing.T, k kafkaRunner) *server {
	t.Helper()
	o, err := outbox.Open(filepath.Join(t.TempDir(), "outboxd.db"), outbox.Config{Sink: nopSink{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Stop(context.Background()) })
	cfg := config.Default()
	return &server{cfg: &cfg, log: slog.New(slog.DiscardHandler), o: o, kafka: k}
}

// TestReadyzChecksByName: /readyz runs named checks; ?verbose lists each
// with its outcome, a failing answer names the failed ones, ?exclude skips
// checks by name and refuses a name it does not know.
func TestReadyzChecksByName(t *testing.T) {
	s := newReadyServer(t, nil)
	c := serveRoutes(t, s)

	code, a := c.get("")
	if code != http.StatusOK || a.Status != "ready" || len(a.Checks) != 0 {
		t.Fatalf("/readyz = %d %+v, want 200 ready without checks", code, a)
	}
	for _, q := range []string{"?verbose", "?verbose=1", "?verbose=true"} {
		code, a := c.get(q)
		if code != http.StatusOK || a.Status != "ready" || names(a) != "store=ok punctuator=ok shutdown=ok" {
			t.Errorf("/readyz%s = %d %q [%s], want 200 ready listing store and shutdown ok (no Kafka checks without Kafka)",
				q, code, a.Status, names(a))
		}
	}
	if code, a := c.get("?verbose=0"); code != http.StatusOK || len(a.Checks) != 0 {
		t.Errorf("/readyz?verbose=0 = %d [%s], want 200 without checks", code, names(a))
	}
	if code, a := c.get("?verbose=loud"); code != http.StatusBadRequest || !strings.Contains(a.Error, "verbose") {
		t.Errorf("/readyz?verbose=loud = %d %+v, want 400 naming verbose", code, a)
	}

	// Stopping: the shutdown check fails, named in the status and listed
	// even without ?verbose; the store check still passes.
	s.stopping.Store(true)
	code, a = c.get("")
	if code != http.StatusServiceUnavailable || a.Status != "not ready: shutdown: shutting down" ||
		names(a) != "shutdown=failed" || a.Checks[0].Reason != "shutting down" {
		t.Errorf("/readyz while stopping = %d %q [%s], want 503 naming the shutdown check", code, a.Status, names(a))
	}
	if code, a := c.get("?verbose"); code != http.StatusServiceUnavailable || names(a) != "store=ok punctuator=ok shutdown=failed" {
		t.Errorf("/readyz?verbose while stopping = %d [%s], want every check", code, names(a))
	}
	if code, a := c.get("?exclude=shutdown&verbose"); code != http.StatusOK || names(a) != "store=ok punctuator=ok" {
		t.Errorf("/readyz?exclude=shutdown while stopping = %d %q [%s], want 200 with the store check only", code, a.Status, names(a))
	}

	// Repeated and comma-separated names; the Kafka checks may be
	// excluded where they do not run, so one probe fits every instance.
	for q, want := range map[string]string{
		"?exclude=shutdown,store,punctuator":                  "",
		"?exclude=shutdown&exclude=store&exclude=punctuator":  "",
		"?exclude=+shutdown+,,":                               "store=ok punctuator=ok",
		"?exclude=kafka,restores&exclude=shutdown,punctuator": "store=ok",
	} {
		if code, a := c.get(q + "&verbose"); code != http.StatusOK || names(a) != want {
			t.Errorf("/readyz%s&verbose = %d %q [%s], want 200 [%s]", q, code, a.Status, names(a), want)
		}
	}
	code, a = c.get("?exclude=shutdown,disk")
	if code != http.StatusBadRequest || !strings.Contains(a.Error, `"disk"`) ||
		!strings.Contains(a.Error, "store, punctuator, shutdown, kafka, restores") {
		t.Errorf("/readyz?exclude=disk = %d %+v, want 400 naming the name and the known checks", code, a)
	}
}

// fakeGroup injects the states of a consumer group member that cannot be
// caused on demand (a refused join, a restore under way or failed); it is
// what /readyz reads of a *kafka.Group.
type fakeGroup struct {
	mu     sync.Mutex
	health kafka.GroupHealth
	parts  []kafka.PartitionStatus
}

func (g *fakeGroup) set(h kafka.GroupHealth, ps ...kafka.PartitionStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.health, g.parts = h, ps
}

func (g *fakeGroup) Health() kafka.GroupHealth {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.health
}

func (g *fakeGroup) Partitions() []kafka.PartitionStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.parts)
}

func (g *fakeGroup) Close(context.Context) error { return nil }
func (g *fakeGroup) Metrics() kafka.Metrics      { return kafka.Metrics{} }

// TestReadyzGroupMode: in Kafka group mode the kafka check fails only when
// the instance cannot take part in the group, not while it joins or
// rebalances; the restores check fails while an assigned partition is
// restoring or its restore failed, naming them.
func TestReadyzGroupMode(t *testing.T) {
	g := &fakeGroup{}
	c := serveRoutes(t, newReadyServer(t, g))

	// Joining (a restarted instance, a rebalance): ready.
	g.set(kafka.GroupHealth{Joined: false})
	if code, a := c.get("?verbose"); code != http.StatusOK || names(a) != "store=ok punctuator=ok shutdown=ok kafka=ok restores=ok" {
		t.Errorf("/readyz?verbose while joining = %d %q [%s], want 200 with all four checks ok", code, a.Status, names(a))
	}

	active := kafka.PartitionStatus{Partition: 0, State: kafka.PartitionActive}
	g.set(kafka.GroupHealth{Joined: true, Generation: 3, Restoring: 2},
		active,
		kafka.PartitionStatus{Partition: 2, State: kafka.PartitionRestoring,
			Restore: kafka.RestoreStatus{Mode: kafka.RestoreRebuild, Records: 120, Remaining: 880}},
		kafka.PartitionStatus{Partition: 5, State: kafka.PartitionRestoring},
		kafka.PartitionStatus{Partition: 7, State: kafka.PartitionHandingOver})
	code, a := c.get("")
	wantReason := "partition 2 restoring (rebuild: 120 records applied, 880 offsets left); partition 5 restoring (not started)"
	if code != http.StatusServiceUnavailable || names(a) != "restores=failed" || a.Checks[0].Reason != wantReason ||
		a.Status != "not ready: restores: "+wantReason {
		t.Errorf("/readyz while restoring = %d %+v, want 503 naming partitions 2 and 5 only", code, a)
	}

	g.set(kafka.GroupHealth{Joined: true, Generation: 3, Failed: 1},
		active, kafka.PartitionStatus{Partition: 4, State: kafka.PartitionFailed, Error: "changelog partition 4: fenced by epoch 9"})
	code, a = c.get("")
	if code != http.StatusServiceUnavailable || names(a) != "restores=failed" ||
		a.Checks[0].Reason != "partition 4 restore failed: changelog partition 4: fenced by epoch 9" {
		t.Errorf("/readyz with a failed restore = %d %+v, want 503 naming partition 4 and why", code, a)
	}
	if code, _ := c.get("?exclude=restores"); code != http.StatusOK {
		t.Errorf("/readyz?exclude=restores with a failed restore = %d, want 200", code)
	}

	// Cannot take part in the group: kafka fails with the cause.
	g.set(kafka.GroupHealth{Err: errors.New("dial tcp 10.0.0.1:9092: connection refused")})
	code, a = c.get("?verbose")
	if code != http.StatusServiceUnavailable || names(a) != "store=ok punctuator=ok shutdown=ok kafka=failed restores=ok" ||
		a.Status != "not ready: kafka: cannot take part in the consumer group: dial tcp 10.0.0.1:9092: connection refused" {
		t.Errorf("/readyz?verbose with a group error = %d %q [%s], want 503 naming the kafka check and the cause", code, a.Status, names(a))
	}
	if code, a := c.get("?exclude=kafka"); code != http.StatusOK || a.Status != "ready" {
		t.Errorf("/readyz?exclude=kafka with a group error = %d %+v, want 200", code, a)
	}

	g.set(kafka.GroupHealth{Joined: true, Generation: 4}, active)
	if code, a := c.get(""); code != http.StatusOK || a.Status != "ready" {
		t.Errorf("/readyz once every partition is active = %d %+v, want 200", code, a)
	}
}

// TestReadyzSingleInstanceKafka: with a kafka.Runner (no partition stores)
// the kafka check keeps its meaning, Runner.Ready, and there is no restores
// check.
func TestReadyzSingleInstanceKafka(t *testing.T) {
	// A broker address nobody listens on: the runner never joins.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newReadyServer(t, nil)
	r, err := kafka.Start(t.Context(), s.o, kafka.Config{
		Brokers: []string{addr}, Topic: "in", Group: "g", Destination: "dest",
		DialTimeout: 200 * time.Millisecond, RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	s.kafka = r
	c := serveRoutes(t, s)

	code, a := c.get("?verbose")
	if code != http.StatusServiceUnavailable || names(a) != "store=ok punctuator=ok shutdown=ok kafka=failed" ||
		a.Status != "not ready: kafka: Kafka ingest not connected" {
		t.Errorf("/readyz?verbose with an unreachable broker = %d %q [%s], want 503 naming the kafka check, no restores check",
			code, a.Status, names(a))
	}
	if code, _ := c.get("?exclude=kafka"); code != http.StatusOK {
		t.Errorf("/readyz?exclude=kafka = %d, want 200", code)
	}
}

// A delivery punctuation that stops running (a stuck scheduler) fails the
// punctuator check, naming how long ago it last ran.
func TestReadyzReportsAStalledPunctuator(t *testing.T) {
	s := newReadyServer(t, nil)
	s.watchPunctuator()
	c := serveRoutes(t, s)
	if code, a := c.get(""); code != http.StatusOK {
		t.Fatalf("/readyz = %d %+v, want 200", code, a)
	}
	// The hook would move it forward at the next punctuation: stop it.
	s.o.AddHooks(outbox.Hooks{Name: "outboxd-readyz"})
	s.lastPunct.Store(time.Now().Add(-2 * s.punctuatorStall()).UnixNano())
	code, a := c.get("")
	if code != http.StatusServiceUnavailable || names(a) != "punctuator=failed" ||
		!strings.Contains(a.Checks[0].Reason, "the delivery punctuation last ran") {
		t.Errorf("/readyz with a stalled punctuator = %d %+v, want 503 naming the punctuator", code, a)
	}
	if code, _ := c.get("?exclude=punctuator"); code != http.StatusOK {
		t.Errorf("/readyz?exclude=punctuator = %d, want 200", code)
	}
}
