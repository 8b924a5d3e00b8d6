package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/outboxd/outbox/outbox"
	"github.com/outboxd/outbox/store"
)

// fill writes n pending events to a new store file at path, due at due, in
// transactions of 1,000, as the outbox itself would have stored them.
func (b *bench) fill(ctx context.Context, path string, n int, due time.Time) error {
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return err
	}
	p := b.payload()
	now := time.Now().UTC()
	for done := 0; done < n; {
		k := min(1000, n-done)
		recs := make([]*store.Record, k)
		for i := range recs {
			id, err := uuid.NewV7()
			if err != nil {
				st.Close()
				return err
			}
			recs[i] = &store.Record{
				ID: id.String(), Destination: "recv", Endpoint: "recv", Method: "POST",
				Payload: p, CreatedAt: now, NextAttemptAt: due,
			}
		}
		if _, err := st.Insert(ctx, recs); err != nil {
			st.Close()
			return err
		}
		done += k
	}
	return st.Close()
}

// punctuationScenario: the cost of one delivery punctuation when nothing is
// due, with 0, 10k, 100k (and more, per -parked) events parked for later.
// The due index makes it independent of the backlog: flat is the goal. The
// first count of -parked is the baseline of the others.
func punctuationScenario(ctx context.Context, b *bench) error {
	rcv, err := startReceiver(0)
	if err != nil {
		return err
	}
	defer rcv.Close()
	window := max(min(b.cfg.Duration, 2*time.Second), 500*time.Millisecond)
	var base figure
	for i, n := range b.cfg.Parked {
		path := filepath.Join(b.dir, fmt.Sprintf("parked-%d.db", n))
		t0 := time.Now()
		if err := b.fill(ctx, path, n, time.Now().Add(24*time.Hour)); err != nil {
			return err
		}
		b.logf("%s parked events written in %.1fs", thousands(float64(n)), time.Since(t0).Seconds())

		var mu sync.Mutex
		var ds []time.Duration
		sink, err := newSink(rcv.URL, 4)
		if err != nil {
			return err
		}
		o, err := outbox.Open(path, outbox.Config{Sink: sink, Interval: 10 * time.Millisecond, Hooks: outbox.Hooks{
			OnPunctuation: func(d time.Duration, _ int) {
				mu.Lock()
				ds = append(ds, d)
				mu.Unlock()
			},
		}})
		if err != nil {
			sink.Close()
			return err
		}
		err = o.Start()
		if err == nil {
			select {
			case <-time.After(window):
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		serr := o.Stop(context.Background())
		sink.Close()
		os.Remove(path)
		if err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		mu.Lock()
		if len(ds) < 20 {
			mu.Unlock()
			return fmt.Errorf("only %d punctuations ran in %s", len(ds), window)
		}
		ds = ds[10:] // the first ones warm caches and the scheduler up
		med := figure{float64(percentile(ds, 50)) / float64(time.Microsecond), micros, ""}
		b.logf("%s parked: %d punctuations, median %s, p99 %.1f µs", thousands(float64(n)), len(ds), med, float64(percentile(ds, 99))/float64(time.Microsecond))
		mu.Unlock()
		if i == 0 {
			base = med
			continue
		}
		b.add(row{fmt.Sprintf("punctuation (median), %s parked", thousands(float64(n))), med,
			fmt.Sprintf("punctuation, %s parked", thousands(float64(b.cfg.Parked[0]))), base})
	}
	return nil
}

// probeEnv, when set to a database path, makes the program a probe: it
// opens that outbox, measures, prints a probeResult as JSON and exits. The
// open scenario runs probes as child processes so that each measures one
// open in a fresh process, without the heap of the scenarios before it.
const probeEnv = "OUTBOX_BENCH_PROBE"

// probeResult is what one probe measured.
type probeResult struct {
	OpenSeconds float64 `json:"open_seconds"`
	HeapBytes   uint64  `json:"heap_bytes"`
	RSSBytes    uint64  `json:"rss_bytes"`
	Pending     int     `json:"pending"`
}

// discard is the Sink of a probe, which never starts delivering.
type discard struct{}

func (discard) Deliver(context.Context, *outbox.Delivery) outbox.Result {
	return outbox.Result{Action: outbox.ActionSuccess}
}

func probeMain(w io.Writer) int {
	path := os.Getenv(probeEnv)
	start := time.Now()
	o, err := outbox.Open(path, outbox.Config{Sink: discard{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	res := probeResult{OpenSeconds: time.Since(start).Seconds()}
	res.Pending = o.Stats().Pending
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	res.HeapBytes = m.HeapInuse
	res.RSSBytes, _ = rss()
	serr := o.Stop(context.Background())
	if err == nil {
		err = serr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		return 1
	}
	if err := json.NewEncoder(w).Encode(res); err != nil {
		return 1
	}
	return 0
}

// rss returns the resident set size of this process (Linux).
func rss() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("VmRSS not in /proc/self/status")
}

// runProbe runs this program as a probe on path.
func runProbe(ctx context.Context, path string) (probeResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return probeResult{}, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+path)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return probeResult{}, fmt.Errorf("probe %s: %w: %s", path, err, bytes.TrimSpace(errb.Bytes()))
	}
	var res probeResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return probeResult{}, fmt.Errorf("probe %s: %w (output %q)", path, err, out.String())
	}
	return res, nil
}

// openScenario: opening an outbox file with -pending pending events (time to
// Open, then heap in use and RSS right after), against opening an empty one,
// each the median of five fresh processes.
func openScenario(ctx context.Context, b *bench) error {
	empty := filepath.Join(b.dir, "open-empty.db")
	full := filepath.Join(b.dir, "open-full.db")
	defer os.Remove(empty)
	defer os.Remove(full)
	if err := b.fill(ctx, empty, 0, time.Now()); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.fill(ctx, full, b.cfg.Pending, time.Now().Add(24*time.Hour)); err != nil {
		return err
	}
	b.logf("%s pending events written in %.1fs", thousands(float64(b.cfg.Pending)), time.Since(t0).Seconds())
	// Five probes of each file, taking turns; the medians are reported (one
	// open is a few milliseconds, well within the noise of a busy machine).
	const probes = 5
	var bases, ress []probeResult
	for range probes {
		base, err := runProbe(ctx, empty)
		if err != nil {
			return err
		}
		res, err := runProbe(ctx, full)
		if err != nil {
			return err
		}
		if res.Pending != b.cfg.Pending {
			return fmt.Errorf("probe saw %d pending events, want %d", res.Pending, b.cfg.Pending)
		}
		bases, ress = append(bases, base), append(ress, res)
	}
	base, res := medianProbe(bases), medianProbe(ress)
	for i := range bases {
		b.logf("probe %d: open %.2f ms empty, %.2f ms with %s pending", i+1, bases[i].OpenSeconds*1000, ress[i].OpenSeconds*1000, thousands(float64(b.cfg.Pending)))
	}
	n := thousands(float64(b.cfg.Pending))
	b.add(row{fmt.Sprintf("open, %s pending", n), figure{res.OpenSeconds * 1000, millis, ""}, "open, empty file", figure{base.OpenSeconds * 1000, millis, ""}})
	b.add(row{fmt.Sprintf("heap in use after open, %s pending", n), figure{float64(res.HeapBytes) / (1 << 20), mebibytes, ""}, "same, empty file", figure{float64(base.HeapBytes) / (1 << 20), mebibytes, ""}})
	b.add(row{fmt.Sprintf("RSS after open, %s pending", n), figure{float64(res.RSSBytes) / (1 << 20), mebibytes, ""}, "same, empty file", figure{float64(base.RSSBytes) / (1 << 20), mebibytes, ""}})
	return nil
}

// medianProbe returns the median of each measure.
func medianProbe(rs []probeResult) probeResult {
	med := func(f func(probeResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return probeResult{
		OpenSeconds: med(func(r probeResult) float64 { return r.OpenSeconds }),
		HeapBytes:   uint64(med(func(r probeResult) float64 { return float64(r.HeapBytes) })),
		RSSBytes:    uint64(med(func(r probeResult) float64 { return float64(r.RSSBytes) })),
		Pending:     rs[0].Pending,
	}
}
