package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
)

// baselineEnv, when set, makes the test binary serve the baseline instead of
// running tests: a minimal net/http handler that reads the body and answers
// 202 without storing anything. It runs as its own process, like outboxd,
// so both sides of the comparison pay the same loopback and process costs.
const baselineEnv = "OUTBOXD_BENCH_BASELINE"

// floorEnv, when set to a directory, makes the test binary serve the floor
// of a durable ingest instead: the baseline's handler, except that it
// answers only once the body is stored durably, through a group commit into
// a file in that directory written by store.Floor (the store's
// layout, three puts per event, with bbolt alone). No decoding, no
// validation, no metrics: what any server that keeps the design's layout
// in bbolt pays per request, whatever else it does.
const floorEnv = "OUTBOXD_BENCH_FLOOR"

// serveBaseline runs the baseline server until killed; it prints its
// address on stdout.
func serveBaseline() {
	serveHelper(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ids":["x"]}` + "\n"))
	}))
}

// serveFloor runs the floor server until killed; it prints its address on
// stdout.
func serveFloor(dir string) {
	f, err := store.OpenFloor(filepath.Join(dir, "floor.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	writes := make(chan *floorWrite, 1024)
	go floorCommitter(f, writes)
	var seq atomic.Uint64
	serveHelper(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 5<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fw := &floorWrite{id: fmt.Appendf(nil, "%020d", seq.Add(1)), body: body, done: make(chan error, 1)}
		writes <- fw
		if err := <-fw.done; err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(fmt.Appendf(nil, `{"ids":[%q]}`+"\n", fw.id))
	}))
}

// floorWrite is one request's body waiting for the floor's group commit.
type floorWrite struct {
	id, body []byte
	done     chan error
}

// floorCommitter commits whatever writes queued during the previous commit
// in one transaction, as the store's committer does; the body is both the
// record and the changelog entry.
func floorCommitter(f *store.Floor, writes <-chan *floorWrite) {
	batch := make([]*floorWrite, 0, 1024)
	evs := make([]store.FloorEvent, 0, 1024)
	for fw := range writes {
		batch = append(batch[:0], fw)
	gather:
		for len(batch) < cap(batch) {
			select {
			case fw := <-writes:
				batch = append(batch, fw)
			default:
				break gather
			}
		}
		evs = evs[:0]
		for _, fw := range batch {
			evs = append(evs, store.FloorEvent{ID: fw.id, Record: fw.body, Entry: fw.body})
		}
		err := f.Write(evs)
		for _, fw := range batch {
			fw.done <- err
		}
	}
}

// serveHelper serves h on a loopback port until killed, printing the
// address on stdout.
func serveHelper(h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	err = http.Serve(ln, h)
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// helper is a server process started from the test binary.
type helper struct {
	addr string
	pid  int
}

// startHelper starts the test binary as a server, with env set.
func startHelper(b *testing.B, env string) helper {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return helper{addr: strings.TrimSpace(addr), pid: cmd.Process.Pid}
}

// processCPU returns the user plus system CPU time process pid has used,
// from /proc (Linux); ok is false where that cannot be read.
func processCPU(pid int) (cpu time.Duration, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime and stime the 12th and 13th,
	// in clock ticks (USER_HZ, 100 on Linux's architectures).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// eventJSON is one benchmark event: about 150 bytes of JSON.
func eventJSON(n int) string {
	return fmt.Sprintf(`{"destination":"sink","key":"customer-%d","payload":{"order":%d,"status":"paid","total":"129.90","currency":"EUR"}}`, n%1000, n)
}

// load sends b.N requests of body from 64 concurrent clients to url and
// reports requests and events per second, and the CPU the server (process
// pid) used per request where the system tells it.
func load(b *testing.B, url string, body []byte, perRequest, pid int) {
	b.Helper()
	cpu0, cpuOK := processCPU(pid)
	const clients = 64
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: time.Minute}
	concurrently(b, clients, perRequest, "requests", func() error {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return errors.New(resp.Status)
		}
		return nil
	})
	if cpu1, ok := processCPU(pid); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/req")
	}
}

