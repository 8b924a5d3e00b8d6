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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// baselineEnv, when set, makes the test binary serve the baseline instead of
// running tests: a minimal net/http handler that reads the body and answers
// 202 without storing anything. It runs as its own process, like outboxd,
// so both sides of the comparison pay the same loopback and process costs.
const baselineEnv = "OUTBOXD_BENCH_BASELINE"

// serveBaseline runs the baseline server until killed; it prints its
// address on stdout.
func serveBaseline() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ids":["x"]}` + "\n"))
	}))
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// startBaseline starts the test binary as the baseline server.
func startBaseline(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), baselineEnv+"=1")
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
	return strings.TrimSpace(addr)
}

// eventJSON is one benchmark event: about 150 bytes of JSON.
func eventJSON(n int) string {
	return fmt.Sprintf(`{"destination":"sink","key":"customer-%d","payload":{"order":%d,"status":"paid","total":"129.90","currency":"EUR"}}`, n%1000, n)
}

// load sends b.N requests of body from 64 concurrent clients to url and
// reports requests and events per second.
func load(b *testing.B, url string, body []byte, perRequest int) {
	b.Helper()
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
}

// BenchmarkIngest measures HTTP ingest with 64 concurrent clients, single
// events and batches of 100, against outboxd (fsync on every commit) and a
// baseline handler that stores nothing, in the same run. Compare the
// events/s of outboxd with the baseline's:
//
//	go test -run '^$' -bench Ingest -benchtime 20000x ./cmd/outboxd/
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

	baseline := "http://" + startBaseline(b) + "/v1/events"
	b.Run("baseline/single", func(b *testing.B) { load(b, baseline, single, 1) })
	b.Run("baseline/batch100", func(b *testing.B) { load(b, baseline, batchBody, 100) })

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
		p := startBench(b, dir, "--endpoint", "sink=http://"+ln.Addr().String()+"/,allow-private,timeout=1h",
			"--max-body-bytes", "5MiB")
		url := p.url("/v1/events")
		metrics := p.url("/metrics")
		b.Run("outboxd-"+mode+"/single", func(b *testing.B) { withCommits(b, metrics, func() { load(b, url, single, 1) }) })
		b.Run("outboxd-"+mode+"/batch100", func(b *testing.B) { withCommits(b, metrics, func() { load(b, url, batchBody, 100) }) })
		_ = p.cmd.Process.Kill()
		<-p.done
		_ = rc.Close()
		<-served
	}
}

// startBench is start for benchmarks.
func startBench(b *testing.B, dir string, args ...string) *proc {
	b.Helper()
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	lw := &logWriter{listening: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &proc{cmd: cmd, log: lw, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case p.addr = <-lw.listening:
	case <-p.done:
		b.Fatalf("outboxd exited: %v\n%s", p.err, lw)
	case <-timer.C:
		b.Fatalf("outboxd did not listen:\n%s", lw)
	}
	return p
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
