package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// concPoint is what the concurrency sweep measured at one concurrency.
type concPoint struct {
	Concurrency int
	// Outbox: events delivered per second while draining a backlog, and the
	// median and 99th percentile of one delivery attempt.
	Rate     float64
	P50, P99 float64 // ms
	// Baseline: a plain net/http client loop at the same concurrency against
	// the same receiver.
	BaseRate         float64
	BaseP50, BaseP99 float64 // ms
}

// writeChart draws delivery throughput (left) and latency (right) against
// concurrency, outbox beside baseline, into a PNG file.
func writeChart(path string, pts []concPoint, receiverDelayMS float64) error {
	if len(pts) == 0 {
		return fmt.Errorf("chart: no points")
	}
	xy := func(f func(concPoint) float64) plotter.XYs {
		out := make(plotter.XYs, len(pts))
		for i, p := range pts {
			out[i].X = float64(p.Concurrency)
			out[i].Y = f(p)
		}
		return out
	}
	log2 := plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, p := range pts {
		ticks = append(ticks, plot.Tick{Value: float64(p.Concurrency), Label: fmt.Sprint(p.Concurrency)})
	}

	thr := plot.New()
	thr.Title.Text = "Delivery throughput"
	thr.X.Label.Text = "concurrency (deliveries in flight)"
	thr.Y.Label.Text = "events/s"
	thr.X.Scale, thr.X.Tick.Marker = log2, ticks
	thr.Legend.Top, thr.Legend.Left = true, true
	if err := addLine(thr, "outbox", xy(func(p concPoint) float64 { return p.Rate }), outboxColor, false); err != nil {
		return err
	}
	if err := addLine(thr, "net/http client loop", xy(func(p concPoint) float64 { return p.BaseRate }), baseColor, false); err != nil {
		return err
	}

	lat := plot.New()
	lat.Title.Text = fmt.Sprintf("Delivery latency (receiver works %.1f ms)", receiverDelayMS)
	lat.X.Label.Text = "concurrency (deliveries in flight)"
	lat.Y.Label.Text = "ms per attempt"
	lat.X.Scale, lat.X.Tick.Marker = log2, ticks
	lat.Legend.Top, lat.Legend.Left = true, true
	for _, l := range []struct {
		name   string
		f      func(concPoint) float64
		c      color.Color
		dashed bool
	}{
		{"outbox p50", func(p concPoint) float64 { return p.P50 }, outboxColor, false},
		{"outbox p99", func(p concPoint) float64 { return p.P99 }, outboxColor, true},
		{"net/http p50", func(p concPoint) float64 { return p.BaseP50 }, baseColor, false},
		{"net/http p99", func(p concPoint) float64 { return p.BaseP99 }, baseColor, true},
	} {
		if err := addLine(lat, l.name, xy(l.f), l.c, l.dashed); err != nil {
			return err
		}
	}
	lat.Y.Min = 0
	thr.Y.Min = 0

	img := vgimg.New(vg.Points(900), vg.Points(380))
	dc := draw.New(img)
	tiles := draw.Tiles{
		Rows: 1, Cols: 2,
		PadX: vg.Points(24), PadTop: vg.Points(8), PadBottom: vg.Points(8),
		PadLeft: vg.Points(8), PadRight: vg.Points(12),
	}
	plots := [][]*plot.Plot{{thr, lat}}
	canvases := plot.Align(plots, tiles, dc)
	thr.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var (
	outboxColor = color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff}
	baseColor   = color.RGBA{R: 0x29, G: 0x80, B: 0xb9, A: 0xff}
)

// addLine adds a line with point markers and a legend entry.
func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color, l.Width = c, vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	pts.Color = c
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}
