package httpsink_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// resetListener is a real listener on loopback that accepts every
// connection, counts it and resets it at once: a dead receiver.
type resetListener struct {
	addr  string
	conns atomic.Int64
}

func newResetListener(t *testing.T) *resetListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &resetListener{addr: ln.Addr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Counted before the reset, so before the client sees it.
			r.conns.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // close with RST, not FIN
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return r
}

// streakSinks returns a sink and the destination to give it for a
// receiver at url, once as a configured endpoint and once as a raw URL.
var streakSinks = []struct {
	name string
	new  func(t *testing.T, url string) (*httpsink.Sink, string)
}{
	{"named", func(t *testing.T, url string) (*httpsink.Sink, string) {
		return newSink(t, httpsink.Config{
			InlineRetryBudget: time.Minute, // never the reason a retry is not made
			Endpoints:         []httpsink.Endpoint{{Name: "e", URL: url, AllowPrivate: true}},
		}), "e"
	}},
	{"raw", func(t *testing.T, url string) (*httpsink.Sink, string) {
		return newSink(t, httpsink.Config{
			InlineRetryBudget: time.Minute,
			AllowRawURLs:      true, AllowPrivateNetworks: true,
		}), url + "/hook"
	}},
}

// attempts returns how many requests the Deliver that returned res made.
func attempts(t *testing.T, res outbox.Result) int {
	t.Helper()
	var de *httpsink.DeliveryError
	if !errors.As(res.Err, &de) {
		t.Fatalf("got %s (%v), want a *DeliveryError", res.Action, res.Err)
	}
	return de.Attempts
}

// deliverAll runs n Delivers to dest at once and returns their results.
func deliverAll(s *httpsink.Sink, dest string, n int) []outbox.Result {
	results := make([]outbox.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = deliver(s, dest, "{}")
		})
	}
	close(start)
	wg.Wait()
	return results
}

// TestNoInlineRetriesIntoFailingEndpoint: once an endpoint has failed, 64
// concurrent deliveries to it make one connection each, and each returns a
// retry of its own for the outbox's breaker to count.
func TestNoInlineRetriesIntoFailingEndpoint(t *testing.T) {
	for _, sk := range streakSinks {
		t.Run(sk.name, func(t *testing.T) {
			dead := newResetListener(t)
			s, dest := sk.new(t, "http://"+dead.addr)

			// The first failure meets an endpoint with no streak: it
			// keeps its inline retries.
			res := deliver(s, dest, "{}")
			if res.Action != outbox.ActionRetry {
				t.Fatalf("first delivery: got %s (%v), want retry", res.Action, res.Err)
			}
			first := dead.conns.Load()
			if want := int64(1 + httpsink.DefaultInlineRetries); first != want {
				t.Fatalf("first delivery made %d connections, want %d", first, want)
			}

			const n = 64
			for i, res := range deliverAll(s, dest, n) {
				if res.Action != outbox.ActionRetry {
					t.Fatalf("delivery %d: got %s (%v), want retry", i, res.Action, res.Err)
				}
				if a := attempts(t, res); a != 1 {
					t.Errorf("delivery %d made %d attempts, want 1", i, a)
				}
			}
			got := dead.conns.Load() - first
			t.Logf("%d concurrent deliveries to a failing endpoint: %d connections", n, got)
			if got > n {
				t.Fatalf("%d deliveries made %d connections, want at most %d", n, got, n)
			}
		})
	}
}

// TestConcurrentFirstFailures: 64 deliveries that meet a dead endpoint at
// the same moment, none of them having seen it fail before, make one
// connection each, but for the first to fail, which retries inline.
func TestConcurrentFirstFailures(t *testing.T) {
	for _, sk := range streakSinks {
		t.Run(sk.name, func(t *testing.T) {
			dead := newResetListener(t)
			s, dest := sk.new(t, "http://"+dead.addr)
			const n = 64
			retried := 0
			for i, res := range deliverAll(s, dest, n) {
				if res.Action != outbox.ActionRetry {
					t.Fatalf("delivery %d: got %s (%v), want retry", i, res.Action, res.Err)
				}
				if attempts(t, res) > 1 {
					retried++
				}
			}
			got := dead.conns.Load()
			t.Logf("%d concurrent deliveries to a dead endpoint: %d connections, %d retried inline", n, got, retried)
			if limit := int64(n + httpsink.DefaultInlineRetries); got > limit {
				t.Fatalf("%d deliveries made %d connections, want at most %d", n, got, limit)
			}
			if retried > 1 {
				t.Fatalf("%d deliveries retried inline, want at most 1", retried)
			}
		})
	}
}

