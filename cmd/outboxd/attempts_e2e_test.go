package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// Must show 5: an event parked twice (404), retried once (500) and
// delivered (200) shows four attempts in order with their statuses and
// excerpts, through the API of the running server and through inspect --id
// once it has stopped.
func TestAttemptLogThroughAPIAndInspect(t *testing.T) {
	dir := t.TempDir()
	rc := testkit.NewReceiver(t, "webhook-id", func(_ *http.Request, _ string, n int) testkit.Reply {
		h := http.Header{"Content-Type": {"text/plain"}, "Set-Cookie": {"session=abc"}}
		switch n {
		case 0, 1:
			return testkit.Reply{Status: 404, Header: h, Body: fmt.Sprintf("order not found yet (%d)", n+1)}
		case 2:
			return testkit.Reply{Status: 500, Header: h, Body: "database is restarting"}
		}
		return testkit.Reply{Status: 200, Header: h, Body: "stored as order 17"}
	})
	p := start(t, dir, "--endpoint", "orders="+rc.URL+"/hook,secret="+testSecret+",allow-private",
		"--interval", "50ms", "--park-interval", "100ms", "--backoff-initial", "100ms")
	if code, m := call(t, "POST", p.url("/v1/events"), "", `{"id":"order-17","destination":"orders","payload":{"n":17}}`); code != http.StatusAccepted {
		t.Fatalf("POST: %d %v", code, m)
	}
	testkit.WaitFor(t, 30*time.Second, "delivery after two parks and a retry", func() bool { return rc.Acked("order-17") == 1 })
	want := [][3]string{
		{"park", "404", "order not found yet (1)"},
		{"park", "404", "order not found yet (2)"},
		{"retry", "500", "database is restarting"},
		{"success", "200", "stored as order 17"},
	}
	var m map[string]any
	testkit.WaitFor(t, 10*time.Second, "the four attempts in the API", func() bool {
		var code int
		code, m = call(t, "GET", p.url("/v1/events/order-17/attempts"), "", "")
		as, _ := m["attempts"].([]any)
		return code == http.StatusOK && len(as) == 4
	})
	for i, a := range m["attempts"].([]any) {
		a := a.(map[string]any)
		resp, _ := a["response"].(map[string]any)
		headers, _ := resp["headers"].(map[string]any)
		got := [3]string{fmt.Sprint(a["outcome"]), fmt.Sprint(a["status"]), fmt.Sprint(resp["body"])}
		if got != want[i] || a["attempt"] != float64(i+1) || headers["Content-Type"] != "text/plain" || headers["Set-Cookie"] != nil {
			t.Errorf("attempt %d: %v, want %v with Content-Type and no cookie", i+1, a, want[i])
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["started_at"])); err != nil {
			t.Errorf("attempt %d: started_at %v: %v", i+1, a["started_at"], err)
		}
	}
	if code, m := call(t, "GET", p.url("/v1/events/nobody/attempts"), "", ""); code != http.StatusNotFound {
		t.Errorf("attempts of an unknown event: %d %v, want 404", code, m)
	}

	// inspect reads the file: the server must stop first.
	if p.signal(syscall.SIGTERM, 10*time.Second); p.exitCode() != 0 {
		t.Fatalf("exit code %d after SIGTERM", p.exitCode())
	}
	code, out := run(t, dir, "inspect", "--db", "outboxd.db", "--id", "order-17")
	if code != 0 {
		t.Fatalf("inspect --id: exit %d\n%s", code, out)
	}
	t.Logf("inspect --id order-17:\n%s", out)
	last := strings.Index(out, "attempts (oldest first")
	if last < 0 || last < strings.Index(out, "history (changelog") {
		t.Fatalf("inspect --id prints no attempts after the history:\n%s", out)
	}
	for i, w := range want {
		line := fmt.Sprintf("#%-3d", i+1)
		at := strings.Index(out[last:], line)
		if at < 0 {
			t.Fatalf("inspect --id lacks attempt %d:\n%s", i+1, out)
		}
		at += last
		end := strings.Index(out[at:], "\n  #")
		if end < 0 {
			end = len(out) - at
		}
		block := out[at : at+end]
		for _, s := range []string{w[0], "status " + w[1], fmt.Sprintf("body: %q", w[2]), "Content-Type: text/plain"} {
			if !strings.Contains(block, s) {
				t.Errorf("attempt %d in inspect lacks %q:\n%s", i+1, s, block)
			}
		}
		if strings.Contains(block, "session=abc") {
			t.Errorf("attempt %d in inspect shows the cookie:\n%s", i+1, block)
		}
		last = at + 1
	}
	code, out = run(t, dir, "inspect", "--db", "outboxd.db", "--id", "order-17", "--json")
	var js struct {
		Attempts []struct {
			Attempt int    `json:"attempt"`
			Outcome string `json:"outcome"`
			Status  int    `json:"status"`
			Body    string `json:"body"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil || len(js.Attempts) != 4 ||
		js.Attempts[2].Outcome != "retry" || js.Attempts[2].Status != 500 || js.Attempts[3].Body != "stored as order 17" {
		t.Errorf("inspect --id --json: exit %d, %v, attempts %+v", code, err, js.Attempts)
	}
}
