//go:build fault

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outbox/internal/testkit"
	"github.com/outboxd/outbox/store"
)

// sample is one observation of the sidecar during the soak.
type soakSample struct {
	At         time.Duration
	Goroutines float64
	HeapInuse  float64 // bytes
	RSS        float64 // bytes
	FileSize   float64 // bytes
	Pending    int
}

// TestSoak: a receiver answering a mix of 200, 404, 429, 500, timeouts and
// connection resets, under a steady load, for -soak. Goroutines, heap, RSS
// and file size must not keep growing (the second half of the run may not
// exceed the first by more than half again plus a small slack), and once
// the receiver heals, pending must return to zero with every acknowledged
// event delivered.
func TestSoak(t *testing.T) {
	soak := *soakFlag
	dir := t.TempDir()
	db := filepath.Join(dir, "outboxd.db")
	addr := testkit.FreeAddr(t)
	rcv := newReceiver(t)

	// The mix. 429s come in bursts, as from a real rate limiter: for 150 ms
	// of every 5 s every request is throttled (Retry-After: 1). Otherwise
	// each request gets, at random: 60% 200, 12% 404, 12% 500, 8% a hang
	// past the 500 ms delivery timeout, 8% a connection reset.
	began := time.Now()
	rcv.set(func(string) answer {
		if time.Since(began)%(5*time.Second) < 150*time.Millisecond {
			return answerThrottle
		}
		switch p := rand.IntN(100); {
		case p < 60:
			return answerOK
		case p < 72:
			return answerNotYet
		case p < 84:
			return answerFail
		case p < 92:
			return answerHang
		default:
			return answerReset
		}
	})
	s := start(t, db, addr,
		"--endpoint", "recv="+rcv.url(0)+",timeout=1s", "--allow-private-networks",
		"--interval", "100ms", "--park-interval", "500ms", "--backoff-initial", "100ms", "--backoff-max", "2s",
		"--max-retry-after", "2s", "--max-attempts", "100000", "--max-age", "1h", "--concurrency", "32")

	ld := newLoader(addr, "soak", 120, 10, 256)
	ctx, cancel := context.WithTimeout(context.Background(), soak)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ld.run(ctx)
	}()

	every := max(time.Second, soak/60)
	var samples []soakSample
	observe := func() {
		m, err := s.metrics("go_goroutines", "go_memstats_heap_inuse_bytes")
		if err != nil {
			t.Errorf("GET /metrics: %v", err)
			return
		}
		rss, _ := s.rss()
		fi, err := os.Stat(db)
		if err != nil {
			t.Errorf("stat: %v", err)
			return
		}
		st, _ := s.stats()
		samples = append(samples, soakSample{At: time.Since(began), Goroutines: m["go_goroutines"], HeapInuse: m["go_memstats_heap_inuse_bytes"],
			RSS: float64(rss), FileSize: float64(fi.Size()), Pending: st.Pending})
	}
	tick := time.NewTicker(every)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			observe()
		case <-ctx.Done():
		}
	}
	tick.Stop()
	wg.Wait()
	observe()
	faulty := rcv.answerCounts()

	// Heal and drain.
	rcv.set(func(string) answer { return answerOK })
	healed := time.Now()
	dctx, dcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer dcancel()
	var last stats
	if err := testkit.Poll(dctx, 100*time.Millisecond, func() (bool, error) {
		st, err := s.stats()
		if err != nil {
			return false, nil
		}
		last = st
		return st.Pending == 0 && st.InFlight == 0, nil
	}); err != nil {
		t.Errorf("VIOLATION: pending did not return to zero within 3 minutes of healing: %v (last %+v)", err, last)
	}
	drain := time.Since(healed)
	m, _ := s.metrics("go_goroutines", "go_memstats_heap_inuse_bytes")
	s.stop()
	for _, p := range checkDB(db) {
		t.Errorf("VIOLATION: bbolt check after the soak: %s", p)
	}

	acked, _ := ld.ledger()
	if missing := rcv.hasAll(acked); missing > 0 {
		t.Errorf("VIOLATION: %d of %d acknowledged events were never delivered", missing, len(acked))
	}
	if last.Dead > 0 {
		t.Errorf("VIOLATION: %d events became dead letters (max attempts and max age are out of reach)", last.Dead)
	}
	// At-least-once, made precise: an event may reach the receiver twice
	// only if the outbox recorded an attempt without an answer (a timeout
	// or a reset after the receiver had already answered 200), as the
	// changelog in the file shows.
	redeliveries := 0
	dups := make(map[string]int)
	for id, ds := range rcv.delivered() {
		if len(ds) > 1 {
			redeliveries += len(ds) - 1
			dups[id] = len(ds)
		}
	}
	if len(dups) > 0 {
		unanswered, err := unansweredAttempts(db, dups)
		if err != nil {
			t.Fatalf("reading the changelog: %v", err)
		}
		for id, n := range dups {
			if n-1 > unanswered[id] {
				t.Errorf("VIOLATION: event %s reached the receiver %d times, but the outbox recorded only %d attempts without an answer", id, n, unanswered[id])
			}
		}
	}
	rcv.mu.Lock()
	for _, v := range rcv.violations {
		t.Errorf("VIOLATION: %s", v)
	}
	rcv.mu.Unlock()

	// Bounded: the second half may not exceed the first half by more than
	// half again plus a slack (a leak grows; a working set levels off).
	type series struct {
		name  string
		get   func(soakSample) float64
		slack float64
		unit  float64
		label string
	}
	var table strings.Builder
	table.WriteString("| measure | max, first half | max, second half | after drain |\n|---|---:|---:|---:|\n")
	half := len(samples) / 2
	for _, sr := range []series{
		{"goroutines", func(x soakSample) float64 { return x.Goroutines }, 50, 1, ""},
		{"heap in use", func(x soakSample) float64 { return x.HeapInuse }, 32 << 20, 1 << 20, " MiB"},
		{"RSS", func(x soakSample) float64 { return x.RSS }, 64 << 20, 1 << 20, " MiB"},
		{"file size", func(x soakSample) float64 { return x.FileSize }, 32 << 20, 1 << 20, " MiB"},
		{"pending", func(x soakSample) float64 { return float64(x.Pending) }, 2000, 1, ""},
	} {
		if half == 0 {
			t.Fatalf("only %d samples", len(samples))
		}
		a, b := 0.0, 0.0
		for i, x := range samples {
			if i < half {
				a = max(a, sr.get(x))
			} else {
				b = max(b, sr.get(x))
			}
		}
		after := "–"
		switch sr.name {
		case "goroutines":
			after = fmt.Sprintf("%.0f", m["go_goroutines"])
		case "heap in use":
			after = fmt.Sprintf("%.1f MiB", m["go_memstats_heap_inuse_bytes"]/(1<<20))
		case "pending":
			after = fmt.Sprint(last.Pending)
		}
		fmt.Fprintf(&table, "| %s | %.1f%s | %.1f%s | %s |\n", sr.name, a/sr.unit, sr.label, b/sr.unit, sr.label, after)
		if b > 1.5*a+sr.slack {
			t.Errorf("VIOLATION: %s keeps growing: max %.1f%s in the first half, %.1f%s in the second", sr.name, a/sr.unit, sr.label, b/sr.unit, sr.label)
		}
	}
	report(t, "**Soak** (`-soak %s`): load %s; receiver answers while faulty: %s; after healing, pending reached 0 in %.1fs; %d redeliveries, each matched by an attempt the outbox recorded as unanswered (timeout or reset) in the changelog.\n\n%s",
		soak, ld.summary(), faulty, drain.Seconds(), redeliveries, table.String())
}

// unansweredAttempts counts, per event in ids, the attempts the changelog of
// a closed file records as rescheduled without any HTTP status (a timeout,
// a reset, a refused connection).
func unansweredAttempts(path string, ids map[string]int) (map[string]int, error) {
	st, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := make(map[string]int)
	for from := uint64(0); ; {
		es, err := st.Changelog(from, 10000)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return out, nil
		}
		for _, e := range es {
			if _, ok := ids[e.ID]; ok && e.Op == store.OpReschedule && e.Record != nil && e.Record.LastStatus == 0 {
				out[e.ID]++
			}
		}
		from = es[len(es)-1].LSN + 1
	}
}
