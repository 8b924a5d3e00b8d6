package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// unit says how a figure is printed and whether more is better.
type unit uint8

const (
	perSecond unit = iota + 1 // events or requests per second: more is better
	millis                    // a latency in milliseconds: less is better
	micros                    // a short duration in microseconds: less is better
	mebibytes                 // a size in MiB: less is better
	seconds                   // a longer duration in seconds: less is better
	count                     // a count (What names what is counted): less is better
)

// figure is one measured value.
type figure struct {
	Value float64
	Unit  unit
	// What names what is counted for perSecond figures ("events", "puts",
	// "requests"); unused for the other units.
	What string
}

func (f figure) String() string {
	switch f.Unit {
	case perSecond:
		return thousands(f.Value) + " " + f.What + "/s"
	case millis:
		return strconv.FormatFloat(f.Value, 'f', 2, 64) + " ms"
	case micros:
		return strconv.FormatFloat(f.Value, 'f', 1, 64) + " µs"
	case mebibytes:
		return strconv.FormatFloat(f.Value, 'f', 1, 64) + " MiB"
	case seconds:
		return strconv.FormatFloat(f.Value, 'f', 1, 64) + " s"
	case count:
		return formatCount(f.Value) + " " + f.What
	}
	return strconv.FormatFloat(f.Value, 'g', 4, 64)
}

// row is one line of the results table: a figure beside the baseline that
// was measured in the same run, on the same machine, a moment before.
type row struct {
	Scenario string
	Figure   figure
	Baseline string
	Base     figure
}

// ratio is Figure/Base, or NaN when the baseline is zero.
func (r row) ratio() float64 {
	if r.Base.Value == 0 {
		return math.NaN()
	}
	return r.Figure.Value / r.Base.Value
}

func (r row) ratioString() string {
	q := r.ratio()
	if math.IsNaN(q) {
		return "n/a"
	}
	switch {
	case q >= 100:
		return strconv.FormatFloat(q, 'f', 0, 64) + "×"
	case q >= 10:
		return strconv.FormatFloat(q, 'f', 1, 64) + "×"
	case q > 0 && q < 0.1:
		// Two significant digits: 0.0046×, not 0.00×.
		return strconv.FormatFloat(q, 'g', 2, 64) + "×"
	}
	return strconv.FormatFloat(q, 'f', 2, 64) + "×"
}

// writeTable prints rows as a Markdown table.
func writeTable(w io.Writer, rows []row) error {
	var b strings.Builder
	b.WriteString("| scenario | outbox | baseline (same run) | baseline | ratio |\n")
	b.WriteString("|---|---:|---|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Figure, r.Baseline, r.Base, r.ratioString())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// thousands formats v rounded to an integer with thin separators every three
// digits (12,345).
func thousands(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// writeSweep prints the points of the concurrency sweep (the chart's data).
func writeSweep(w io.Writer, pts []concPoint, delay time.Duration) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nDelivery against concurrency (receiver works %s per request):\n\n", delay)
	b.WriteString("| concurrency | outbox | p50 | p99 | net/http client loop | p50 | p99 | ratio |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range pts {
		r := row{Figure: figure{p.Rate, perSecond, "events"}, Base: figure{p.BaseRate, perSecond, "requests"}}
		fmt.Fprintf(&b, "| %d | %s | %.2f ms | %.2f ms | %s | %.2f ms | %.2f ms | %s |\n",
			p.Concurrency, r.Figure, p.P50, p.P99, r.Base, p.BaseP50, p.BaseP99, r.ratioString())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
