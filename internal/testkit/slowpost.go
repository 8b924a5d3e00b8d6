package testkit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// SlowPost is a raw HTTP/1.1 connection that sent the headers of a POST
// declaring a body, with "Expect: 100-continue", and read the server's
// first answer: the body is then the test's to send, at its own pace, or
// never.
type SlowPost struct {
	// Conn is the connection: write the body to it, or close it. It is
	// also closed at the test's cleanup.
	Conn net.Conn
	// First is the server's first answer to the headers: 100 Continue once
	// the handler starts reading the body, or a final answer refusing it
	// (whose body has been read as far as it arrived).
	First *http.Response

	t       testing.TB
	br      *bufio.Reader
	timeout time.Duration
}

// StartSlowPost dials addr and sends the headers of a POST to path with
// Content-Type application/json, a Content-Length of length bytes and
// "Expect: 100-continue", then waits up to timeout for the server's first
// answer. Go's server sends 100 Continue once the handler reads the body.
func StartSlowPost(t testing.TB, addr, path string, length int, timeout time.Duration) *SlowPost {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: outboxd\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", path, length); err != nil {
		t.Fatal(err)
	}
	s := &SlowPost{Conn: conn, t: t, br: bufio.NewReader(conn), timeout: timeout}
	s.First = s.read("no answer to the headers")
	return s
}

// Response waits up to the timeout given to [StartSlowPost] for the
// server's next answer, the final one after a 100 Continue, and returns it
// with its body read as far as it arrived (and readable again).
func (s *SlowPost) Response() *http.Response {
	s.t.Helper()
	return s.read("reading the answer")
}

func (s *SlowPost) read(what string) *http.Response {
	s.t.Helper()
	_ = s.Conn.SetReadDeadline(time.Now().Add(s.timeout))
	resp, err := http.ReadResponse(s.br, nil)
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
	b, _ := io.ReadAll(resp.Body) // what arrived; the test judges it
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}
