//go:build fault

package faults

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

var (
	killsFlag   = flag.Int("kills", 20, "SIGKILLs in the crash loop")
	soakFlag    = flag.Duration("soak", 60*time.Second, "duration of the soak's faulty phase")
	outboxdFlag = flag.String("outboxd", "", "outboxd binary to test (default: built from ./cmd/outboxd)")
	reportFlag  = flag.String("report", "", "append a Markdown summary of each scenario to this file")
)

func TestMain(m *testing.M) {
	if path := os.Getenv(checkEnv); path != "" {
		os.Exit(checkMain(path))
	}
	flag.Parse()
	code := m.Run()
	testkit.RemoveBinaries()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "faults: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// outboxd returns the binary under test: -outboxd, or ./cmd/outboxd built
// once for this test process.
func outboxd(t *testing.T) string {
	t.Helper()
	if *outboxdFlag != "" {
		return *outboxdFlag
	}
	return testkit.BuildBinary(t, "github.com/outboxd/outbox/cmd/outboxd")
}

// report appends a Markdown section to the -report file, if any.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf(format, args...)
	if *reportFlag == "" {
		return
	}
	f, err := os.OpenFile(*reportFlag, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n\n", args...)
}

// ---- the sidecar process ----

// sidecar is one run of the real outboxd binary.
type sidecar struct {
	*testkit.Process
	t    *testing.T
	addr string
	logs *lockedBuffer
}

// lockedBuffer collects the process's output for the failure message.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	errors int // lines logged at level ERROR, including those cut
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors += bytes.Count(p, []byte("level=ERROR")) + bytes.Count(p, []byte(`"level":"ERROR"`))
	if l.b.Len() > 1<<20 {
		l.b.Reset()
		l.b.WriteString("[earlier output cut]\n")
	}
	return l.b.Write(p)
}

// errorLines counts the lines logged at level ERROR so far.
func (l *lockedBuffer) errorLines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errors
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > 8<<10 {
		s = "…" + s[len(s)-8<<10:]
	}
	return s
}

// start runs "outboxd serve --db db --listen addr args..." and waits until
// /readyz answers 200.
func start(t *testing.T, db, addr string, args ...string) *sidecar {
	t.Helper()
	full := append([]string{"serve", "--db", db, "--listen", addr, "--log-level", "warn"}, args...)
	s := &sidecar{t: t, addr: addr, logs: &lockedBuffer{}}
	cmd := exec.Command(outboxd(t), full...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	s.Process = testkit.StartProcess(t, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := testkit.Poll(ctx, 10*time.Millisecond, func() (bool, error) {
		if s.Exited() {
			return false, fmt.Errorf("outboxd exited: %v", s.Err())
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("outboxd %s not ready: %v\noutput:\n%s", strings.Join(full, " "), err, s.logs)
	}
	return s
}

// cleanEnv is this process's environment without OUTBOXD_* settings, so
// that only the flags of each test configure the sidecar.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOXD_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill sends SIGKILL and waits until the process is gone (and its file lock
// with it).
func (s *sidecar) kill() {
	s.t.Helper()
	if err := s.Kill(); err != nil {
		s.t.Fatalf("SIGKILL: %v", err)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *sidecar) stop() {
	s.t.Helper()
	if _, err := s.Stop(syscall.SIGTERM, 60*time.Second); err != nil {
		_ = s.Kill()
		s.t.Fatalf("outboxd did not exit within 60s of SIGTERM (%v)\noutput:\n%s", err, s.logs)
	}
	if err := s.Err(); err != nil {
		s.t.Fatalf("outboxd exited with %v after SIGTERM\noutput:\n%s", err, s.logs)
	}
}

// stats is GET /v1/stats.
type stats struct {
	Pending        int     `json:"pending"`
	Dead           int     `json:"dead"`
	InFlight       int     `json:"in_flight"`
	DeliveredTotal uint64  `json:"delivered_total"`
	FailedTotal    uint64  `json:"failed_total"`
	OldestPending  float64 `json:"oldest_pending_age_seconds"`
}

func (s *sidecar) stats() (stats, error) {
	var st stats
	resp, err := http.Get("http://" + s.addr + "/v1/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/stats: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// metrics returns the sidecar's own Prometheus samples whose names are
// listed (gauges and counters without labels).
func (s *sidecar) metrics(names ...string) (map[string]float64, error) {
	resp, err := http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if v, ok := strings.CutPrefix(line, n+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil {
					out[n] = f
				}
			}
		}
	}
	return out, sc.Err()
}

// rss is the process's resident set size from /proc.
func (s *sidecar) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// ---- the database file, offline ----

// checkEnv, when set to a database path, makes the test binary a checker:
// it runs bbolt's consistency check on that file, prints each problem on a
// line and exits with status 1 if there was any. bbolt's check panics (in a
// goroutine of its own, where no recover can reach) on some damaged pages,
// so it runs in a child process and a crash there is a finding, not the end
// of the suite.
const checkEnv = "FAULTS_CHECK_DB"

func checkMain(path string) int {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer db.Close()
	bad := 0
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			fmt.Println(err)
			bad++
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		bad++
	}
	if bad > 0 {
		return 1
	}
	return 0
}

// checkDB runs bbolt's consistency check (tx.Check) on a closed database
// file, in a child process, and returns every problem it reports.
func checkDB(path string) (problems []string) {
	exe, err := os.Executable()
	if err != nil {
		return []string{err.Error()}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), checkEnv+"="+path)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line != "" && len(problems) < 20 {
			problems = append(problems, line)
		}
	}
	if len(problems) == 0 {
		problems = append(problems, "checker failed: "+err.Error())
	}
	return problems
}

// pendingIDs opens a closed database file read-only through the store and
// returns the IDs of its pending events.
func pendingIDs(path string) (map[string]bool, error) {
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ids := make(map[string]bool)
	for after := ""; ; {
		recs, next, err := st.List(store.ListQuery{State: store.StatePending, After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			ids[r.ID] = true
		}
		if next == "" {
			return ids, nil
		}
		after = next
	}
}

// copyFile copies a closed file.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
