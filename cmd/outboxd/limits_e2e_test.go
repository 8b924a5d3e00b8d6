package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// trickle writes one byte of s every 10ms to conn until stop is closed or a
// write fails; the returned func stops it and waits for it.
func trickle(conn net.Conn, s string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte{s[i%len(s)]}); err != nil {
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// closedWithin reads conn until the server closes it and returns how long
// that took and what the server sent.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	began := time.Now()
	_ = conn.SetReadDeadline(began.Add(limit))
	b, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %s (got %q)", limit, b)
	}
	return time.Since(began), string(b)
}

// TestServeTimeoutsBoundSlowClients: limits.read_header_timeout,
// read_body_timeout and idle_timeout close connections whose clients
// trickle headers, trickle a body or sit idle; trickling never stretches a
// deadline.
func TestServeTimeoutsBoundSlowClients(t *testing.T) {
	rc := newReceiver(t, nil)
	const timeout = 300 * time.Millisecond
	p := start(t, t.TempDir(), "--endpoint", rc.endpoint("orders"),
		"--read-header-timeout", timeout.String(), "--read-body-timeout", timeout.String(), "--idle-timeout", timeout.String())
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	limit := 20 * timeout // the trickles below would last far longer

	t.Run("headers", func(t *testing.T) {
		conn := dial()
		stop := trickle(conn, "POST /v1/events HTTP/1.1\r\nX-Slow: "+strings.Repeat("a", 10000))
		defer stop()
		took, _ := closedWithin(t, conn, limit)
		t.Logf("closed after %s", took)
	})

	t.Run("body", func(t *testing.T) {
		conn := dial()
		_, _ = io.WriteString(conn, "POST /v1/events HTTP/1.1\r\nHost: outboxd\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n")
		stop := trickle(conn, " ")
		defer stop()
		took, got := closedWithin(t, conn, limit)
		if !strings.HasPrefix(got, "HTTP/1.1 408") || !strings.Contains(got, "did not arrive within 300ms") {
			t.Errorf("answer %q, want a 408 naming the timeout", got)
		}
		t.Logf("answered and closed after %s", took)
	})

	t.Run("idle", func(t *testing.T) {
		conn := dial()
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: outboxd\r\n\r\n")
		br := bufio.NewReader(conn)
		_ = conn.SetReadDeadline(time.Now().Add(limit))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		began := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the server sent more than its answer")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("idle connection still open after %s", limit)
		}
		t.Logf("idle connection closed after %s", time.Since(began))
	})
	p.signal(syscall.SIGTERM, 10*time.Second)
}

// TestServeWarnsWhenOpenWithoutAToken: listening beyond loopback without a
// token logs a warning; with a token, or on loopback, it does not.
func TestServeWarnsWhenOpenWithoutAToken(t *testing.T) {
	const warning = "WITHOUT A TOKEN"
	for _, c := range []struct {
		name string
		args []string
		warn bool
	}{
		{"all interfaces, no token", []string{"--listen", "0.0.0.0:0"}, true},
		{"all interfaces, token", []string{"--listen", "0.0.0.0:0", "--token", "s3cret-token-1234"}, false},
		{"loopback, no token", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := start(t, t.TempDir(), c.args...)
			log := p.log.String()
			if got := strings.Contains(log, warning); got != c.warn {
				t.Errorf("warning logged: %v, want %v:\n%s", got, c.warn, log)
			}
			if c.warn && (!strings.Contains(log, `"level":"WARN"`) || !strings.Contains(log, "OUTBOXD_TOKEN")) {
				t.Errorf("the warning is not a WARN record saying how to set a token:\n%s", log)
			}
			if strings.Contains(log, "s3cret-token-1234") {
				t.Error("the log shows the token")
			}
			p.signal(syscall.SIGTERM, 10*time.Second)
		})
	}
}

// TestServeRefusesAShortToken: a token under 16 bytes (or with white space
// around it) stops serve naming the setting, without showing the token;
// --allow-short-token accepts it; what outboxd token prints is accepted.
func TestServeRefusesAShortToken(t *testing.T) {
	dir := t.TempDir()
	for _, tok := range []string{"a", " ", "fifteen-bytes-x"} {
		code, out := run(t, dir, "serve", "--token", tok)
		if code != 2 || !strings.Contains(out, "invalid setting token (--token, OUTBOXD_TOKEN)") {
			t.Errorf("token %q: exit %d, %q; want 2 naming the setting", tok, code, out)
		}
		if len(tok) > 3 && strings.Contains(out, tok) {
			t.Errorf("the refusal shows the token: %q", out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "outboxd.db")); err == nil {
		t.Error("a refused token created the database")
	}
	p := start(t, t.TempDir(), "--token", "short", "--allow-short-token")
	if c, _ := call(t, "GET", p.url("/v1/stats"), "short", ""); c != http.StatusOK {
		t.Errorf("--allow-short-token: /v1/stats with the token: %d", c)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)

	code, out := run(t, dir, "token")
	generated := strings.TrimSpace(out)
	if code != 0 || len(generated) != 43 {
		t.Fatalf("outboxd token: exit %d, %q", code, out)
	}
	p = start(t, t.TempDir(), "--token", generated)
	if c, _ := call(t, "GET", p.url("/v1/stats"), generated, ""); c != http.StatusOK {
		t.Errorf("a generated token: /v1/stats: %d", c)
	}
	if c, _ := call(t, "GET", p.url("/metrics"), "", ""); c != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d, want 401", c)
	}
	p.signal(syscall.SIGTERM, 10*time.Second)
}