// concurrently makes b.N calls of call from clients goroutines, timed,
// fails the benchmark when any failed (what names them, with the first
// error), and reports calls (req/s) and, at perCall events a call, events
// per second.
func concurrently(b *testing.B, clients, perCall int, what string, call func() error) {
	b.Helper()
	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	began := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := call(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d %s failed, first: %v", n, b.N, what, firstErr.Load())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(b.N*perCall)/elapsed.Seconds(), "events/s")
}

// BenchmarkIngest measures HTTP ingest with 64 concurrent clients, single
// events and batches of 100, against outboxd (fsync on every commit) and a
// baseline handler that stores nothing, in the same run. Compare the
// events/s of outboxd with the baseline's:
//
//	go test -run '^$' -bench Ingest -benchtime 20000x ./cmd/outboxd/
//
// "floor" is the least a durable single-event ingest costs with the
// design's store: a handler that only writes the body in the store's layout
// through a bbolt group commit (see floorEnv). outboxd's distance from it is
// what decoding, validation, metrics and the store's own checks cost; its
// distance from the baseline above that is the durable commit's. Every
// server's CPU per request is reported beside its rate (Linux).
//
// "ingest" isolates ingest: deliveries hang at the receiver, so after the
// first ones nothing but ingest writes to the store; "delivering" lets the
// outbox deliver to a fast local receiver at the same time (each event is
// then written twice: enqueued, and deleted once delivered). outboxd's runs
// also report its store commits (records/commit, ms/commit) from /metrics.
func BenchmarkIngest(b *testing.B) {
	single := []byte(eventJSON(1))
	var batch strings.Builder
	batch.WriteByte('[')
	for i := range 100 {
		if i > 0 {
			batch.WriteByte(',')
		}
		batch.WriteString(eventJSON(i))
	}
	batch.WriteByte(']')
	batchBody := []byte(batch.String())

	base := startHelper(b, baselineEnv+"=1")
	baseline := "http://" + base.addr + "/v1/events"
	b.Run("baseline/single", func(b *testing.B) { load(b, baseline, single, 1, base.pid) })
	b.Run("baseline/batch100", func(b *testing.B) { load(b, baseline, batchBody, 100, base.pid) })
	floor := startHelper(b, floorEnv+"="+b.TempDir())
	floorURL := "http://" + floor.addr + "/v1/events"
	b.Run("floor/single", func(b *testing.B) { load(b, floorURL, single, 1, floor.pid) })

	for _, mode := range []string{"ingest", "delivering"} {
		rc := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if mode == "ingest" {
				// Deliveries hang: the first ones fill the delivery
				// concurrency and the rest wait in the store, so that
				// only ingest writes to it.
				<-r.Context().Done()
				return
			}
			w.WriteHeader(http.StatusNoContent)
		})}
		addr, stop := serveLoopback(b, &rc)
		dir := b.TempDir()
		p := start(b, dir, "--endpoint", "sink=http://"+addr+"/,allow-private,timeout=15m",
			"--max-body-bytes", "5MiB")
		url := p.url("/v1/events")
		metrics := p.url("/metrics")
		pid := p.cmd.Process.Pid
		b.Run("outboxd-"+mode+"/single", func(b *testing.B) {
			withCommits(b, metrics, func() { load(b, url, single, 1, pid) })
		})
		b.Run("outboxd-"+mode+"/batch100", func(b *testing.B) {
			withCommits(b, metrics, func() { load(b, url, batchBody, 100, pid) })
		})
		_ = p.cmd.Process.Kill()
		<-p.done
		stop()
	}
}

// serveLoopback serves srv on a loopback port and returns its address and
// a stop that closes srv (ending the requests it holds) and waits until
// its Serve has returned.
func serveLoopback(tb testing.TB, srv *http.Server) (addr string, stop func()) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		_ = srv.Close()
		<-served
	}
}

// withCommits runs fn and reports outboxd's store commits in it, from the
// outbox_store_commit_* counters at metricsURL: records per commit (how well
// the group commit gathers concurrent requests) and milliseconds per commit.
func withCommits(b *testing.B, metricsURL string, fn func()) {
	b.Helper()
	before := commitCounters(b, metricsURL)
	fn()
	after := commitCounters(b, metricsURL)
	commits := after["outbox_store_commits_total"] - before["outbox_store_commits_total"]
	if commits <= 0 {
		b.Fatalf("no store commits counted in %s", metricsURL)
	}
	records := after["outbox_store_commit_records_total"] - before["outbox_store_commit_records_total"]
	secs := after["outbox_store_commit_seconds_total"] - before["outbox_store_commit_seconds_total"]
	b.ReportMetric(records/commits, "records/commit")
	b.ReportMetric(secs*1000/commits, "ms/commit")
}

// commitCounters reads the outbox_store_commit* samples of a Prometheus
// text exposition.
func commitCounters(b *testing.B, url string) map[string]float64 {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "outbox_store_commit") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("%s: %q: %v", url, sc.Text(), err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// benchFailoverRecords is the number of pending events of
// BenchmarkFailover, from $BENCH_FAILOVER_RECORDS (default 100,000).
var benchFailoverRecords = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_FAILOVER_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}()