// flakyReceiver answers 204, but fails the next fails requests (-1: all)
// with a connection reset or a 503. Keep-alives are off, so that every
// request has a connection of its own and net/http never replays one by
// itself: the receiver's request count is the sink's attempt count.
type flakyReceiver struct {
	*receiver
	fails atomic.Int64
}

func newFlakyReceiver(t *testing.T, status int) *flakyReceiver {
	f := &flakyReceiver{}
	f.receiver = newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for {
			n := f.fails.Load()
			if n == 0 {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			if n < 0 || f.fails.CompareAndSwap(n, n-1) {
				break
			}
		}
		if status == 0 {
			resetConn(t, w, "")
			return
		}
		w.WriteHeader(status)
	})
	f.Config.SetKeepAlivesEnabled(false)
	return f
}

// TestInlineRetryWhileHealthy: an endpoint that has not been failing still
// gets its inline retry after one transient failure, and is delivered.
func TestInlineRetryWhileHealthy(t *testing.T) {
	for _, sk := range streakSinks {
		for _, fail := range []struct {
			name   string
			status int
		}{{"reset", 0}, {"503", http.StatusServiceUnavailable}} {
			t.Run(sk.name+"/"+fail.name, func(t *testing.T) {
				rcv := newFlakyReceiver(t, fail.status)
				s, dest := sk.new(t, rcv.URL)
				if res := deliver(s, dest, "{}"); res.Action != outbox.ActionSuccess {
					t.Fatalf("got %s (%v), want success", res.Action, res.Err)
				}
				rcv.fails.Store(1)
				if res := deliver(s, dest, "{}"); res.Action != outbox.ActionSuccess {
					t.Fatalf("after one transient failure: got %s/%d (%v), want success", res.Action, res.Status, res.Err)
				}
				if got := rcv.requests.Load(); got != 3 {
					t.Fatalf("receiver saw %d requests, want 3 (one, then a failure and its inline retry)", got)
				}
			})
		}
	}
}

// TestInlineRetriesComeBack: a failing endpoint is not retried inline, even
// when the retry would have passed; once a delivery succeeds the streak is
// back at zero and a transient failure is retried inline again.
func TestInlineRetriesComeBack(t *testing.T) {
	for _, sk := range streakSinks {
		for _, fail := range []struct {
			name   string
			status int
		}{{"reset", 0}, {"503", http.StatusServiceUnavailable}} {
			t.Run(sk.name+"/"+fail.name, func(t *testing.T) {
				rcv := newFlakyReceiver(t, fail.status)
				s, dest := sk.new(t, rcv.URL)
				step := func(name string, fails int64, want outbox.Action, requests int64) {
					t.Helper()
					rcv.fails.Store(fails)
					before := rcv.requests.Load()
					res := deliver(s, dest, "{}")
					if res.Action != want {
						t.Fatalf("%s: got %s/%d (%v), want %s", name, res.Action, res.Status, res.Err, want)
					}
					if got := rcv.requests.Load() - before; got != requests {
						t.Fatalf("%s: %d requests, want %d", name, got, requests)
					}
				}
				failed := outbox.ActionRetry // the default policy's transport error and 503
				step("first failure, with its inline retries", -1, failed, 1+httpsink.DefaultInlineRetries)
				step("second failure, none", -1, failed, 1)
				step("transient failure while failing, no retry", 1, failed, 1)
				step("recovered", 0, outbox.ActionSuccess, 1)
				step("transient failure after a success, retried", 1, outbox.ActionSuccess, 2)
			})
		}
	}
}

