package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, resp.Status)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed, first: %v", n, b.N, firstErr.Load())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(b.N*perRequest)/elapsed.Seconds(), "events/s")
	if cpu1, ok := processCPU(pid); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "server-cpu-µs/req")
	}
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
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = rc.Serve(ln)
		}()
		dir := b.TempDir()
		p := start(b, dir, "--endpoint", "sink=http://"+ln.Addr().String()+"/,allow-private,timeout=1h",
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
		_ = rc.Close()
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