// failoverTuning is the Kafka tuning of BenchmarkFailover's instances: a
// session timeout of 1s (kfake's minimum is set to 100ms; below a second a
// loaded two-core machine expires members that are alive), heartbeats
// every 100ms, and the tests' short intervals.
const failoverTuning = `kafka:
  commit_interval: 50ms
  session_timeout: 1s
  heartbeat_interval: 100ms
  rebalance_timeout: 2s
  handover_timeout: 2s
  ship_interval: 10ms
  retry_backoff: 20ms
  retry_backoff_max: 200ms
  dial_timeout: 1s
`

// failoverReceiver answers 503 after holding each request for a while
// (so that only a few events spend an attempt and the rest stay due),
// until it is switched to answering 204 at once; it then records when it
// first got one of the events of a given set of partitions.
type failoverReceiver struct {
	srv      *httptest.Server
	hold     time.Duration
	accept   atomic.Bool
	killed   atomic.Pointer[map[string]bool] // partitions, as in the event IDs
	first    atomic.Int64                    // UnixNano of the first such 204
	accepted atomic.Int64
}

func newFailoverReceiver(hold time.Duration) *failoverReceiver {
	fr := &failoverReceiver{hold: hold}
	fr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !fr.accept.Load() {
			t := time.NewTimer(fr.hold)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fr.accepted.Add(1)
		// IDs are kafka:<topic>:<partition>:<offset>.
		if parts := strings.Split(r.Header.Get("webhook-id"), ":"); len(parts) == 4 {
			if m := fr.killed.Load(); m != nil && (*m)[parts[2]] {
				fr.first.CompareAndSwap(0, time.Now().UnixNano())
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return fr
}

// logRecord is one JSON log line of outboxd's, the fields the failover
// benchmark reads.
type logRecord struct {
	Time       time.Time     `json:"time"`
	Msg        string        `json:"msg"`
	Generation int32         `json:"generation"`
	Partitions []int         `json:"partitions"`
	Partition  int           `json:"partition"`
	Mode       string        `json:"mode"`
	Records    int64         `json:"records"`
	Took       time.Duration `json:"took"` // slog's JSON: nanoseconds
}

// kafkaLog returns the records of p's log with a msg starting "kafka: ".
func kafkaLog(p *proc) []logRecord {
	var out []logRecord
	for _, line := range strings.Split(p.log.String(), "\n") {
		var rec logRecord
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "kafka: ") {
			out = append(out, rec)
		}
	}
	return out
}

// lastAssignment returns the generation and partitions of p's latest
// "partitions assigned" line (0 and nil without one).
func lastAssignment(p *proc) (int32, []int) {
	var gen int32
	var parts []int
	for _, rec := range kafkaLog(p) {
		if rec.Msg == "kafka: partitions assigned" && rec.Generation >= gen {
			gen, parts = rec.Generation, rec.Partitions
		}
	}
	return gen, parts
}

// BenchmarkFailover measures, with the real outboxd binary, how long the
// events of a lost instance wait: three instances in one group on a
// 6-partition topic (kfake in the test process) hold
// $BENCH_FAILOVER_RECORDS pending events (default 100,000), their receiver
// answering 503; one instance is killed (SIGKILL) and its state directory
// deleted, the receiver switches to 204, and the time runs from the kill
// to the receiver's first 204 to an event of the killed instance's
// partitions, delivered by a survivor. It is split, from the survivors'
// logs, into the group's rebalance (the kill to the first "kafka:
// partitions assigned" of the next generation: the session timeout, the
// survivors' hand-over of their own partitions and the rejoin) and the
// restores of the killed instance's partitions (the longest "took" of
// their "kafka: partition restored" lines); what is left is the fence,
// the start of the stores and the first dispatch. Session timeout 1s,
// heartbeat 100ms (failoverTuning).
//
//	go test -run '^$' -bench Failover -benchtime 1x ./cmd/outboxd/
func BenchmarkFailover(b *testing.B) {
	if testing.Short() {
		b.Skip("starts three outboxd instances and fills them with 100,000 events")
	}
	var sum failoverTimes
	for range b.N {
		f := failoverOnce(b, benchFailoverRecords)
		sum.total += f.total
		sum.rebalance += f.rebalance
		sum.restore += f.restore
		sum.restoreAll += f.restoreAll
		sum.records += f.records
	}
	n := float64(b.N)
	b.ReportMetric(sum.total.Seconds()/n, "failover-s")
	b.ReportMetric(sum.rebalance.Seconds()/n, "rebalance-s")
	b.ReportMetric(sum.restore.Seconds()/n, "restore-s")
	b.ReportMetric(sum.restoreAll.Seconds()/n, "restore-all-s")
	b.ReportMetric(float64(sum.records)/n, "restored-records")
}

// failoverOnce runs one failover of BenchmarkFailover with n events and
// returns the time from the kill to the first redelivery, its rebalance
// and restore parts, how long the slowest of the killed partitions'
// restores took, and the records they read.
func failoverOnce(b *testing.B, n int) failoverTimes {
	b.Helper()
	var total, rebalance, restore, restoreAll time.Duration
	var records int64
	const parts, instances = 6, 3
	cluster := newEventsCluster(b, parts)
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fr := newFailoverReceiver(200 * time.Millisecond)
	defer fr.srv.Close()

	base := b.TempDir()
	tuning := writeTuning(b, base, failoverTuning)
	// A 503 spends an attempt and waits an hour: the events not yet
	// attempted stay due.
	dirs, procs := startInstances(b, base, instances, "--config", tuning, "--endpoint", "orders="+fr.srv.URL+"/hook,allow-private",
		"--kafka-brokers", strings.Join(brokers, ","), "--kafka-topic", "events", "--kafka-group", "failover",
		"--kafka-destination", "orders", "--backoff-initial", "1h", "--backoff-max", "1h")

	tr := &kafkago.Transport{DialTimeout: time.Second}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	writeOrders(ctx, b, brokers, tr, &kafkago.RoundRobin{}, n)

	// Every record ingested and its entry shipped (the group commits an
	// offset only then), in a settled generation that shares the six
	// partitions among the three.
	cl := &kafkago.Client{Addr: kafkago.TCP(brokers...), Transport: tr, Timeout: 5 * time.Second}
	ids := make([]int, parts)
	for i := range ids {
		ids[i] = i
	}
	testkit.WaitFor(b, 5*time.Minute, "every record ingested and shipped, in a settled generation", func() bool {
		if committed, ok := committedOffsets(ctx, cl, "failover", ids); !ok || committed < int64(n) {
			return false
		}
		first, owned := int32(0), 0
		for i, p := range procs {
			g, ps := lastAssignment(p)
			if i > 0 && g != first {
				return false
			}
			first, owned = g, owned+len(ps)
		}
		return owned == parts
	})
	gen, _ := lastAssignment(procs[0])
	victim := 1
	_, lost := lastAssignment(procs[victim])
	killed := map[string]bool{}
	for _, p := range lost {
		killed[strconv.Itoa(p)] = true
	}
	fr.killed.Store(&killed)

	if err := procs[victim].cmd.Process.Kill(); err != nil {
		b.Fatal(err)
	}
	kill := time.Now()
	<-procs[victim].done
	if err := os.RemoveAll(dirs[victim]); err != nil {
		b.Fatal(err)
	}
	fr.accept.Store(true)
	testkit.WaitFor(b, 5*time.Minute, "the first redelivery of the killed instance's events", func() bool { return fr.first.Load() != 0 })
	total = time.Unix(0, fr.first.Load()).Sub(kill)

	// The split, from the survivors' logs of the next generations.
	var tk takeOver
	testkit.WaitFor(b, time.Minute, "the survivors' logs of the next generation's assignment and restores", func() bool {
		return tk.seen(procs, victim, gen, lost)
	})
	// The first of them restored is the first to deliver.
	var firstDone time.Time
	for p, rec := range tk.restored {
		if firstDone.IsZero() || rec.Time.Before(firstDone) {
			firstDone, restore = rec.Time, rec.Took
		}
		restoreAll = max(restoreAll, rec.Took)
		records += rec.Records
		b.Logf("partition %d restored (%s): %d records in %s", p, rec.Mode, rec.Records, rec.Took)
	}
	rebalance = tk.assigned.Sub(kill)
	b.Logf("killed instance %d (partitions %v, generation %d); first redelivery after %s: rebalance %s, restore %s "+
		"(of the first partition restored; all in %s), the rest %s",
		victim, lost, gen, total.Round(time.Millisecond), rebalance.Round(time.Millisecond), restore.Round(time.Millisecond),
		restoreAll.Round(time.Millisecond), (total - rebalance - restore).Round(time.Millisecond))
	for i, p := range procs {
		if i != victim {
			p.signal(syscall.SIGTERM, 30*time.Second)
		}
	}
	return failoverTimes{total: total, rebalance: rebalance, restore: restore, restoreAll: restoreAll, records: records}
}

// failoverTimes are the figures of one failover.
type failoverTimes struct {
	total, rebalance, restore, restoreAll time.Duration
	records                               int64
}
