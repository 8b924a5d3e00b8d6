package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// BenchmarkPunctuateWithScheduled measures a delivery punctuation of the 100
// events due now, with 1,000,000 events scheduled for tomorrow (enqueued
// with a DeliverAt) and with none, in the same run. Each round enqueues 100
// events, records the duration of the punctuation that takes them (the
// snapshot of what is due and its hand-over to the workers; the Sink answers
// at once) and waits for their outcomes to be committed before the next.
// The second sub-benchmark reports its median over the first's as
// ratio-vs-none: a scheduled backlog must not slow the punctuation down.
func BenchmarkPunctuateWithScheduled(b *testing.B) {
	const scheduled, rounds, due = 1_000_000, 500, 100
	dir := b.TempDir()
	paths := map[int]string{0: filepath.Join(dir, "none.db"), scheduled: filepath.Join(dir, "scheduled.db")}
	start := time.Now()
	fillScheduled(b, paths[scheduled], scheduled, time.Now().Add(24*time.Hour))
	b.Logf("%d scheduled events enqueued in %v", scheduled, time.Since(start).Round(time.Millisecond))
	// The fill was not synced: write its pages out now, or the kernel's
	// writeback would slow down whichever sub-benchmark runs first. Then a
	// round of each warms both up (caches, heap), and is not counted.
	syncFile(b, paths[scheduled])
	for _, n := range []int{0, scheduled} {
		measureDuePunctuations(b, paths[n], rounds/5, due)
	}

	var noneP50 time.Duration
	for _, n := range []int{0, scheduled} {
		b.Run(fmt.Sprintf("scheduled=%d", n), func(b *testing.B) {
			var p50, p99 time.Duration
			for b.Loop() {
				p50, p99 = measureDuePunctuations(b, paths[n], rounds, due)
			}
			us := func(d time.Duration) float64 { return float64(d) / 1e3 }
			b.ReportMetric(us(p50), "p50-µs")
			b.ReportMetric(us(p99), "p99-µs")
			if n == 0 {
				noneP50 = p50
			} else if noneP50 > 0 {
				b.ReportMetric(float64(p50)/float64(noneP50), "ratio-vs-none")
			}
		})
	}
}

// fillScheduled enqueues n events for one destination through the outbox,
// each with DeliverAt at, in calls of 10,000 without fsync.
func fillScheduled(b *testing.B, path string, n int, at time.Time) {
	cfg := outbox.Config{Sink: newTimedSink(outbox.ActionSuccess), NoSync: true, MaxCommitBatch: 10_000}
	o, err := outbox.Open(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer stop(b, o)
	evs := make([]outbox.Event, 0, 10_000)
	for i := 0; i < n; i += cap(evs) {
		evs = evs[:0]
		for j := i; j < min(i+cap(evs), n); j++ {
			evs = append(evs, outbox.Event{ID: fmt.Sprintf("later-%08d", j), Destination: "orders",
				Payload: []byte(`{"n":1}`), DeliverAt: at})
		}
		if _, err := o.Enqueue(context.Background(), evs...); err != nil {
			b.Fatal(err)
		}
	}
}

// syncFile flushes the file at path to disk.
func syncFile(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// measureRuns numbers the calls of measureDuePunctuations.
var measureRuns atomic.Int64

// measureDuePunctuations opens path, and rounds times enqueues due events
// and waits for them to be delivered, returning the median and 99th
// percentile of the punctuations that took them.
func measureDuePunctuations(b *testing.B, path string, rounds, due int) (p50, p99 time.Duration) {
	var (
		mu        sync.Mutex
		ds        []time.Duration
		delivered int
		target    int
		done      = make(chan struct{}, 1)
	)
	cfg := outbox.Config{Sink: sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	}), Interval: time.Hour, NoSync: true}
	cfg.Hooks.OnPunctuation = func(d time.Duration, started int) {
		if started == 0 {
			return // a wake with nothing due (after the outcomes of a round)
		}
		mu.Lock()
		ds = append(ds, d)
		mu.Unlock()
	}
	cfg.Hooks.OnDelivery = func(outbox.DeliveryInfo) {
		mu.Lock()
		delivered++
		reached := delivered == target
		mu.Unlock()
		if reached {
			done <- struct{}{}
		}
	}
	o, err := outbox.Open(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer stop(b, o)
	if err := o.Start(); err != nil {
		b.Fatal(err)
	}
	evs := make([]outbox.Event, due)
	run := measureRuns.Add(1) // IDs of their own: -count reuses the files
	for r := range rounds {
		for i := range evs {
			evs[i] = outbox.Event{ID: fmt.Sprintf("due-%03d-%04d-%04d", run, r, i), Destination: "orders", Payload: []byte(`{"n":1}`)}
		}
		mu.Lock()
		target += due
		mu.Unlock()
		if _, err := o.Enqueue(context.Background(), evs...); err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("round %d: the due events were not delivered within a minute", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ds) < rounds {
		b.Fatalf("%d punctuations took the %d rounds' events", len(ds), rounds)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}
