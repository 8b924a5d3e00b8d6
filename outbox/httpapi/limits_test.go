package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/outbox/httpapi"
)

func bodyOf(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// eventOfSize returns an event object of exactly n bytes.
func eventOfSize(n int) string {
	head, tail := `{"destination":"orders","payload":"`, `"}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestBodyMemoryBudget: once the bodies in memory reach MaxBodyMemory,
// other requests are answered 503 with Retry-After and store nothing, the
// body holding the memory still completes, and requests are served again
// once it is answered.
func TestBodyMemoryBudget(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{MaxBodyBytes: 4096, MaxBodyMemory: 4096}, map[string]string{"orders": rc.URL})

	// A body declaring 4,000 bytes gets a buffer of its size before the
	// server asks for it with 100 Continue: from then on only 96 bytes of
	// the budget are left.
	slow := testkit.StartSlowPost(t, e.api.Listener.Addr().String(), "/v1/events", 4000, 10*time.Second)
	if first := slow.First; first.StatusCode != http.StatusContinue || first.Proto != "HTTP/1.1" {
		t.Fatalf("slow client got %q, want 100 Continue", first.Proto+" "+first.Status)
	}
	probe := []byte(eventOfSize(200))
	req, _ := http.NewRequest(http.MethodPost, e.api.URL+"/v1/events", strings.NewReader(string(probe)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg := bodyOf(resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(msg, "retry later") {
		t.Errorf("POST while the budget is taken: %d, Retry-After %q, %s; want 503, Retry-After 1, saying to retry later",
			resp.StatusCode, resp.Header.Get("Retry-After"), msg)
	}
	// The slow body completes within what it holds.
	if _, err := io.WriteString(slow.Conn, eventOfSize(4000)); err != nil {
		t.Fatal(err)
	}
	if resp := slow.Response(); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the slow body: %d %s, want 202", resp.StatusCode, bodyOf(resp))
	}
	// Its memory is given back once it is answered.
	testkit.WaitFor(t, 10*time.Second, "requests to be served again", func() bool {
		code, _ := e.post(t, "/v1/events", probe)
		return code == http.StatusAccepted
	})

	if s := e.o.Stats(); s.Pending != 2 {
		t.Errorf("pending %d, want the slow event and the one after (the refused one stored nothing)", s.Pending)
	}
}

// TestTricklingClientCannotStretchTheBodyDeadline: the body deadline is
// fixed when the handler starts reading; a byte every few milliseconds does
// not move it, and the answer is a 408.
func TestTricklingClientCannotStretchTheBodyDeadline(t *testing.T) {
	rc := newReceiver(t, nil)
	const timeout = 300 * time.Millisecond
	e := newEnv(t, httpapi.Config{ReadBodyTimeout: timeout}, map[string]string{"orders": rc.URL})
	began := time.Now()
	slow := testkit.StartSlowPost(t, e.api.Listener.Addr().String(), "/v1/events", 1000, 10*time.Second)
	if first := slow.First; first.StatusCode != http.StatusContinue || first.Proto != "HTTP/1.1" {
		t.Fatalf("got %q, want 100 Continue", first.Proto+" "+first.Status)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a byte every 10ms: the whole body would take 10s
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := slow.Conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	resp := slow.Response()
	took := time.Since(began)
	close(stop)
	wg.Wait()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(bodyOf(resp), "did not arrive within 300ms") {
		t.Errorf("trickled body: %d, want 408 naming the timeout", resp.StatusCode)
	}
	if took > 10*timeout {
		t.Errorf("answered after %s; the deadline was %s from the start of the body", took, timeout)
	}
}

// TestCompressedBodyIs415: a Content-Encoding other than identity is
// refused naming the encoding; identity is the same as none.
func TestCompressedBodyIs415(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{}, map[string]string{"orders": rc.URL})
	ok := []byte(`{"destination":"orders"}`)
	for _, enc := range []string{"gzip", "br", "deflate, gzip"} {
		req, _ := http.NewRequest(http.MethodPost, e.api.URL+"/v1/events", strings.NewReader(string(ok)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", enc)
		resp, err := e.api.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := bodyOf(resp)
		resp.Body.Close()
		want := "Content-Encoding " + enc + " is not supported; send the body uncompressed"
		if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(b, want) {
			t.Errorf("%s: %d %s, want 415 with %q", enc, resp.StatusCode, b, want)
		}
		if resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("%s: 415 without Accept-Encoding: identity", enc)
		}
	}
	if code, m := e.do(t, http.MethodPost, "/v1/events", "application/json", ok, "Content-Encoding", "identity"); code != http.StatusAccepted {
		t.Errorf("Content-Encoding identity: %d %v, want 202", code, m)
	}
	if s := e.o.Stats(); s.Pending != 1 {
		t.Errorf("pending %d, want 1: the compressed bodies stored nothing", s.Pending)
	}
}

// TestBodyAtTheLimitFitsTheBudget: a body of exactly MaxBodyBytes is read
// within a budget of the same size, whether its length is declared or not;
// one byte more is a 413.
func TestBodyAtTheLimitFitsTheBudget(t *testing.T) {
	rc := newReceiver(t, func(*http.Request) int { return http.StatusServiceUnavailable })
	e := newEnv(t, httpapi.Config{MaxBodyBytes: 8192, MaxBodyMemory: 8192, MaxPayloadBytes: 8192}, map[string]string{"orders": rc.URL})
	for _, c := range []struct {
		size    int
		chunked bool
		want    int
	}{{8192, false, http.StatusAccepted}, {8192, true, http.StatusAccepted}, {8193, true, http.StatusRequestEntityTooLarge}, {100, true, http.StatusAccepted}} {
		var body io.Reader = strings.NewReader(eventOfSize(c.size))
		if c.chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, e.api.URL+"/v1/events", body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.api.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg := bodyOf(resp)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%d bytes (chunked %v): %d %s, want %d", c.size, c.chunked, resp.StatusCode, msg, c.want)
		}
	}
}
