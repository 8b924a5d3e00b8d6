package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxd/outbox/internal/cputime"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// okServer answers 200 at once.
func okServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// fill stores n pending events for dest directly, due at due.
func fill(b *testing.B, path string, n int, dest string, due time.Time) {
	ep, _ := newWebSink().ResolveEndpoint(dest)
	fillRecords(b, path, n, func(r *store.Record) {
		r.Destination, r.Endpoint, r.NextAttemptAt = dest, ep, due
	})
}

// fillRecords stores n pending records directly (IDs ev-00000000 on, a
// small JSON payload, created now and due a second ago), each changed by
// set before it is stored, in transactions of 1,000.
func fillRecords(b *testing.B, path string, n int, set func(r *store.Record)) {
	st, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	for i := 0; i < n; i += 1000 {
		recs := make([]*store.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			r := &store.Record{
				ID: fmt.Sprintf("ev-%08d", j), Method: "POST",
				Payload: []byte(`{"n":1}`), CreatedAt: now, NextAttemptAt: now.Add(-time.Second),
			}
			set(r)
			recs = append(recs, r)
		}
		if _, err := st.Insert(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
	}
}

// drainTimed opens an outbox on path with cfg (whose Hooks.OnDelivery it
// sets), starts it, waits until n deliveries were committed, and stops it.
// It returns the wall-clock and process CPU time from the start to the
// last commit.
func drainTimed(b *testing.B, path string, cfg outbox.Config, n int) (wall, cpu time.Duration) {
	var done atomic.Int64
	finished := make(chan struct{})
	cfg.Hooks.OnDelivery = func(outbox.DeliveryInfo) {
		if done.Add(1) == int64(n) {
			close(finished)
		}
	}
	o, err := outbox.Open(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	t0, c0 := time.Now(), cputime.Process()
	if err := o.Start(); err != nil {
		b.Fatal(err)
	}
	<-finished
	wall, cpu = time.Since(t0), cputime.Process()-c0
	if err := o.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
	return wall, cpu
}

// BenchmarkDrain delivers 100,000 pending events to a local receiver that
// answers 200 at once, at concurrency 64, and compares with a plain net/http
// client loop sending the same requests with the same concurrency in the
// same run. Outcomes are committed durably (fsync). The machine is shared, so
// the two are interleaved in 5 rounds of 20,000, and the process CPU time
// per event is reported as well as the wall-clock rate.
func BenchmarkDrain(b *testing.B) {
	const conc, rounds = 64, 5
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("OUTBOX_BENCH_DRAIN_N")); err == nil && v > 0 {
		n = v // for profiling runs
	}
	per := n / rounds
	srv := okServer(b)
	dest := srv.URL + "/hook"
	baseline := func() {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
		defer client.CloseIdleConnections()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for next.Add(1) <= int64(per) {
					req, _ := http.NewRequest("POST", dest, bytes.NewReader([]byte(`{"n":1}`)))
					req.Header.Set("Idempotency-Key", "ev-x")
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
	}
	for b.Loop() {
		var baseWall, boxWall, baseCPU, boxCPU time.Duration
		for range rounds {
			t0, c0 := time.Now(), cputime.Process()
			baseline()
			baseWall += time.Since(t0)
			baseCPU += cputime.Process() - c0

			path := filepath.Join(b.TempDir(), "drain.db")
			fill(b, path, per, dest, time.Now().Add(-time.Second))
			sink := newWebSink()
			w, c := drainTimed(b, path, outbox.Config{Sink: sink, Concurrency: conc}, per)
			boxWall += w
			boxCPU += c
			sink.close()
		}
		b.ReportMetric(float64(n)/boxWall.Seconds(), "outbox-events/s")
		b.ReportMetric(float64(n)/baseWall.Seconds(), "nethttp-req/s")
		b.ReportMetric(baseWall.Seconds()/boxWall.Seconds(), "ratio")
		b.ReportMetric(float64(boxCPU.Microseconds())/float64(n), "outbox-cpu-µs/event")
		b.ReportMetric(float64(baseCPU.Microseconds())/float64(n), "nethttp-cpu-µs/req")
		b.ReportMetric(baseCPU.Seconds()/boxCPU.Seconds(), "cpu-ratio")
	}
}

// BenchmarkFirstAttemptLatency measures, with an idle outbox, the time from
// Enqueue returning (durable) to the Sink's Deliver being called, and from
// the Enqueue call to it (fsync included).
func BenchmarkFirstAttemptLatency(b *testing.B) {
	const samples = 300
	started := make(chan time.Time, 1)
	sink := sinkFunc(func(ctx context.Context, d *outbox.Delivery) outbox.Result {
		started <- time.Now()
		return outbox.Result{Action: outbox.ActionSuccess, Status: 200}
	})
	cfg := outbox.Config{Sink: sink}
	o, err := outbox.Open(filepath.Join(b.TempDir(), "lat.db"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer o.Stop(context.Background())
	if err := o.Start(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var fromReturn, fromCall []time.Duration
		for range samples {
			t0 := time.Now()
			if _, err := o.Enqueue(context.Background(), outbox.Event{Destination: "svc", Payload: []byte("x")}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			at := <-started
			fromReturn = append(fromReturn, at.Sub(t1))
			fromCall = append(fromCall, at.Sub(t0))
			// Let the outbox go idle again: the outcome is committed.
			for o.Stats().InFlight > 0 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		slices.Sort(fromReturn)
		slices.Sort(fromCall)
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		b.ReportMetric(ms(fromReturn[samples/2]), "p50-ms")
		b.ReportMetric(ms(fromReturn[samples*99/100]), "p99-ms")
		b.ReportMetric(ms(fromCall[samples/2]), "p50-incl-fsync-ms")
		b.ReportMetric(ms(fromCall[samples*99/100]), "p99-incl-fsync-ms")
	}
}

// BenchmarkEnqueueThroughput: 64 concurrent callers, one event per call,
// durable (fsync), through Outbox.Enqueue and, as the same-run baseline,
// through the store's own Insert.
func BenchmarkEnqueueThroughput(b *testing.B) {
	const callers, per = 64, 200
	run := func(insert func(i int) error) time.Duration {
		var wg sync.WaitGroup
		t0 := time.Now()
		for c := range callers {
			wg.Go(func() {
				for i := range per {
					if err := insert(c*per + i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	storeRun := func() time.Duration {
		st, err := store.Open(filepath.Join(b.TempDir(), "store.db"), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		now := time.Now()
		return run(func(i int) error {
			_, err := st.Insert(context.Background(), []*store.Record{{
				ID: fmt.Sprintf("s-%d", i), Destination: "svc", Endpoint: "svc", Method: "POST",
				Payload: []byte(`{"n":1}`), CreatedAt: now, NextAttemptAt: now,
			}})
			return err
		})
	}
	outboxRun := func() time.Duration {
		o, err := outbox.Open(filepath.Join(b.TempDir(), "outbox.db"), outbox.Config{
			Sink: sinkFunc(func(context.Context, *outbox.Delivery) outbox.Result {
				return outbox.Result{Action: outbox.ActionSuccess}
			}),
		})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Stop(context.Background())
		return run(func(i int) error {
			_, err := o.Enqueue(context.Background(), outbox.Event{ID: fmt.Sprintf("o-%d", i), Destination: "svc", Payload: []byte(`{"n":1}`)})
			return err
		})
	}
	for b.Loop() {
		// Interleaved, best of three each: the disk is shared and noisy.
		base, got := time.Duration(1<<62), time.Duration(1<<62)
		for range 3 {
			base = min(base, storeRun())
			got = min(got, outboxRun())
		}
		total := float64(callers * per)
		b.ReportMetric(total/got.Seconds(), "outbox-events/s")
		b.ReportMetric(total/base.Seconds(), "store-events/s")
		b.ReportMetric(base.Seconds()/got.Seconds(), "ratio")
	}
}

// BenchmarkEmptyPunctuation measures a delivery punctuation when nothing is
// due, with 1,000,000 events parked in the future, against the same on an
// empty outbox in the same run.
func BenchmarkEmptyPunctuation(b *testing.B) {
	const parked, samples = 1_000_000, 2000
	measure := func(path string) (p50, p99 time.Duration) {
		var mu sync.Mutex
		var ds []time.Duration
		ran := make(chan struct{}, 1)
		cfg := outbox.Config{Sink: newWebSink(), Interval: time.Hour}
		cfg.Hooks.OnPunctuation = func(d time.Duration, _ int) {
			mu.Lock()
			ds = append(ds, d)
			mu.Unlock()
			select {
			case ran <- struct{}{}:
			default:
			}
		}
		cfg.NoSync = true
		o, err := outbox.Open(path, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer o.Stop(context.Background())
		if err := o.Start(); err != nil {
			b.Fatal(err)
		}
		<-ran // Start's own run
		mu.Lock()
		ds = ds[:0]
		mu.Unlock()
		for range samples {
			o.WakeForTest()
			<-ran
		}
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(ds)
		return ds[len(ds)/2], ds[len(ds)*99/100]
	}
	dir := b.TempDir()
	full := filepath.Join(dir, "parked.db")
	fill(b, full, parked, "http://127.0.0.1:1/hook", time.Now().Add(time.Hour))
	for b.Loop() {
		e50, e99 := measure(filepath.Join(b.TempDir(), "empty.db"))
		p50, p99 := measure(full)
		us := func(d time.Duration) float64 { return float64(d) / 1e3 }
		b.ReportMetric(us(p50), "p50-µs")
		b.ReportMetric(us(p99), "p99-µs")
		b.ReportMetric(us(e50), "empty-p50-µs")
		b.ReportMetric(us(e99), "empty-p99-µs")
		b.ReportMetric(float64(p50)/float64(e50), "ratio-vs-empty")
	}
}

// BenchmarkUpdateThroughput: 64 concurrent callers, durable (fsync), each
// call an Update that writes one application key and enqueues one event
// with the same ID, against 64 concurrent callers of Enqueue with one event
// per call in the same run (interleaved, best of three each: the disk is
// shared and noisy). ratio is Update's rate over Enqueue's.
//
// With time-ordered IDs (UUIDv7, what the outbox generates; an order ID
// made the same way) both trees grow at their right edge. With scattered
// IDs every commit rewrites leaves all over the events tree, and in the
// Updates all over the application's tree as well: that second tree, not
// the transaction, is what Update then pays for.
func BenchmarkUpdateThroughput(b *testing.B) {
	const callers, per = 64, 200
	run := func(call func(o *outbox.Outbox, i int) error) time.Duration {
		o, err := outbox.Open(filepath.Join(b.TempDir(), "outbox.db"), outbox.Config{Sink: nopSink})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Stop(context.Background())
		var wg sync.WaitGroup
		t0 := time.Now()
		for c := range callers {
			wg.Go(func() {
				for i := range per {
					if err := call(o, c*per+i); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	bucket := []byte("app")
	payload := []byte(`{"n":1}`)
	for _, ids := range []struct {
		name string
		id   func(prefix string, i int) string
	}{
		{"ids=time-ordered", func(string, int) string { return uuid.Must(uuid.NewV7()).String() }},
		{"ids=scattered", func(prefix string, i int) string { return prefix + strconv.Itoa(i) }},
	} {
		update := func(o *outbox.Outbox, i int) error {
			id := ids.id("u-", i)
			return o.Update(context.Background(), func(tx *outbox.Tx) error {
				bk, err := tx.CreateBucketIfNotExists(bucket)
				if err != nil {
					return err
				}
				if err := bk.Put([]byte(id), payload); err != nil {
					return err
				}
				_, err = tx.Enqueue(outbox.Event{ID: id, Destination: "svc", Payload: payload})
				return err
			})
		}
		enqueue := func(o *outbox.Outbox, i int) error {
			_, err := o.Enqueue(context.Background(), outbox.Event{ID: ids.id("e-", i), Destination: "svc", Payload: payload})
			return err
		}
		b.Run(ids.name, func(b *testing.B) {
			for b.Loop() {
				base, got := time.Duration(1<<62), time.Duration(1<<62)
				for range 3 {
					base = min(base, run(enqueue))
					got = min(got, run(update))
				}
				total := float64(callers * per)
				b.ReportMetric(total/got.Seconds(), "update-calls/s")
				b.ReportMetric(total/base.Seconds(), "enqueue-calls/s")
				b.ReportMetric(base.Seconds()/got.Seconds(), "ratio")
			}
		})
	}
}
