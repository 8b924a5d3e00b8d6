//go:build !race && linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
)

// openSlow sends the headers of a POST declaring a 5 MiB body, with
// "Expect: 100-continue", and reads the server's first answer, so that when
// it returns the server is either reading the body (100 Continue, then one
// byte is sent) or has refused it.
func openSlow(t *testing.T, addr string) *testkit.SlowPost {
	t.Helper()
	sc := testkit.StartSlowPost(t, addr, "/v1/events", 5<<20, 20*time.Second)
	if sc.First.StatusCode == http.StatusContinue {
		if _, err := sc.Conn.Write([]byte("[")); err != nil {
			t.Fatal(err)
		}
	}
	return sc
}

// memoryKiB returns the resident set and its peak (VmRSS, VmHWM) of pid.
func memoryKiB(t *testing.T, pid int) (rss, peak int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			peak = n
		}
	}
	return rss, peak
}

// slowClients is how many clients hold a request open at once.
const slowClients = 400

// memoryBoundKiB bounds the process's peak resident set while the slow
// clients hold their requests: a few times what outboxd needs idle.
const memoryBoundKiB = 100 << 10

// TestSlowClientsCannotExhaustMemory: 400 clients that send headers
// declaring a 5 MiB body and then one byte keep the process's memory within
// a bound (a body takes memory as its bytes arrive), other clients are
// still served (defaults) or, beyond limits.max_connections, answered 503
// with Retry-After; once the slow clients go, requests are served again.
//
//	go test -run TestSlowClientsCannotExhaustMemory -v ./cmd/outboxd/
func TestSlowClientsCannotExhaustMemory(t *testing.T) {
	post := func(t *testing.T, p *proc) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url("/v1/events"), strings.NewReader(`{"destination":"orders"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp
	}
	hold := func(t *testing.T, p *proc) (conns []*testkit.SlowPost, statuses map[int]int) {
		t.Helper()
		statuses = map[int]int{}
		for range slowClients {
			sc := openSlow(t, p.addr)
			conns = append(conns, sc)
			statuses[sc.First.StatusCode]++
			if sc.First.StatusCode == http.StatusServiceUnavailable && sc.First.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
		}
		rss, peak := memoryKiB(t, p.cmd.Process.Pid)
		t.Logf("%d slow clients (first answers %v): outboxd RSS %d MiB, peak %d MiB", slowClients, statuses, rss>>10, peak>>10)
		if peak > memoryBoundKiB {
			t.Errorf("peak RSS %d MiB with %d slow clients, want under %d MiB", peak>>10, slowClients, memoryBoundKiB>>10)
		}
		return conns, statuses
	}
	release := func(t *testing.T, p *proc, conns []*testkit.SlowPost) {
		t.Helper()
		for _, sc := range conns {
			sc.Conn.Close()
		}
		testkit.WaitFor(t, 20*time.Second, "requests to be served once the slow clients are gone", func() bool {
			return post(t, p).StatusCode == http.StatusAccepted
		})

	}

	t.Run("defaults", func(t *testing.T) {
		rc := newReceiver(t, nil)
		p := start(t, t.TempDir(), "--endpoint", rc.endpoint("orders"))
		conns, statuses := hold(t, p)
		if statuses[http.StatusContinue] != slowClients {
			t.Errorf("first answers %v, want all %d bodies being read", statuses, slowClients)
		}
		if resp := post(t, p); resp.StatusCode != http.StatusAccepted {
			t.Errorf("a request beside the slow clients: %d, want 202", resp.StatusCode)
		}
		release(t, p, conns)
	})

	t.Run("over the connection limit", func(t *testing.T) {
		rc := newReceiver(t, nil)
		const limit = 300
		p := start(t, t.TempDir(), "--endpoint", rc.endpoint("orders"), "--max-connections", strconv.Itoa(limit))
		conns, statuses := hold(t, p)
		if statuses[http.StatusContinue] != limit || statuses[http.StatusServiceUnavailable] != slowClients-limit {
			t.Errorf("first answers %v, want %d bodies being read and %d answered 503", statuses, limit, slowClients-limit)
		}
		resp := post(t, p)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a request beyond the limit: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		release(t, p, conns)
	})
}
