package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

func breakerOf(ep map[string]any) map[string]any {
	b, _ := ep["breaker"].(map[string]any)
	return b
}

// Must show 1 and 3 with the real binary: a receiver that refuses
// connections opens the endpoint's breaker (one log line, the metric); the
// breaker and the rate limit survive SIGKILL and restart, and the breaker
// stays open until its cool-down ends even though the receiver is back.
// Retry now closes it, and the backlog drains at the endpoint's limit.
func TestBreakerAndRateLimitSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // connections are refused until the receiver comes back
	args := []string{"--endpoint", "dead=http://" + addr + "/hook,allow-private,rate=50,burst=5",
		"--interval", "50ms", "--backoff-initial", "50ms", "--backoff-max", "100ms", "--max-attempts", "1000",
		"--breaker-threshold", "3", "--breaker-cool-down", "1h", "--breaker-max-cool-down", "1h"}
	p := start(t, dir, args...)
	const n = 200
	ids := enqueueBatches(t, p, "brk", "dead", n, 100)

	testkit.WaitFor(t, 60*time.Second, "the breaker to open", func() bool {
		return breakerOf(endpointOf(t, p, "", "dead"))["state"] == "open"
	})
	before := endpointOf(t, p, "", "dead")
	until := breakerOf(before)["until"]
	if rl, _ := before["rate_limit"].(map[string]any); rl["per_second"] != 50.0 || rl["burst"] != 5.0 {
		t.Errorf("rate_limit = %v; want 50/s burst 5", before["rate_limit"])
	}
	code, metrics := get(t, p.url("/metrics"))
	if code != http.StatusOK || !strings.Contains(metrics, `outbox_endpoint_breaker_state{endpoint="dead",state="open"} 1`) ||
		!strings.Contains(metrics, `outbox_breaker_transitions_total{endpoint="dead",state="open"} 1`) ||
		!strings.Contains(metrics, `outbox_endpoint_rate_limit{endpoint="dead"} 50`) {
		t.Errorf("/metrics lacks the breaker's state and transition and the rate limit:\n%s", grepLines(metrics, "dead"))
	}

	p.signal(syscall.SIGKILL, 5*time.Second)
	if got := strings.Count(p.log.String(), "circuit breaker opened"); got != 1 {
		t.Errorf("%d log lines for the breaker's opening; want one per transition", got)
	}
	code, out := run(t, dir, "inspect", "--db", "outboxd.db")
	if code != 0 || !strings.Contains(out, "open until") {
		t.Errorf("inspect: exit %d, want the endpoint's open breaker:\n%s", code, out)
	}

	// The receiver is back, but the breaker is open for an hour.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	rc := receiver{testkit.NewReceiverOn(t, l, "webhook-id", nil)}
	p2 := start(t, dir, args...)
	after := endpointOf(t, p2, "", "dead")
	if b := breakerOf(after); b["state"] != "open" || b["until"] != until {
		t.Fatalf("breaker after SIGKILL and restart = %v; want open until %v", b, until)
	}
	if after["rate_limit"] == nil {
		t.Errorf("rate_limit after restart = %v; want 50/s burst 5", after["rate_limit"])
	}
	// Punctuations run and pass over the held endpoint's events; none
	// goes out.
	punctuations := func() float64 {
		_, m := get(t, p2.url("/metrics"))
		for _, line := range strings.Split(m, "\n") {
			if v, ok := strings.CutPrefix(line, "outbox_punctuation_duration_seconds_count "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return 0
	}
	first := punctuations()
	testkit.WaitFor(t, 60*time.Second, "punctuations while the breaker is open", func() bool { return punctuations() >= first+5 })
	if got := len(rc.Requests()); got != 0 {
		t.Fatalf("the receiver got %d requests while the breaker was open", got)
	}

	// Retry now: the breaker closes and the backlog drains at 50/s.
	code, body := call(t, "POST", p2.url("/v1/endpoints/dead/retry"), "", `{"rate": 1000}`)
	if code != http.StatusAccepted || body["retried"] != float64(n) {
		t.Fatalf("POST retry: %d %v; want 202 with %d retried", code, body, n)
	}
	if b := breakerOf(endpointOf(t, p2, "", "dead")); b["state"] != "closed" {
		t.Errorf("breaker after retry = %v; want closed", b)
	}
	testkit.WaitFor(t, 60*time.Second, "every event delivered", func() bool { return len(rc.missing(ids)) == 0 })
	var arrivals []time.Time
	for _, r := range rc.Requests() {
		arrivals = append(arrivals, r.At)
	}
	// The limiter grants at most 55 in any second; arrivals come a little
	// later, and network and scheduling delays can bunch two that it spread.
	if worst := testkit.MostWithin(arrivals, time.Second); worst > 55+2 {
		t.Errorf("%d deliveries arrived within one second; want at most the limit, 50/s plus a burst of 5", worst)
	}
	p2.signal(syscall.SIGTERM, 10*time.Second)
}

// Retry and the endpoint limits refuse bad input: an unknown endpoint is
// 404, a negative rate 400, a body that is not an object 400.
func TestRetryEndpointBadInput(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, nil)
	p := start(t, dir, "--endpoint", rc.endpoint("orders"))
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/endpoints/nowhere/retry", "", http.StatusNotFound, "nowhere"},
		{"/v1/endpoints/orders/retry", `{"rate": -1}`, http.StatusBadRequest, "rate"},
		{"/v1/endpoints/orders/retry", `[1]`, http.StatusBadRequest, "object"},
		{"/v1/endpoints/orders/retry", `{"pace": 1}`, http.StatusBadRequest, "pace"},
	} {
		code, body := call(t, "POST", p.url(tc.path), "", tc.body)
		if msg, _ := body["error"].(string); code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("POST %s %s: %d %v; want %d naming %q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, body := call(t, "POST", p.url("/v1/endpoints/orders/retry"), "", ""); code != http.StatusAccepted || body["retried"] != 0.0 {
		t.Errorf("POST retry of an idle endpoint: %d %v; want 202 with none retried", code, body)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)

	code, out := run(t, dir, "serve", "--endpoint", "a=https://a.example.com/,rate=0")
	if code != 2 || !strings.Contains(out, "rate") {
		t.Errorf("rate=0: exit %d, %q; want a start-up error naming the rate", code, out)
	}
}

// get returns the status and body of a GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, readAll(t, resp)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}
