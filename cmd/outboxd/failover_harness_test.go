//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/kafka"
)

// The harness of the failover tests: a kfake broker, a receiver whose answer
// the test switches, a producer, and a fleet of outboxd instances in one
// consumer group, each with its own state directory.

const (
	// fleetTopic is the ingest topic, seeded with fleetPartitions
	// partitions.
	fleetTopic      = "events"
	fleetPartitions = 6
	// fleetChangelog is the group's changelog topic.
	fleetChangelog = "events-changelog"
	// fleetSession is the group session timeout of fleetTuning.
	fleetSession = time.Second
	// fleetConcurrency and fleetMaxUncommitted are each store's delivery
	// limits: what one store can deliver without having its outcome
	// committed (and shipped) is bounded by their sum.
	fleetConcurrency    = 8
	fleetMaxUncommitted = 32
)

// inFlightBound is how many deliveries one instance owning parts partition
// stores can have made whose outcome a crash loses: those in flight and
// those awaiting the commit of their outcome, in every store it holds.
func inFlightBound(parts int) int {
	return max(parts, 1) * (fleetConcurrency + fleetMaxUncommitted)
}

// fleet is one test's Kafka cluster, receiver, changelog reader and
// outboxd instances.
type fleet struct {
	t       *testing.T
	cluster *kfake.Cluster
	brokers string
	group   string
	dir     string
	tuning  string
	rc      receiver
	view    *changelogView
	extra   []string // more arguments of every instance started from now on

	mu        sync.Mutex
	instances []*instance
}

// newFleet starts a kfake cluster with the 6-partition ingest topic and a
// receiver answering 204 to everything.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(fleetPartitions, fleetTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	tuning := filepath.Join(dir, "kafka.yaml")
	if err := os.WriteFile(tuning, []byte(fleetTuning), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, cluster: cluster, brokers: strings.Join(cluster.ListenAddrs(), ","),
		group: "failover", dir: dir, tuning: tuning, rc: newReceiver(t, nil)}
	f.view = &changelogView{t: t, addr: cluster.ListenAddrs()[0], topic: fleetChangelog, last: map[string]changelogRecord{}}
	t.Cleanup(f.view.close)
	t.Cleanup(statsClient.CloseIdleConnections)
	return f
}

// fleetTuning is kafkaTuning with a rebalance timeout that leaves room for
// a hand-over under the race detector. The hand-over timeout is left at its
// default (10s): the group caps it at two thirds of the 1s session, since
// kafka-go stops heartbeating when a generation ends and a hand-over that
// outlasted the session would have its final offset commit refused.
const fleetTuning = `kafka:
  commit_interval: 50ms
  session_timeout: 1s
  heartbeat_interval: 100ms
  rebalance_timeout: 3s
  ship_interval: 10ms
  retry_backoff: 20ms
  retry_backoff_max: 200ms
  dial_timeout: 1s
  client_id: outboxd-e2e
`

// answerAll503 keeps every event pending (a nil answer delivers everything).
func answerAll503(*http.Request, string) int { return http.StatusServiceUnavailable }

// answerOnly answers 204 to the IDs in ok and 503 to every other.
func answerOnly(ok []string) func(*http.Request, string) int {
	set := make(map[string]bool, len(ok))
	for _, id := range ok {
		set[id] = true
	}
	return func(_ *http.Request, id string) int {
		if set[id] {
			return http.StatusNoContent
		}
		return http.StatusServiceUnavailable
	}
}

// instance is one outboxd serve of the fleet, with its own state, that the
// test kills, stops, pauses and restarts.
type instance struct {
	f    *fleet
	name string
	db   string
	p    *proc // the current (or last) process
}

