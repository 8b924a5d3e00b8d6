package outbox_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxd/outbox/outbox"
)

// BenchmarkDrainRateLimited measures what a rate limit far above the
// offered rate costs on the delivery path: it drains 20,000 pending events
// to a local receiver that answers 200 at once, at concurrency 64, with
// the endpoint limited to a billion deliveries a second, and without a
// limit, interleaved in 5 rounds each in the same run (the machine is
// shared). "ratio" is the limited rate over the unlimited one.
func BenchmarkDrainRateLimited(b *testing.B) {
	const per, rounds = 4000, 5
	srv := okServer(b)
	dest := srv.URL + "/hook"
	endpoint, _ := newWebSink().ResolveEndpoint(dest)
	limits, err := outbox.NewRateLimits(map[string]outbox.RateLimit{endpoint: {PerSecond: 1e9, Burst: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	drain := func(rl *outbox.RateLimits) (wall, cpu time.Duration) {
		path := filepath.Join(b.TempDir(), "drain.db")
		fill(b, path, per, dest, time.Now().Add(-time.Second))
		sink := newWebSink()
		defer sink.close()
		return drainTimed(b, path, outbox.Config{Sink: sink, Concurrency: 64, RateLimits: rl}, per)
	}
	for b.Loop() {
		var freeWall, limWall, freeCPU, limCPU time.Duration
		for range rounds {
			w, c := drain(nil)
			freeWall, freeCPU = freeWall+w, freeCPU+c
			w, c = drain(limits)
			limWall, limCPU = limWall+w, limCPU+c
		}
		n := float64(per * rounds)
		b.ReportMetric(n/limWall.Seconds(), "limited-events/s")
		b.ReportMetric(n/freeWall.Seconds(), "unlimited-events/s")
		b.ReportMetric(freeWall.Seconds()/limWall.Seconds(), "ratio")
		b.ReportMetric(freeCPU.Seconds()/limCPU.Seconds(), "cpu-ratio")
	}
}
