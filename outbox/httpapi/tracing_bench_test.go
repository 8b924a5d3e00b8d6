package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/internal/cputime"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/httpapi"
)

// BenchmarkIngestTracing measures single-event POST /v1/events (handler,
// JSON decoding, durable enqueue) from 64 concurrent clients that send a
// traceparent, with tracing off (the default: the global provider, a
// no-op) and with an SDK provider that samples nothing
// (sdktrace.NeverSample: the ingest and enqueue spans are started, the
// event stores their context). Two outboxes are served side by side and
// measured in 10 interleaved rounds of b.N/10 requests each; "ratio" is
// the unsampled rate over the off rate, "cpu-ratio" the off process CPU
// time per event over the unsampled one. The receiver answers 410 so that
// nothing is delivered during the measurement.
//
//	go test -run '^$' -bench IngestTracing -benchtime 20000x ./outbox/httpapi/
func BenchmarkIngestTracing(b *testing.B) {
	const clients, rounds = 64, 10
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
	}))
	defer rc.Close()
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = unsampled.Shutdown(context.Background()) }()
	serveWith := func(tp trace.TracerProvider) string {
		sink, err := httpsink.New(httpsink.Config{Endpoints: []httpsink.Endpoint{{Name: "sink", URL: rc.URL, AllowPrivate: true}}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sink.Close() })
		o, err := outbox.Open(filepath.Join(b.TempDir(), "bench.db"), outbox.Config{Sink: sink, TracerProvider: tp})
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Start(); err != nil {
			b.Fatal(err)
		}
		api := httptest.NewServer(httpapi.New(o, httpapi.Config{TracerProvider: tp}))
		b.Cleanup(func() {
			api.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = o.Stop(ctx)
		})
		return api.URL + "/v1/events"
	}
	offURL, onURL := serveWith(nil), serveWith(unsampled)
	payload := []byte(`{"destination":"sink","key":"customer-1","payload":{"order":1,"status":"paid","total":"129.90","currency":"EUR"}}`)
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var failed atomic.Int64
	round := func(url string, n int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
					resp, err := hc.Do(req)
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
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	per := max(b.N/rounds, clients)
	b.ResetTimer()
	var offWall, onWall, offCPU, onCPU time.Duration
	for range rounds {
		c0 := cputime.Process()
		offWall += round(offURL, per)
		c1 := cputime.Process()
		onWall += round(onURL, per)
		offCPU, onCPU = offCPU+c1-c0, onCPU+cputime.Process()-c1
	}
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	n := float64(rounds * per)
	b.ReportMetric(n/offWall.Seconds(), "off-events/s")
	b.ReportMetric(n/onWall.Seconds(), "unsampled-events/s")
	b.ReportMetric(offWall.Seconds()/onWall.Seconds(), "ratio")
	b.ReportMetric(float64(offCPU.Microseconds())/n, "off-cpu-µs/event")
	b.ReportMetric(float64(onCPU.Microseconds())/n, "unsampled-cpu-µs/event")
	b.ReportMetric(offCPU.Seconds()/onCPU.Seconds(), "cpu-ratio")
}