// TestOtherAnswerResetsStreak: an answer that is not "no answer" or
// "unavailable" (here a 404 the outbox parks, a 500 it retries, a 429 it
// throttles) shows the receiver is up: inline retries come back.
func TestOtherAnswerResetsStreak(t *testing.T) {
	for _, up := range []struct {
		status int
		want   outbox.Action
	}{{http.StatusNotFound, outbox.ActionPark}, {http.StatusInternalServerError, outbox.ActionRetry}, {http.StatusTooManyRequests, outbox.ActionThrottle}} {
		t.Run(strconv.Itoa(up.status), func(t *testing.T) {
			var mode atomic.Int64 // 0: reset, 1: the answer, 2: reset once then 204
			rcv := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				switch mode.Load() {
				case 0:
					resetConn(t, w, "")
				case 1:
					w.WriteHeader(up.status)
				default:
					if mode.CompareAndSwap(2, 3) {
						resetConn(t, w, "")
						return
					}
					w.WriteHeader(http.StatusNoContent)
				}
			})
			rcv.Config.SetKeepAlivesEnabled(false)
			s := newSink(t, httpsink.Config{InlineRetryBudget: time.Minute, Endpoints: []httpsink.Endpoint{{Name: "e", URL: rcv.URL, AllowPrivate: true}}})
			deliver(s, "e", "{}")
			if res := deliver(s, "e", "{}"); res.Action != outbox.ActionRetry || attempts(t, res) != 1 {
				t.Fatalf("failing: got %s, want retry after one attempt (%v)", res.Action, res.Err)
			}
			mode.Store(1)
			if res := deliver(s, "e", "{}"); res.Action != up.want {
				t.Fatalf("got %s, want %s", res.Action, up.want)
			}
			mode.Store(2)
			before := rcv.requests.Load()
			if res := deliver(s, "e", "{}"); res.Action != outbox.ActionSuccess {
				t.Fatalf("after the %d: got %s (%v), want success by an inline retry", up.status, res.Action, res.Err)
			}
			if got := rcv.requests.Load() - before; got != 2 {
				t.Fatalf("%d requests, want 2", got)
			}
		})
	}
}

// TestStreakAcrossPutEndpoint: replacing an endpoint keeps its streak when
// the URL stays the same, and starts a new one with a new URL.
func TestStreakAcrossPutEndpoint(t *testing.T) {
	dead := newResetListener(t)
	other := newResetListener(t)
	s := newSink(t, httpsink.Config{InlineRetryBudget: time.Minute, Endpoints: []httpsink.Endpoint{{Name: "e", URL: "http://" + dead.addr, AllowPrivate: true}}})
	deliver(s, "e", "{}")
	if err := s.PutEndpoint(httpsink.Endpoint{Name: "e", URL: "http://" + dead.addr, AllowPrivate: true, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if res := deliver(s, "e", "{}"); attempts(t, res) != 1 {
		t.Fatalf("same URL: %d attempts, want 1: the streak goes on", attempts(t, res))
	}
	if err := s.PutEndpoint(httpsink.Endpoint{Name: "e", URL: "http://" + other.addr, AllowPrivate: true}); err != nil {
		t.Fatal(err)
	}
	if res := deliver(s, "e", "{}"); attempts(t, res) != 1+httpsink.DefaultInlineRetries {
		t.Fatalf("new URL: %d attempts, want %d: a new receiver starts with no streak", attempts(t, res), 1+httpsink.DefaultInlineRetries)
	}
}

// TestProbeMakesOneConnection: a circuit breaker's probe to a dead
// receiver makes one connection, even when the sink has never seen the
// endpoint fail (its breaker was opened elsewhere: another store, another
// instance of the group), where an ordinary delivery retries inline.
func TestProbeMakesOneConnection(t *testing.T) {
	for _, sk := range streakSinks {
		t.Run(sk.name, func(t *testing.T) {
			dead := newResetListener(t)
			s, dest := sk.new(t, "http://"+dead.addr)
			probe := func() outbox.Result {
				return s.Deliver(context.Background(), &outbox.Delivery{ID: "evt-1", Destination: dest,
					Method: http.MethodPost, Payload: []byte("{}"), Attempt: 1, CreatedAt: fixedNow, Probe: true})
			}
			for i := range 3 {
				before := dead.conns.Load()
				res := probe()
				if res.Action != outbox.ActionRetry {
					t.Fatalf("probe %d: got %s (%v), want retry", i, res.Action, res.Err)
				}
				if a := attempts(t, res); a != 1 {
					t.Errorf("probe %d made %d attempts, want 1", i, a)
				}
				if got := dead.conns.Load() - before; got != 1 {
					t.Errorf("probe %d made %d connections, want 1", i, got)
				}
			}
		})
	}
}
