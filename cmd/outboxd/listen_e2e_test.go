package main

import (
	"encoding/base64"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// listenProc is one running outboxd listen.
type listenProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *testkit.Buffer
	done chan struct{}
	addr string
}

var listenBanner = regexp.MustCompile(`receiving deliveries at http://(\S+) `)

// startListen starts outboxd listen on a free loopback port with args and
// waits until it receives.
func startListen(t *testing.T, args ...string) *listenProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"listen", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = childEnv()
	out := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := &listenProc{t: t, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		select {
		case <-l.done:
		default:
			_ = cmd.Process.Kill()
			<-l.done
		}
		if strings.Contains(out.String(), "DATA RACE") {
			t.Errorf("the race detector reported a race in outboxd listen")
		}
		if t.Failed() {
			t.Logf("outboxd listen output:\n%s", out)
		}
	})
	testkit.WaitFor(t, 20*time.Second, "outboxd listen to receive", func() bool {
		select {
		case <-l.done:
			t.Fatalf("outboxd listen exited: %s", out)
		default:
		}
		m := listenBanner.FindStringSubmatch(out.String())
		if m != nil {
			l.addr = m[1]
		}
		return m != nil
	})

	return l
}

// delivery waits until listen has printed a delivery of id whose block
// holds want, and returns that block.
func (l *listenProc) delivery(id, want string) string {
	l.t.Helper()
	var block string
	testkit.WaitFor(l.t, 10*time.Second, "listen to print "+id+" with "+want, func() bool {
		for b := range strings.SplitSeq(l.out.String(), "\n\n") {
			if strings.Contains(b, "webhook-id "+id+" ") && strings.Contains(b, want) {
				block = b
				return true
			}
		}
		return false
	})

	return block
}

// stop sends SIGINT and waits for a clean exit.
func (l *listenProc) stop() {
	l.t.Helper()
	if err := l.cmd.Process.Signal(syscall.SIGINT); err != nil {
		l.t.Fatal(err)
	}
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-l.done:
	case <-timer.C:
		l.t.Fatalf("outboxd listen still running 10s after SIGINT")
	}
	if code := l.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(l.out.String(), "outboxd listen: stopped") {
		l.t.Errorf("after SIGINT: exit code %d, output %q; want 0 and \"stopped\"", code, l.out)
	}
}

func eventState(t *testing.T, p *proc, id string) map[string]any {
	t.Helper()
	_, m := call(t, "GET", p.url("/v1/events/"+id), "", "")
	return m
}