// add starts a new instance and waits until it listens.
func (f *fleet) add(name string) *instance {
	f.t.Helper()
	dir := filepath.Join(f.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	in := &instance{f: f, name: name, db: filepath.Join(dir, "outboxd.db")}
	in.start()
	f.mu.Lock()
	f.instances = append(f.instances, in)
	f.mu.Unlock()
	return in
}

func (in *instance) args() []string {
	f := in.f
	return append([]string{"--db", in.db, "--config", f.tuning, "--endpoint", f.rc.endpoint("orders"),
		"--kafka-brokers", f.brokers, "--kafka-topic", fleetTopic, "--kafka-group", f.group,
		"--kafka-destination", "orders", "--changelog-topic", fleetChangelog,
		"--concurrency", strconv.Itoa(fleetConcurrency), "--max-uncommitted", strconv.Itoa(fleetMaxUncommitted),
		"--interval", "50ms", "--backoff-initial", "100ms", "--backoff-max", "500ms",
		"--breaker-cool-down", "200ms", "--breaker-max-cool-down", "1s",
		"--shutdown-grace", "20s"}, f.extra...)
}

func (in *instance) start() {
	in.f.t.Helper()
	in.p = start(in.f.t, filepath.Dir(in.db), in.args()...)
}

// running reports whether the current process is alive (paused counts).
func (in *instance) running() bool {
	select {
	case <-in.p.done:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL and waits until it is gone.
func (in *instance) kill() {
	in.f.t.Helper()
	in.p.signal(syscall.SIGKILL, 10*time.Second)
}

// stop sends SIGTERM and waits for an orderly exit.
func (in *instance) stop() time.Duration {
	in.f.t.Helper()
	took := in.p.signal(syscall.SIGTERM, 30*time.Second)
	if code := in.p.exitCode(); code != 0 {
		in.f.t.Errorf("%s: exit code %d after SIGTERM:\n%s", in.name, code, in.p.log)
	}
	return took
}

// pause stops the process with SIGSTOP (it keeps its sockets, and its
// group membership until the session times out); resume continues it.
func (in *instance) pause()  { in.sendSignal(syscall.SIGSTOP) }
func (in *instance) resume() { in.sendSignal(syscall.SIGCONT) }

func (in *instance) sendSignal(sig syscall.Signal) {
	in.f.t.Helper()
	if err := in.p.cmd.Process.Signal(sig); err != nil {
		in.f.t.Fatalf("%s: %v: %v", in.name, sig, err)
	}
}

// deleteState removes the instance's database and its partition stores, as
// a lost disk would. The process must not run.
func (in *instance) deleteState() {
	in.f.t.Helper()
	if in.running() {
		in.f.t.Fatalf("%s: deleting the state of a running instance", in.name)
	}
	for _, p := range []string{in.db, in.db + ".partitions"} {
		if err := os.RemoveAll(p); err != nil {
			in.f.t.Fatal(err)
		}
	}
	if _, err := os.Stat(in.db); !errors.Is(err, os.ErrNotExist) {
		in.f.t.Fatalf("%s: %s still there: %v", in.name, in.db, err)
	}
}

// restart starts the instance again on whatever state it has.
func (in *instance) restart() {
	in.f.t.Helper()
	if in.running() {
		in.f.t.Fatalf("%s: restart of a running instance", in.name)
	}
	in.start()
}

// instanceStats is what the tests read of GET /v1/stats: the instance's own
// store, and (in group mode) the partitions it owns.
type instanceStats struct {
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
	Kafka   *struct {
		Partitions []kafka.PartitionStatus `json:"partitions"`
	} `json:"kafka"`
}

// statsClient gives up quickly: a paused or dying instance must not hold a
// wait up. Each fleet closes its idle connections at its cleanup.
var statsClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}

// stats reads GET /v1/stats; ok is false when the instance did not answer.
func (in *instance) stats() (instanceStats, bool) {
	var s instanceStats
	if !in.running() {
		return s, false
	}
	resp, err := statsClient.Get(in.p.url("/v1/stats?scope=local"))
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return s, false
	}
	// The answer, kafka part included, is the one the OpenAPI document describes.
	openapitest.Check(in.f.t, resp.Request, nil, resp.StatusCode, resp.Header, b)
	return s, json.Unmarshal(b, &s) == nil
}

// pendingIngested is the number of pending events of the partitions the
// instance holds (without the kafka object, all of its pending events).
func (s instanceStats) pendingIngested() int {
	if s.Kafka == nil {
		return s.Pending
	}
	n := 0
	for _, p := range s.Kafka.Partitions {
		n += p.Pending
	}
	return n
}

// requireNothingPending fails the test (and goes on) if the instance holds
// pending events, naming the partitions that hold them and how they were
// restored.
func requireNothingPending(t *testing.T, what string, in *instance) {
	t.Helper()
	s, ok := in.stats()
	if !ok {
		t.Fatalf("%s: no stats", what)
	}
	if n := s.pendingIngested(); n > 0 {
		var parts []string
		if s.Kafka != nil {
			for _, p := range s.Kafka.Partitions {
				if p.Pending > 0 {
					parts = append(parts, fmt.Sprintf("partition %d: %d pending (restore mode=%s from offset %d to %d, %d records, %d fenced)",
						p.Partition, p.Pending, p.Restore.Mode, p.Restore.From, p.Restore.To, p.Restore.Records, p.Restore.Fenced))
				}
			}
		}
		t.Errorf("%s: %d delivered events are pending again: %s", what, n, strings.Join(parts, "; "))
	}
}

// owned returns the partitions the instance delivers: those its stats list
// as active.
func (in *instance) owned() []int {
	s, ok := in.stats()
	if !ok {
		return nil
	}
	return s.active()
}

// active returns the partitions the stats list as active (none without
// the kafka object).
func (s instanceStats) active() []int {
	if s.Kafka == nil {
		return nil
	}
	var out []int
	for _, p := range s.Kafka.Partitions {
		if p.State == kafka.PartitionActive {
			out = append(out, p.Partition)
		}
	}
	return out
}

// logRecords returns the JSON log records of the current process whose
// message is msg, in order.
func (in *instance) logRecords(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(in.p.log.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), msg) {
			continue
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// logDuration reads a duration attribute of a JSON log record (slog writes
// nanoseconds).
func logDuration(v any) time.Duration {
	ns, _ := v.(float64)
	return time.Duration(ns).Round(time.Millisecond)
}

// logTime is the time of a JSON log record.
func logTime(rec map[string]any) time.Time {
	s, _ := rec["time"].(string)
	at, _ := time.Parse(time.RFC3339Nano, s)
	return at
}

// logTimeline logs the records with one of msgs that the instances logged
// since at, in time order, each with its time since at.
func logTimeline(t *testing.T, at time.Time, msgs []string, ins ...*instance) {
	t.Helper()
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	skip := []string{"time", "level", "msg", "component", "group", "member", "topic", "brokers", "records_per_second"}
	for _, in := range ins {
		for _, msg := range msgs {
			for _, rec := range in.logRecords(msg) {
				when := logTime(rec)
				if when.Before(at) {
					continue
				}
				var attrs []string
				for k, v := range rec {
					if slices.Contains(skip, k) {
						continue
					}
					if k == "took" {
						v = logDuration(v)
					}
					attrs = append(attrs, fmt.Sprintf("%s=%v", k, v))
				}
				slices.Sort(attrs)
				lines = append(lines, line{when, fmt.Sprintf("+%s %s: %s %s", when.Sub(at).Round(time.Millisecond), in.name, msg, strings.Join(attrs, " "))})
			}
		}
	}
	slices.SortFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	for _, l := range lines {
		t.Log(l.text)
	}
}

// restores returns the restore mode of each partition the current process
// restored, by partition (the last restore of each).
func (in *instance) restores() map[int]string {
	out := map[int]string{}
	for _, rec := range in.logRecords("kafka: partition restored") {
		p, ok := rec["partition"].(float64)
		mode, _ := rec["mode"].(string)
		if ok {
			out[int(p)] = mode
		}
	}
	return out
}

// rebuildReasons returns why the current process rebuilt partitions it had
// a local store of, by partition.
func (in *instance) rebuildReasons() map[int]string {
	out := map[int]string{}
	for _, rec := range in.logRecords("kafka: rebuilding the partition store") {
		if p, ok := rec["partition"].(float64); ok {
			out[int(p)], _ = rec["reason"].(string)
		}
	}
	return out
}

// getMetrics reads p's /metrics with the fleet's token, which withToken
// may have set (/metrics asks for it then; without a token it is ignored).
func getMetrics(p *proc) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, p.url("/metrics"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+clusterToken)
	return statsClient.Do(req)
}

// metric returns the sum of the samples of the metric family name whose
// labels contain match ("" for all), and whether there was one.
func (in *instance) metric(name, match string) (float64, bool) {
	if !in.running() {
		return 0, false
	}
	resp, err := getMetrics(in.p)
	if err != nil {
		return 0, false
	}
	text := readAll(in.f.t, resp)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	var sum float64
	found := false
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(m[1], match) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// running returns the instances whose process is alive.
func (f *fleet) running() []*instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*instance
	for _, in := range f.instances {
		if in.running() {
			out = append(out, in)
		}
	}
	return out
}

// pending sums the pending ingested events over the given instances; ok is
// false if one did not answer.
func pending(ins ...*instance) (int, bool) {
	n := 0
	for _, in := range ins {
		s, ok := in.stats()
		if !ok {
			return 0, false
		}
		n += s.pendingIngested()
	}
	return n, true
}

// balanced reports whether every partition is delivered by exactly one of
// ins and each of ins delivers at least one (or, with more instances than
// partitions, whatever the group gave it).
func balanced(ins ...*instance) bool {
	return sharedOnce((*instance).owned, ins...)
}

// sharedOnce reports whether the partitions of ins, as partsOf gives them,
// are every partition exactly once and each of ins has at least one (or,
// with more instances than partitions, whatever the group gave it).
func sharedOnce(partsOf func(*instance) []int, ins ...*instance) bool {
	seen := map[int]bool{}
	for _, in := range ins {
		parts := partsOf(in)
		if len(parts) == 0 && len(ins) <= fleetPartitions {
			return false
		}
		for _, p := range parts {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == fleetPartitions
}

// waitBalanced waits until ins between them own every partition once.
func (f *fleet) waitBalanced(timeout time.Duration, ins ...*instance) time.Duration {
	f.t.Helper()
	began := time.Now()
	names := make([]string, len(ins))
	for i, in := range ins {
		names[i] = in.name
	}
	testkit.WaitFor(f.t, timeout, fmt.Sprintf("the partitions owned once each by %v", names), func() bool { return balanced(ins...) })
	return time.Since(began)
}

// describe is a line per instance, for failure messages and logs.
func describe(ins ...*instance) string {
	var b strings.Builder
	for _, in := range ins {
		s, ok := in.stats()
		fmt.Fprintf(&b, "%s: running=%v owned=%v pending=%d answered=%v restores=%v\n",
			in.name, in.running(), in.owned(), s.pendingIngested(), ok, in.restores())
	}
	return b.String()
}

// producer writes records with an outbox-id header to the ingest topic,
// acknowledged by all in-sync replicas.
type producer struct {
	w  *kafkago.Writer
	tr *kafkago.Transport
}

func (f *fleet) producer() *producer {
	tr := &kafkago.Transport{DialTimeout: time.Second}
	w := &kafkago.Writer{Addr: kafkago.TCP(f.cluster.ListenAddrs()...), Topic: fleetTopic, Transport: tr,
		Balancer: &kafkago.RoundRobin{}, BatchTimeout: time.Millisecond, BatchSize: 500,
		RequiredAcks: kafkago.RequireAll}
	p := &producer{w: w, tr: tr}
	f.t.Cleanup(p.close)
	return p
}

func (p *producer) close() {
	_ = p.w.Close()
	p.tr.CloseIdleConnections()
}

// ids returns n IDs prefix-00000 on.
func ids(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, from+i)
	}
	return out
}

// write produces one record per ID and returns those the broker
// acknowledged.
func (p *producer) write(ctx context.Context, idList []string) ([]string, error) {
	msgs := make([]kafkago.Message, len(idList))
	for i, id := range idList {
		msgs[i] = kafkago.Message{Key: []byte(id), Value: []byte(`{"id":"` + id + `"}`),
			Headers: []kafkago.Header{{Key: kafka.DefaultIDHeader, Value: []byte(id)}}}
	}
	err := p.w.WriteMessages(ctx, msgs...)
	if err == nil {
		return idList, nil
	}
	var we kafkago.WriteErrors
	if !errors.As(err, &we) {
		return nil, err
	}
	var acked []string
	for i, e := range we {
		if e == nil {
			acked = append(acked, idList[i])
		}
	}
	return acked, err
}

// mustWrite produces the records and fails the test unless all were
// acknowledged.
func (p *producer) mustWrite(t *testing.T, idList []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.write(ctx, idList); err != nil {
		t.Fatalf("producing %d records: %v", len(idList), err)
	}
}

// produceLoad produces batches of records at a steady rate until stopped.
type produceLoad struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
}

