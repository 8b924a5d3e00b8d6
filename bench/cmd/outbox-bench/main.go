// Command outbox-bench measures the outbox and prints a Markdown table in
// which every figure stands beside a baseline measured in the same run, on
// the same machine, a moment before, with their ratio: raw bbolt puts for
// durable enqueue, a plain net/http client loop for delivery, a handler that
// stores nothing for HTTP ingest. Ratios are what to compare between
// machines; absolute figures move with the machine and its neighbours.
//
// It also sweeps the delivery concurrency and draws throughput and latency
// against concurrency into a PNG chart.
//
// Usage:
//
//	outbox-bench [flags]
//
// The defaults run in under two minutes on a 2-core machine. Scale up with
// -duration, -events, -pending and -parked, e.g. the published figures
// (from the bench module's directory):
//
//	go run ./cmd/outbox-bench -chart docs/bench-concurrency.png
//	go run ./cmd/outbox-bench -pending 1000000 -parked 0,10000,100000,1000000
//	go run ./cmd/outbox-bench -only isolation -isolation-scale 1 -chart ''
//	go run ./cmd/outbox-bench -only isolation -isolation-scale 1 -isolation-parts 6 \
//		-isolation-chart docs/isolation-limit.png -chart ''
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(probeEnv) != "" {
		os.Exit(probeMain(os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "outbox-bench:", err)
		os.Exit(1)
	}
}

