package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// BenchmarkEnqueueHTTP measures POST /v1/events in process (handler, JSON
// decoding, durable enqueue) with 64 concurrent clients, batches of 1 and
// 100 events, beside the same events given to Outbox.Enqueue directly by 64
// goroutines ("direct", the same-run baseline: what the store and engine
// allow on this disk). The receiver answers 410 so that nothing is
// delivered during the measurement.
//
//	go test -run '^$' -bench EnqueueHTTP -benchtime 20000x ./outbox/httpapi/
func BenchmarkEnqueueHTTP(b *testing.B) {
	for _, c := range []struct {
		size   int
		direct bool
	}{{1, true}, {1, false}, {100, true}, {100, false}} {
		size := c.size
		name := fmt.Sprintf("http/batch%d", size)
		if c.direct {
			name = fmt.Sprintf("direct/batch%d", size)
		}
		b.Run(name, func(b *testing.B) {
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusGone)
			}))
			defer rc.Close()
			sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "sink", URL: rc.URL, AllowPrivate: true}}})
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			o, err := outbox.Open(filepath.Join(b.TempDir(), "bench.db"), outbox.Config{Sink: sink})
			if err != nil {
				b.Fatal(err)
			}
			if err := o.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = o.Stop(ctx)
			}()
			api := httptest.NewServer(httpapi.New(o, httpapi.Config{}))
			defer api.Close()
			var body strings.Builder
			if size > 1 {
				body.WriteByte('[')
			}
			for i := range size {
				if i > 0 {
					body.WriteByte(',')
				}
				fmt.Fprintf(&body, `{"destination":"sink","key":"customer-%d","payload":{"order":%d,"status":"paid","total":"129.90","currency":"EUR"}}`, i, i)
			}
			if size > 1 {
				body.WriteByte(']')
			}
			payload := []byte(body.String())
			evs := make([]outbox.Event, size)
			for i := range evs {
				evs[i] = outbox.Event{Destination: "sink", Key: fmt.Sprintf("customer-%d", i),
					Payload: []byte(`{"order":1,"status":"paid","total":"129.90","currency":"EUR"}`)}
			}
			const clients = 64
			tr := &http.Transport{MaxIdleConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if c.direct {
							if _, err := o.Enqueue(context.Background(), evs...); err != nil {
								failed.Add(1)
							}
							continue
						}
						resp, err := hc.Post(api.URL+"/v1/events", "application/json", bytes.NewReader(payload))
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusAccepted {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d requests failed", n)
			}
			b.ReportMetric(float64(b.N*size)/elapsed.Seconds(), "events/s")
		})
	}
}