// startLoad produces perTick records with IDs prefix-N every tick, from a
// goroutine of its own; stop ends and joins it.
func (f *fleet) startLoad(prefix string, perTick int, tick time.Duration) *produceLoad {
	p := f.producer()
	l := &produceLoad{stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(l.done)
		defer cancel()
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; n += perTick {
			select {
			case <-l.stop:
				return
			case <-tk.C:
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			acked, err := p.write(wctx, ids(prefix, n, perTick))
			wcancel()
			l.mu.Lock()
			l.acked = append(l.acked, acked...)
			if err != nil {
				l.failed += perTick - len(acked)
			}
			l.mu.Unlock()
		}
	}()
	f.t.Cleanup(l.end)
	return l
}

// count is the number of records acknowledged so far.
func (l *produceLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *produceLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// finish stops the load, joins its goroutine and returns the IDs of the
// records the broker acknowledged, and the number it did not.
func (l *produceLoad) finish() ([]string, int) {
	l.end()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked), l.failed
}

// ackedCounts returns the number of acknowledged deliveries of each ID.
func (f *fleet) ackedCounts(idList []string) map[string]int {
	out := make(map[string]int, len(idList))
	for _, id := range idList {
		out[id] = f.rc.Acked(id)
	}
	return out
}

// redelivered is the number of acknowledged deliveries of idList beyond
// those counted in before.
func (f *fleet) redelivered(before map[string]int) int {
	n := 0
	for id, c := range before {
		n += f.rc.Acked(id) - c
	}
	return n
}

// duplicates is the number of acknowledged deliveries of idList beyond the
// first of each.
func (f *fleet) duplicates(idList []string) int {
	n := 0
	for _, id := range idList {
		if c := f.rc.Acked(id); c > 1 {
			n += c - 1
		}
	}
	return n
}

// waitDelivered waits until every ID was acknowledged by the receiver at
// least once, and returns how long that took.
func (f *fleet) waitDelivered(timeout time.Duration, idList []string) time.Duration {
	f.t.Helper()
	began := time.Now()
	deadline := began.Add(timeout)
	err := testkit.Poll(context.Background(), 20*time.Millisecond, func() (bool, error) {
		missing := f.rc.missing(idList)
		if len(missing) == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%d of %d records not delivered after %s (first %v); instances:\n%s",
				len(missing), len(idList), timeout, missing[:min(5, len(missing))], describe(f.running()...))
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return time.Since(began)
}

// waitPending waits until the running instances hold n pending ingested
// events between them.
func (f *fleet) waitPending(timeout time.Duration, n int) {
	f.t.Helper()
	last := -1
	deadline := time.Now().Add(timeout)
	err := testkit.Poll(context.Background(), 20*time.Millisecond, func() (bool, error) {
		got, ok := pending(f.running()...)
		if ok {
			last = got
		}
		if ok && got == n {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%d pending events after %s, want %d; instances:\n%s", last, timeout, n, describe(f.running()...))
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// changelogRecord is the last record of one key in the changelog topic.
type changelogRecord struct {
	partition int
	offset    int64
	tombstone bool
	op        string
}

// changelogView reads the changelog topic as it grows, keeping the last
// record of each key (what a compacted topic keeps, and what a restore
// applies when nothing is fenced).
type changelogView struct {
	t     *testing.T
	addr  string
	topic string

	conns []*kafkago.Conn
	next  []int64
	last  map[string]changelogRecord
}

func (v *changelogView) close() {
	for _, c := range v.conns {
		if c != nil {
			c.Close()
		}
	}
}

// refresh reads what was appended since the last call.
func (v *changelogView) refresh() error {
	if v.conns == nil {
		c, err := kafkago.DialContext(context.Background(), "tcp", v.addr)
		if err != nil {
			return err
		}
		parts, err := c.ReadPartitions(v.topic)
		c.Close()
		if err != nil || len(parts) == 0 {
			return fmt.Errorf("changelog topic %s: %d partitions, %v", v.topic, len(parts), err)
		}
		v.conns = make([]*kafkago.Conn, len(parts))
		v.next = make([]int64, len(parts))
	}
	for p := range v.conns {
		if v.conns[p] == nil {
			c, err := kafkago.DialLeader(context.Background(), "tcp", v.addr, v.topic, p)
			if err != nil {
				return err
			}
			v.conns[p] = c
		}
		c := v.conns[p]
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		end, err := c.ReadLastOffset()
		if err != nil {
			c.Close()
			v.conns[p] = nil
			return err
		}
		for v.next[p] < end {
			if _, err := c.Seek(v.next[p], kafkago.SeekAbsolute); err != nil {
				c.Close()
				v.conns[p] = nil
				return err
			}
			batch := c.ReadBatch(1, 16<<20)
			for {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				rec := changelogRecord{partition: p, offset: m.Offset, tombstone: len(m.Value) == 0}
				for _, h := range m.Headers {
					if h.Key == kafka.HeaderOp {
						rec.op = string(h.Value)
					}
				}
				v.last[string(m.Key)] = rec
				v.next[p] = m.Offset + 1
			}
			if err := batch.Close(); err != nil {
				c.Close()
				v.conns[p] = nil
				return err
			}
		}
	}
	return nil
}

// notTombstoned returns the IDs whose last changelog record is not a
// tombstone (or that have none).
func (v *changelogView) notTombstoned(idList []string) []string {
	var out []string
	for _, id := range idList {
		if r, ok := v.last[id]; !ok || !r.tombstone {
			out = append(out, id)
		}
	}
	return out
}

// waitTombstoned waits until the last changelog record of every ID is a
// tombstone: their deliveries are committed and shipped.
func (f *fleet) waitTombstoned(timeout time.Duration, idList []string) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	err := testkit.Poll(context.Background(), 50*time.Millisecond, func() (bool, error) {
		if err := f.view.refresh(); err != nil {
			lastErr = err
		} else if len(f.view.notTombstoned(idList)) == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			left := f.view.notTombstoned(idList)
			return false, fmt.Errorf("%d of %d delivered records have no tombstone in %s after %s (first %v; last read error %v)",
				len(left), len(idList), fleetChangelog, timeout, left[:min(5, len(left))], lastErr)
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}