// The quick start: serve delivers to listen, listen prints the delivery
// with its headers and payload and verifies its signature with the shared
// secret, and serve reports the event delivered. A payload with control
// bytes is printed escaped, a large one cut.
func TestListenVerifiesWhatServeDelivers(t *testing.T) {
	l := startListen(t, "--secret", testSecret)
	p := start(t, t.TempDir(), "--endpoint", "local=http://"+l.addr+"/hook,secret="+testSecret+",allow-private")

	code, m := call(t, "POST", p.url("/v1/events"), "", `{"id":"order-42","destination":"local","payload":{"order":42}}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	block := l.delivery("order-42", "signature verified")
	for _, want := range []string{"POST /hook", "webhook-id order-42 (received 1 time)", "Idempotency-Key: order-42",
		"Webhook-Signature: v1,", "Webhook-Timestamp: ", `payload (12 bytes): {"order":42}`, "answered 200"} {
		if !strings.Contains(block, want) {
			t.Errorf("listen's report lacks %q:\n%s", want, block)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "GET to say delivered", func() bool { return eventState(t, p, "order-42")["state"] == "delivered" })
	// The same ID again is a duplicate: answered, and still delivered.
	if code, m := call(t, "POST", p.url("/v1/events"), "", `{"id":"order-42","destination":"local","payload":{"order":42}}`); code != http.StatusAccepted {
		t.Fatalf("POST again: %d %v", code, m)
	}
	if st := eventState(t, p, "order-42")["state"]; st != "delivered" {
		t.Errorf("after posting it again the event is %v, want still delivered", st)
	}

	raw := "\x1b[2J\x1b[31mred\nline two\xff" + strings.Repeat("A", 10_000)
	body := `{"id":"raw-1","destination":"local","payload_base64":"` + base64.StdEncoding.EncodeToString([]byte(raw)) + `"}`
	if code, m := call(t, "POST", p.url("/v1/events"), "", body); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	block = l.delivery("raw-1", "signature verified")
	if !strings.Contains(block, `payload (10022 bytes): \x1b[2J\x1b[31mred\nline two\xffAAA`) ||
		!strings.Contains(block, "more bytes not shown") {
		t.Errorf("payload not printed escaped and cut:\n%.300s", block)
	}
	if strings.Contains(l.out.String(), "\x1b") || strings.Contains(l.out.String(), "\xff") || strings.Contains(block, strings.Repeat("A", 5000)) {
		t.Error("listen printed raw control bytes or the whole payload")
	}
	if strings.Contains(l.out.String(), strings.TrimPrefix(testSecret, "whsec_")) {
		t.Error("listen printed the secret")
	}
	if strings.Contains(p.log.String(), "no endpoint is configured") {
		t.Error("serve with an endpoint logged the no-endpoint hint")
	}
	l.stop()
}

// A secret that is not the endpoint's: listen says the signature does not
// verify and answers 401, which makes the event a dead letter.
func TestListenReportsAWrongSecret(t *testing.T) {
	l := startListen(t, "--secret", "whsec_bm90IHRoZSBzZWNyZXQgb2YgdGhpcyBlbmRwb2ludA==")
	p := start(t, t.TempDir(), "--endpoint", "local=http://"+l.addr+"/hook,secret="+testSecret+",allow-private")
	call(t, "POST", p.url("/v1/events"), "", `{"id":"forged-1","destination":"local","payload":{}}`)
	block := l.delivery("forged-1", "answered")
	if !strings.Contains(block, "✗ signature not verified: signature does not match") || !strings.Contains(block, "answered 401") {
		t.Errorf("listen's report:\n%s\nwant \"signature not verified\" and a 401", block)
	}
	if strings.Contains(block, "✓") {
		t.Errorf("listen reported a wrong secret as verified:\n%s", block)
	}
	testkit.WaitFor(t, 10*time.Second, "the event to be dead", func() bool { return eventState(t, p, "forged-1")["state"] == "dead" })
	if ev := eventState(t, p, "forged-1"); ev["last_status"] != float64(401) || !strings.Contains(ev["last_error"].(string), "signature not verified") {
		t.Errorf("dead letter %v, want status 401 saying the signature was not verified", ev)
	}
	l.stop()
}

// --status 404: listen answers "not yet", so the event stays pending,
// parked, and is asked about again.
func TestListenStatus404Parks(t *testing.T) {
	l := startListen(t, "--secret", testSecret, "--status", "404")
	p := start(t, t.TempDir(), "--endpoint", "local=http://"+l.addr+"/hook,secret="+testSecret+",allow-private",
		"--park-interval", "100ms", "--interval", "50ms")
	call(t, "POST", p.url("/v1/events"), "", `{"id":"later-1","destination":"local","payload":{}}`)
	first := l.delivery("later-1", "answered 404")
	if !strings.Contains(first, "signature verified") {
		t.Errorf("listen's report:\n%s\nwant the signature verified", first)
	}
	l.delivery("later-1", "received 2 times")
	ev := eventState(t, p, "later-1")
	if ev["state"] != "pending" || ev["last_status"] != float64(404) || ev["attempts"] != float64(0) {
		t.Errorf("event %v, want pending after a 404, no attempt spent", ev)
	}
	l.stop()
}

// serve on defaults accepts no event: it says so once at start, with how to
// add an endpoint and how to try one with listen.
func TestServeWithoutEndpointSaysHowToAddOne(t *testing.T) {
	p := start(t, t.TempDir())
	hint := "no endpoint is configured"
	testkit.WaitFor(t, 10*time.Second, "the no-endpoint hint", func() bool { return strings.Contains(p.log.String(), hint) })
	for _, want := range []string{"--endpoint NAME=URL", "endpoints: [{name: NAME, url: URL", "outboxd listen",
		"--endpoint local=http://127.0.0.1:8081/hook,allow-private"} {
		if !strings.Contains(p.log.String(), want) {
			t.Errorf("the hint lacks %q:\n%s", want, p.log)
		}
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
	if n := strings.Count(p.log.String(), hint); n != 1 {
		t.Errorf("hint logged %d times, want once", n)
	}
}
