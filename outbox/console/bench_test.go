package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/outbox/console"
)

// nopSink would deliver nothing; the benchmark's outbox is never started.
type nopSink struct{}

func (nopSink) Deliver(context.Context, *outbox.Delivery) outbox.Result { return outbox.Result{} }

// BenchmarkEventsPage renders the events page's first page (50 events)
// over a store of 1,000 pending events, the baseline, and over one of
// 1,000,000: the page reads one page of the bucket, so the two should take
// about the same time. The ratio is reported as x-baseline.
func BenchmarkEventsPage(b *testing.B) {
	var baseline float64
	for _, n := range []int{1_000, 1_000_000} {
		c := pendingStore(b, n)
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/ui/events", nil)
			w := httptest.NewRecorder()
			c.ServeHTTP(w, req)
			if w.Code != http.StatusOK || strings.Count(w.Body.String(), `class="id"`) != 50 {
				b.Fatalf("status %d, want 200 with 50 events:\n%.2000s", w.Code, w.Body.String())
			}
			b.ResetTimer()
			for b.Loop() {
				w := httptest.NewRecorder()
				c.ServeHTTP(w, req)
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(per/1e6, "ms/render")
			if n == 1_000 {
				baseline = per
			} else if baseline > 0 {
				b.ReportMetric(per/baseline, "x-baseline")
			}
		})
	}
}

// pendingStore returns a console over an outbox holding n pending events,
// enqueued in batches of 10,000 without fsync.
func pendingStore(b *testing.B, n int) *console.Console {
	b.Helper()
	o, err := outbox.Open(filepath.Join(b.TempDir(), "outbox.db"), outbox.Config{Sink: nopSink{}, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = o.Stop(context.Background()) })
	const batch = 10_000
	evs := make([]outbox.Event, 0, batch)
	payload := []byte(`{"order":12345,"total":"42.00","currency":"EUR"}`)
	created := time.Now()
	for i := 0; i < n; i += batch {
		evs = evs[:0]
		for j := i; j < min(n, i+batch); j++ {
			evs = append(evs, outbox.Event{
				ID: fmt.Sprintf("ev-%09d", j), Key: fmt.Sprintf("customer-%d", j%5000),
				Destination: "https://hooks.example.com/orders", Payload: payload,
			})
		}
		if _, err := o.Enqueue(context.Background(), evs...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d pending events stored in %v", n, time.Since(created).Round(time.Millisecond))
	c, err := console.New(o, console.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