// config holds the parsed flags.
type config struct {
	Duration      time.Duration
	Events        int
	Payload       int
	Callers       int
	Batch         int
	HTTPBatch     int
	Pending       int
	Parked        []int
	Concurrency   []int
	ReceiverDelay time.Duration
	// IsolationScale sizes the isolation scenario: 1 is the size its
	// targets are stated at.
	IsolationScale float64
	// IsolationParts are the isolation scenario's parts to run (1 to 6;
	// 1 and 2 run together); nil runs every part.
	IsolationParts []int
	// IsolationChart is the PNG file for part 6's trace of the flapping
	// endpoint's in-flight limit (empty: none, and no sampling).
	IsolationChart string
	Dir            string
	Chart          string
	CPUProfile     string
	Only           *regexp.Regexp
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("outbox-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&c.Duration, "duration", 3*time.Second, "how long each timed measurement (and its baseline) runs")
	fs.IntVar(&c.Events, "events", 10000, "events in the drain and file-size scenario (and the most the sweep posts per point)")
	fs.IntVar(&c.Payload, "payload", 256, "payload bytes per event")
	fs.IntVar(&c.Callers, "callers", 64, "concurrent callers in the concurrent enqueue and HTTP ingest scenarios")
	fs.IntVar(&c.Batch, "batch", 1000, "events per Enqueue call (and per raw bbolt transaction) in the batch scenario")
	fs.IntVar(&c.HTTPBatch, "http-batch", 100, "events per request in the batch HTTP ingest scenario")
	fs.IntVar(&c.Pending, "pending", 100000, "pending events for the open-time and memory scenario")
	parked := fs.String("parked", "0,10000,100000", "comma-separated counts of parked events for the punctuation-cost scenario (the first is the baseline)")
	conc := fs.String("concurrency", "1,4,16,64", "comma-separated delivery concurrencies for the sweep and the chart")
	fs.DurationVar(&c.ReceiverDelay, "receiver-delay", 2*time.Millisecond, "work the local receiver does per request in the concurrency sweep, standing in for a remote endpoint")
	fs.Float64Var(&c.IsolationScale, "isolation-scale", 0.05, "size of the endpoint isolation scenario: 1 is 30,000 dead-endpoint events, a 30 s trickle, a 10 s hang, 500 ms answers and a 60 s outage; below 1 the counts, durations and the engine's timers shrink with it")
	parts := fs.String("isolation-parts", "", "comma-separated parts of the isolation scenario to run, 1 to 6 (1 and 2 run together; empty: all)")
	fs.StringVar(&c.IsolationChart, "isolation-chart", "", "PNG file for the flapping endpoint's in-flight limit and deliveries in flight over one adaptive run of isolation part 6 (empty: no chart)")
	fs.StringVar(&c.Dir, "dir", "", "directory for the database files (default: a new temporary directory, removed at the end)")
	fs.StringVar(&c.Chart, "chart", "outbox-bench.png", "PNG file for the throughput and latency chart (empty: no chart)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := fs.String("only", "", "run only the scenarios whose name matches this regular expression (enqueue, drain, ingest, latency, sweep, punctuation, open, size, isolation)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if c.Parked, err = intList("parked", *parked); err != nil {
		return c, err
	}
	if c.Concurrency, err = intList("concurrency", *conc); err != nil {
		return c, err
	}
	if *parts != "" {
		if c.IsolationParts, err = intList("isolation-parts", *parts); err != nil {
			return c, err
		}
		for _, p := range c.IsolationParts {
			if p > 6 {
				return c, fmt.Errorf("-isolation-parts: there is no part %d (1 to 6)", p)
			}
		}
	}
	if *only != "" {
		if c.Only, err = regexp.Compile(*only); err != nil {
			return c, fmt.Errorf("-only: %w", err)
		}
	}
	switch {
	case c.Duration <= 0:
		return c, fmt.Errorf("-duration must be positive")
	case c.Events <= 0 || c.Pending <= 0 || c.Callers <= 0 || c.Batch <= 0 || c.HTTPBatch <= 0:
		return c, fmt.Errorf("-events, -pending, -callers, -batch and -http-batch must be positive")
	case !(c.IsolationScale > 0 && c.IsolationScale <= 1):
		return c, fmt.Errorf("-isolation-scale must be above 0 and at most 1")
	case c.Payload < 0 || c.ReceiverDelay < 0:
		return c, fmt.Errorf("-payload and -receiver-delay must not be negative")
	}
	return c, nil
}

// intList parses "1,4,16" into positive integers (zero allowed for parked
// counts).
func intList(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || (n == 0 && name != "parked") {
			return nil, fmt.Errorf("-%s: %q is not a valid count", name, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: no values", name)
	}
	return out, nil
}

// bench is one run: its configuration, where it writes, and what it found.
type bench struct {
	cfg    config
	dir    string
	log    io.Writer
	rows   []row
	points []concPoint
	iso    []isoRow
	// limitTrace is part 6's sampled in-flight limit, for -isolation-chart.
	limitTrace *limitTrace
	// failures are broken promises (events lost) found by a scenario that
	// still printed its figures: the run fails after the tables.
	failures []string
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) add(r row) {
	b.rows = append(b.rows, r)
	b.logf("%s: %s vs %s %s (%s)", r.Scenario, r.Figure, r.Baseline, r.Base, r.ratioString())
}

// scenario is one named group of measurements.
type scenario struct {
	name string
	run  func(ctx context.Context, b *bench) error
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "outbox-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b := &bench{cfg: cfg, dir: dir, log: stderr}
	started := time.Now()
	for _, s := range scenarios() {
		if cfg.Only != nil && !cfg.Only.MatchString(s.name) {
			continue
		}
		b.logf("== %s", s.name)
		if err := s.run(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if len(b.rows) == 0 && len(b.iso) == 0 {
		return fmt.Errorf("no scenario matched -only %q", cfg.Only)
	}
	fmt.Fprintf(stdout, "outbox-bench %s (%s, %.0fs)\n\n", strings.Join(args, " "), machine(), time.Since(started).Seconds())
	if len(b.rows) > 0 {
		if err := writeTable(stdout, b.rows); err != nil {
			return err
		}
	}
	if len(b.points) > 0 {
		if err := writeSweep(stdout, b.points, cfg.ReceiverDelay); err != nil {
			return err
		}
	}
	if len(b.iso) > 0 {
		if err := writeIsolation(stdout, cfg.IsolationScale, b.iso); err != nil {
			return err
		}
	}
	if cfg.Chart != "" && len(b.points) > 0 {
		if err := writeChart(cfg.Chart, b.points, ms(cfg.ReceiverDelay)); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Fprintf(stdout, "\nchart: %s\n", cfg.Chart)
	}
	if cfg.IsolationChart != "" && b.limitTrace != nil {
		if err := writeLimitChart(cfg.IsolationChart, b.limitTrace); err != nil {
			return fmt.Errorf("isolation chart: %w", err)
		}
		fmt.Fprintf(stdout, "\nisolation chart: %s\n", cfg.IsolationChart)
	}
	if len(b.failures) > 0 {
		return fmt.Errorf("%d broken promises: %s", len(b.failures), strings.Join(b.failures, "; "))
	}
	return nil
}
