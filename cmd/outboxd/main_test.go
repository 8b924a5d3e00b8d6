package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/outboxd/outbox/internal/openapitest"
	"github.com/outboxd/outbox/internal/testkit"
)

// binary is the outboxd built once for all end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(baselineEnv) != "" {
		serveBaseline()
	}
	if dir := os.Getenv(floorEnv); dir != "" {
		serveFloor(dir)
	}
	var err error
	if binary, err = testkit.Build("."); err != nil {
		fmt.Fprintln(os.Stderr, "building outboxd:", err)
		os.Exit(1)
	}
	code := m.Run()
	client.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	testkit.RemoveBinaries()
	os.Exit(code)
}

// childEnv is the environment of the outboxd processes: the test's, and a
// race detector (when built with it) that exits without its default 1s
// pause, so that exit times measure outboxd.
func childEnv() []string {
	return append(os.Environ(), "GORACE=atexit_sleep_ms=0")
}

// testSecret signs deliveries to the test receivers.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// proc is one running outboxd.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	log  *logWriter
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
	addr string
}

// logWriter keeps the process's stderr and spots the "listening" line.
type logWriter struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	partial   []byte
	listening chan string
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := w.partial[:i]
		w.partial = w.partial[i+1:]
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
			select {
			case w.listening <- rec.Addr:
			default:
			}
		}
	}
	return len(p), nil
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// run runs outboxd with args to completion and returns its exit code and
// combined output.
func run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("outboxd %v: %v", args, err)
	}
	return 0, string(out)
}

// start starts outboxd serve in dir with args (plus --listen 127.0.0.1:0
// and JSON logs) and waits until it listens.
func start(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	p := startNoWait(t, dir, args...)
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case p.addr = <-p.log.listening:
	case <-p.done:
		t.Fatalf("outboxd exited before listening (%v):\n%s", p.err, p.log)
	case <-timer.C:
		t.Fatalf("outboxd did not listen within 20s:\n%s", p.log)
	}
	return p
}

func startNoWait(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	lw := &logWriter{listening: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = lw, lw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, log: lw, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if strings.Contains(lw.String(), "DATA RACE") {
			t.Errorf("the race detector reported a race in outboxd")
		}
		if t.Failed() {
			t.Logf("outboxd log:\n%s", lw)
		}
	})
	return p
}

// url returns the address of path on the server.
func (p *proc) url(path string) string { return "http://" + p.addr + path }

// signal sends sig and waits up to limit for the process to exit; it
// returns how long that took.
func (p *proc) signal(sig os.Signal, limit time.Duration) time.Duration {
	p.t.Helper()
	began := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.t.Fatalf("outboxd still running %s after %v:\n%s", limit, sig, p.log)
	}
	return time.Since(began)
}

// exitCode is the exit code once the process has exited (-1 when killed).
func (p *proc) exitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends a request and decodes a JSON object answer.
func call(t *testing.T, method, url, token string, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	openapitest.Check(t, req, []byte(body), resp.StatusCode, resp.Header, b)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d, body %q is not a JSON object", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, m
}

// receiver is a webhook receiver on loopback that records what it got, by
// webhook-id, and answers with the status its respond func picks (204
// without one).
type receiver struct{ *testkit.Receiver }

func newReceiver(t *testing.T, respond func(r *http.Request, id string) int) receiver {
	t.Helper()
	return receiver{testkit.NewReceiver(t, "webhook-id", answer(respond))}
}

func answer(respond func(r *http.Request, id string) int) testkit.Answer {
	if respond == nil {
		return nil
	}
	return func(r *http.Request, id string, _ int) testkit.Reply { return testkit.Reply{Status: respond(r, id)} }
}

// holdUntil answers each request 204 once release is closed, or 503 if the
// sender gives up first, counting in inFlight the requests it holds.
func holdUntil(release <-chan struct{}, inFlight *atomic.Int64) func(r *http.Request, id string) int {
	return func(r *http.Request, _ string) int {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select {
		case <-release:
			return http.StatusNoContent
		case <-r.Context().Done():
			return http.StatusServiceUnavailable
		}
	}
}

func (rc receiver) setRespond(fn func(r *http.Request, id string) int) { rc.SetAnswer(answer(fn)) }

func (rc receiver) ackedCount(id string) int { return rc.Acked(id) }

func (rc receiver) attemptCount(id string) int { return rc.Attempts(id) }

// missing returns the IDs of ids the receiver has not acknowledged.
func (rc receiver) missing(ids []string) []string { return rc.Missing(ids) }

// badSignatures returns the IDs of the requests whose signature does not
// verify with testSecret, in arrival order.
func (rc receiver) badSignatures() []string {
	var bad []string
	for _, r := range rc.Requests() {
		if !verify(r.Header, r.Body) {
			bad = append(bad, r.ID)
		}
	}
	return bad
}

// lastHeader is the header of the last request received.
func (rc receiver) lastHeader() http.Header {
	reqs := rc.Requests()
	if len(reqs) == 0 {
		return nil
	}
	return reqs[len(reqs)-1].Header
}

// verify checks the Standard Webhooks signature with testSecret.
func verify(h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(testSecret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", h.Get("webhook-id"), h.Get("webhook-timestamp"))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

func (rc receiver) endpoint(name string) string {
	return name + "=" + rc.URL + "/hook,secret=" + testSecret + ",allow-private"
}
