package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The open scenario re-executes this binary as a probe.
	if os.Getenv(probeEnv) != "" {
		os.Exit(probeMain(os.Stdout))
	}
	goleak.VerifyTestMain(m)
}

// TestRunPrintsEveryFigureBesideItsBaseline runs every scenario at a tiny
// scale and checks what a reader of docs/benchmarks.md relies on: one table
// row per figure, each with a baseline from the same run and their ratio,
// and a chart that is a valid PNG.
func TestRunPrintsEveryFigureBesideItsBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario (a few seconds)")
	}
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart.png")
	limitChart := filepath.Join(dir, "limit.png")
	var out, log bytes.Buffer
	err := run(context.Background(), []string{
		"-duration", "200ms", "-events", "300", "-pending", "2000", "-parked", "0,2000",
		"-concurrency", "1,4", "-callers", "8", "-batch", "100", "-http-batch", "10",
		"-receiver-delay", "1ms", "-dir", filepath.Join(dir, "db"), "-chart", chart,
		"-isolation-scale", "0.02", "-isolation-chart", limitChart,
	}, &out, &log)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, log.String())
	}
	// Three tables: the figures (5 cells a row), the sweep's points (8)
	// and the isolation figures (7, with a ratio where there is a
	// baseline, and a target).
	var rows, points, iso int
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| scenario") || strings.HasPrefix(line, "| concurrency") || strings.HasPrefix(line, "| figure") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		ratio := cells[len(cells)-1]
		switch len(cells) {
		case 5:
			rows++
		case 8:
			points++
		case 7:
			iso++
			if ratio = cells[4]; ratio == "—" && cells[3] == "—" {
				continue
			}
		default:
			t.Errorf("row %q has %d cells, want 5, 7 or 8", line, len(cells))
			continue
		}
		if !strings.HasSuffix(ratio, "×") {
			t.Errorf("row %q: ratio %q is not a ratio", line, ratio)
		}
	}
	if iso < 10 {
		t.Errorf("isolation table has %d rows, want at least 10:\n%s", iso, out.String())
	}
	if points != 2 {
		t.Errorf("sweep table has %d points, want 2 (concurrency 1 and 4):\n%s", points, out.String())
	}
	for _, want := range []string{"durable enqueue, 1 caller", "durable enqueue, 8 callers", "drain 300 events",
		"file size after offline compaction", "HTTP ingest, 1 event/request", "HTTP ingest, 10 events/request",
		"enqueue → delivery p99", "concurrency 4", "punctuation (median), 2,000 parked", "open, 2,000 pending", "RSS after open",
		"1. healthy p99 beside", "2. healthy p99 beside", "3. fast endpoint's drain", "4. connections a resetting endpoint",
		"5. drain of", "6. events lost"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if rows < 17 {
		t.Errorf("table has %d rows, want at least 17:\n%s", rows, out.String())
	}
	checkPNG(t, chart)
	checkPNG(t, limitChart)
}

// checkPNG fails t unless path is a PNG image large enough to read.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 200 {
		t.Errorf("%s is %dx%d, too small to read", path, b.Dx(), b.Dy())
	}
}

// TestIsolationPartsRunsOnlyThoseParts runs part 6 alone and checks that
// its figures, and no other part's, are printed.
func TestIsolationPartsRunsOnlyThoseParts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the flapping part (a few seconds)")
	}
	dir := t.TempDir()
	var out, log bytes.Buffer
	err := run(context.Background(), []string{
		"-only", "isolation", "-isolation-parts", "6", "-isolation-scale", "0.02",
		"-dir", filepath.Join(dir, "db"), "-chart", "",
	}, &out, &log)
	if err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, log.String())
	}
	if !strings.Contains(out.String(), "| 6. events lost") {
		t.Errorf("no part 6 figures:\n%s", out.String())
	}
	for _, other := range []string{"\n| 1. ", "\n| 2. ", "\n| 3. ", "\n| 4. ", "\n| 5. "} {
		if strings.Contains(out.String(), other) {
			t.Errorf("-isolation-parts 6 printed a %q row:\n%s", other[1:], out.String())
		}
	}
	if strings.Contains(out.String(), "isolation chart") {
		t.Errorf("no -isolation-chart, yet a chart was written:\n%s", out.String())
	}
}

func TestLimitChartDrawsATrace(t *testing.T) {
	tr := &limitTrace{Phase: 2 * time.Second, Span: 20 * time.Second}
	for i := range 500 {
		at := float64(i) * 0.05
		tr.Samples = append(tr.Samples, limitSample{At: at, Limit: 4 + i%40, InFlight: i % 7, BreakerOpen: int(at)%4 >= 2})
	}
	path := filepath.Join(t.TempDir(), "limit.png")
	if err := writeLimitChart(path, tr); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	if err := writeLimitChart(path, &limitTrace{Phase: time.Second}); err == nil {
		t.Error("a trace without samples drew a chart")
	}
}

func TestFlagsRefuseNonsense(t *testing.T) {
	for _, args := range [][]string{
		{"-concurrency", "0"},
		{"-concurrency", "x"},
		{"-parked", "-1"},
		{"-duration", "0s"},
		{"-events", "0"},
		{"-isolation-scale", "0"},
		{"-isolation-scale", "2"},
		{"-isolation-parts", "0"},
		{"-isolation-parts", "7"},
		{"-isolation-parts", "x"},
		{"-only", "("},
		{"stray"},
	} {
		var log bytes.Buffer
		if err := run(context.Background(), args, &bytes.Buffer{}, &log); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -45000: "-45,000"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
