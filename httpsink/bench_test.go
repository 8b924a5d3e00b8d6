package httpsink_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
)

// benchPayload is a typical small webhook body (~300 bytes).
var benchPayload = bytes.Repeat([]byte(`{"order":42,"status":"paid"},`), 10)

// benchClients is a local receiver with two clients of it: a plain net/http
// client loop with the same keep-alive pool size as the sink's default, and
// the sink (signing with one secret, policy, bookkeeping). The plain client
// sends the same header set with constant values (a signature computed once),
// so both put the same bytes on the wire and the receiver does the same work:
// the difference is what the sink computes per delivery.
type benchClients struct {
	plain func() error
	sink  func() error
}

func newBenchClients(b *testing.B) benchClients {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	b.Cleanup(srv.Close)
	b.Cleanup(func() { b.Logf("connections: %d", conns.Load()) })

	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * httpsink.DefaultPoolSize,
		MaxIdleConnsPerHost: httpsink.DefaultPoolSize,
		IdleConnTimeout:     90 * time.Second,
	}
	b.Cleanup(tr.CloseIdleConnections)
	wireHeaders := http.Header{
		"Content-Type":      {"application/json"},
		"User-Agent":        {httpsink.DefaultUserAgent},
		"X-Trace":           {"abc"},
		"Idempotency-Key":   {"evt_01J9ZK3V6Q"},
		"Webhook-Id":        {"evt_01J9ZK3V6Q"},
		"Webhook-Timestamp": {"1767323045"},
		"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	plain := func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader(benchPayload))
		if err != nil {
			return err
		}
		for k, v := range wireHeaders {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}

	s, err := httpsink.New(httpsink.Config{
		Endpoints: []httpsink.Endpoint{{Name: "bench", URL: srv.URL, AllowPrivate: true, Secrets: []string{secretA}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	sink := func() error {
		res := s.Deliver(context.Background(), &outbox.Delivery{
			ID: "evt_01J9ZK3V6Q", Destination: "bench", Endpoint: "bench", Method: http.MethodPost,
			Headers: map[string]string{"X-Trace": "abc"}, Payload: benchPayload, Attempt: 1,
		})
		if res.Action != outbox.ActionSuccess {
			return fmt.Errorf("%s %d %v", res.Action, res.Status, res.Err)
		}
		return nil
	}
	return benchClients{plain: plain, sink: sink}
}

// BenchmarkDeliver measures deliveries per second to a local receiver at
// concurrency 1 and 64, the sink beside a plain net/http client to the same
// receiver in the same run. Compare with
//
//	go test -run x -bench 'Deliver$' -count 5 ./httpsink | benchstat -col /client -
func BenchmarkDeliver(b *testing.B) {
	c := newBenchClients(b)
	for _, conc := range []int{1, 64} {
		for _, client := range []struct {
			name string
			fn   func() error
		}{{"plain", c.plain}, {"sink", c.sink}} {
			b.Run(fmt.Sprintf("conc=%d/client=%s", conc, client.name), func(b *testing.B) {
				b.ReportAllocs()
				d := runConcurrent(b, conc, b.N, client.fn)
				b.ReportMetric(float64(b.N)/d.Seconds(), "deliveries/s")
			})
		}
	}
}

// BenchmarkDeliverPaired alternates short rounds of the plain client and the
// sink, so that the noise of a shared machine hits both alike, and reports
// the sink's throughput as a fraction of the plain client's: "sink/plain" is
// the median of the rounds' ratios (robust against bursts of load from other
// processes), the two rates are totals over all rounds.
func BenchmarkDeliverPaired(b *testing.B) {
	c := newBenchClients(b)
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			round := max(200, 8*conc)
			var plainT, sinkT time.Duration
			var ratios []float64
			for done := 0; done < b.N; {
				n := min(round, b.N-done)
				p := runConcurrent(b, conc, n, c.plain)
				s := runConcurrent(b, conc, n, c.sink)
				plainT, sinkT = plainT+p, sinkT+s
				ratios = append(ratios, p.Seconds()/s.Seconds())
				done += n
			}
			slices.Sort(ratios)
			b.ReportMetric(float64(b.N)/plainT.Seconds(), "plain-deliveries/s")
			b.ReportMetric(float64(b.N)/sinkT.Seconds(), "sink-deliveries/s")
			b.ReportMetric(ratios[len(ratios)/2], "sink/plain")
		})
	}
}

// runConcurrent calls fn n times from conc goroutines and returns how long
// it took.
func runConcurrent(b *testing.B, conc, n int, fn func() error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}
