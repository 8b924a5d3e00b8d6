package main

import (
	"fmt"
	"image/color"
	"os"
	"strconv"

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

	return writePNG(path, img)
}

// writePNG writes img to path as a PNG file.
func writePNG(path string, img *vgimg.Canvas) error {
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

// writeLimitChart draws an endpoint's in-flight limit and its deliveries in
// flight against time over a flapping receiver's phases (503 phases
// shaded), into a PNG file.
func writeLimitChart(path string, tr *limitTrace) error {
	if len(tr.Samples) == 0 {
		return fmt.Errorf("no samples")
	}
	limit := make(plotter.XYs, len(tr.Samples))
	inFlight := make(plotter.XYs, len(tr.Samples))
	top := 1.0
	for i, s := range tr.Samples {
		limit[i] = plotter.XY{X: s.At, Y: float64(s.Limit)}
		inFlight[i] = plotter.XY{X: s.At, Y: float64(s.InFlight)}
		top = max(top, float64(s.Limit), float64(s.InFlight))
	}
	// Room above the lines for the legend, and a strip at the top for
	// the breaker.
	band := top * 1.04
	top *= 1.4
	end := tr.Samples[len(tr.Samples)-1].At

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Adaptive in-flight limit, receiver answering 200 and 503 in alternating %s phases", tr.Phase)
	p.X.Label.Text = "seconds since the receiver started"
	p.Y.Label.Text = "deliveries"
	p.X.Min, p.X.Max = 0, end
	// A tick every few phases: the default ticker leaves three on a
	// minute's run.
	step := 2 * tr.Phase.Seconds()
	for end/step > 25 {
		step *= 2
	}
	var ticks plot.ConstantTicks
	for x := 0.0; x <= end; x += step {
		ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', 4, 64)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Min, p.Y.Max = 0, top
	p.Legend.Top = true

	ph := tr.Phase.Seconds()
	var shaded *plotter.Polygon
	for lo := ph; lo < end; lo += 2 * ph {
		hi := min(lo+ph, end)
		poly, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: 0}, {X: hi, Y: 0}, {X: hi, Y: top}, {X: lo, Y: top}})
		if err != nil {
			return err
		}
		poly.Color = phaseColor
		poly.LineStyle.Width = 0
		p.Add(poly)
		shaded = poly
	}
	if shaded != nil {
		p.Legend.Add("receiver answers 503", shaded)
	}
	var open *plotter.Polygon
	for i := 0; i < len(tr.Samples); i++ {
		if !tr.Samples[i].BreakerOpen {
			continue
		}
		j := i
		for j+1 < len(tr.Samples) && tr.Samples[j+1].BreakerOpen {
			j++
		}
		lo, hi := tr.Samples[i].At, end
		if j+1 < len(tr.Samples) {
			hi = tr.Samples[j+1].At
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: lo, Y: band}, {X: hi, Y: band}, {X: hi, Y: band + top*0.04}, {X: lo, Y: band + top*0.04}})
		if err != nil {
			return err
		}
		poly.Color = breakerColor
		poly.LineStyle.Width = 0
		p.Add(poly)
		open = poly
		i = j
	}
	if open != nil {
		p.Legend.Add("breaker not closed", open)
	}
	if s := tr.Span.Seconds(); s < end {
		stop, err := plotter.NewLine(plotter.XYs{{X: s, Y: 0}, {X: s, Y: top}})
		if err != nil {
			return err
		}
		stop.Color, stop.Width = color.Gray{Y: 0x60}, vg.Points(1)
		stop.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(stop)
		p.Legend.Add("enqueueing stops", stop)
	}
	fl, err := plotter.NewLine(inFlight)
	if err != nil {
		return err
	}
	fl.Color, fl.Width = baseColor, vg.Points(1)
	ll, err := plotter.NewLine(limit)
	if err != nil {
		return err
	}
	ll.Color, ll.Width, ll.StepStyle = outboxColor, vg.Points(2), plotter.PostStep
	p.Add(fl, ll)
	p.Legend.Add("in-flight limit", ll)
	p.Legend.Add(fmt.Sprintf("deliveries in flight (sampled every %s)", limitSampleEvery), fl)
	p.Add(plotter.NewGrid())

	img := vgimg.New(vg.Points(900), vg.Points(380))
	p.Draw(draw.Crop(draw.New(img), vg.Points(8), -vg.Points(12), vg.Points(8), -vg.Points(8)))
	return writePNG(path, img)
}

// phaseColor shades the receiver's 503 phases; breakerColor marks the times the endpoint's breaker was not closed.
var (
	phaseColor   = color.RGBA{R: 0xe6, G: 0xe6, B: 0xe6, A: 0xff}
	breakerColor = color.RGBA{R: 0xe6, G: 0x7e, B: 0x22, A: 0xff}
)
