package outbox_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outbox/httpsink"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// BenchmarkAttemptLog measures what the attempt log costs on the delivery
// path: it drains pending events through httpsink to a local receiver that
// answers 200 with a short JSON body, with the log on (default excerpt,
// 1 KiB) and off (Config.NoAttemptLog), outcomes committed durably (fsync).
// "off" and "on" report each one's rate; "interleaved" runs both in each
// round, in alternating order, so that the shared machine's noise falls on
// both alike, and reports the median of the rounds' on/off rate ratios
// (and the ratio of the totals).
func BenchmarkAttemptLog(b *testing.B) {
	const n = 10_000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"accepted"}`)
	}))
	b.Cleanup(srv.Close)
	// drain delivers n events and returns the wall-clock time and the
	// process's CPU time it took (the receiver's included: it runs in
	// this process, and answers the same in both modes).
	drain := func(b *testing.B, logOn bool) (time.Duration, time.Duration) {
		b.StopTimer()
		defer b.StartTimer()
		path := filepath.Join(b.TempDir(), "drain.db")
		fillEndpoint(b, path, n, "bench")
		sink, err := httpsink.New(httpsink.Config{
			Endpoints: []httpsink.Endpoint{{Name: "bench", URL: srv.URL + "/hook", AllowPrivate: true}},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer sink.Close()
		b.StartTimer()
		took, cpu := drainTimed(b, path, outbox.Config{Sink: sink, NoAttemptLog: !logOn}, n)
		b.StopTimer()
		return took, cpu
	}
	for _, mode := range []struct {
		name  string
		logOn bool
	}{{"off", false}, {"on", true}} {
		b.Run(mode.name, func(b *testing.B) {
			var total time.Duration
			rounds := 0
			for b.Loop() {
				took, _ := drain(b, mode.logOn)
				total += took
				rounds++
			}
			b.ReportMetric(float64(rounds*n)/total.Seconds(), "events/s")
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		var on, off, cpuOn, cpuOff time.Duration
		var ratios []float64
		for i := 0; b.Loop(); i++ {
			var tOn, tOff, cOn, cOff time.Duration
			if i%2 == 0 {
				tOff, cOff = drain(b, false)
				tOn, cOn = drain(b, true)
			} else {
				tOn, cOn = drain(b, true)
				tOff, cOff = drain(b, false)
			}
			on, off, cpuOn, cpuOff = on+tOn, off+tOff, cpuOn+cOn, cpuOff+cOff
			ratios = append(ratios, tOff.Seconds()/tOn.Seconds())
		}
		slices.Sort(ratios)
		events := float64(len(ratios) * n)
		b.ReportMetric(ratios[len(ratios)/2], "on/off-ratio")
		b.ReportMetric(off.Seconds()/on.Seconds(), "on/off-total-ratio")
		b.ReportMetric(events/on.Seconds(), "on-events/s")
		b.ReportMetric(events/off.Seconds(), "off-events/s")
		b.ReportMetric(float64(cpuOn.Microseconds())/events, "on-cpu-µs/event")
		b.ReportMetric(float64(cpuOff.Microseconds())/events, "off-cpu-µs/event")
	})
}

// fillEndpoint stores n pending events for the named endpoint directly, due
// now.
func fillEndpoint(b *testing.B, path string, n int, endpoint string) {
	fillRecords(b, path, n, func(r *store.Record) { r.Destination, r.Endpoint = endpoint, endpoint })
}
