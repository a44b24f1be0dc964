package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The chart is the plot, with the legend to its right so that no line
// hides behind it.
const (
	chartWidth  = 8 * vg.Inch
	chartHeight = 4.5 * vg.Inch
	legendWidth = 1.9 * vg.Inch
)

// plotFile returns the base name of the chart of fleet clients of k
// goroutines in scenario s; one client keeps the name it had before fleets.
func plotFile(fleet, k int, s string) string {
	if fleet > 1 {
		return fmt.Sprintf("throttle_f%d_k%d_%s", fleet, k, s)
	}
	return fmt.Sprintf("throttle_k%d_%s", k, s)
}

// plotRequests writes a chart of the server-seen requests per second (throttled
// included; for a fleet, of all its clients), one line per mode, with the
// capacity as a dashed black line, as SVG and PNG into dir. The y axis is
// logarithmic so that a storm of thousands and a starvation of a few
// requests a second both show; a second with no request is drawn at 1.
func plotRequests(dir string, fleet, k int, s scenario, c float64, results []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dur := s.duration()
	n := int(math.Ceil(dur.Seconds()))
	p := newTimePlot(fmt.Sprintf("Server requests per second (throttled included), %s, %s", runLabel(fleet, k), s.name), n)
	p.Y.Label.Text = "requests/s (log scale)"
	logY(p)
	p.Y.Min = 1
	lg := newLegend()
	var ymax float64
	if !math.IsInf(c, 1) { // an unlimited capacity has no line
		ymax = 2 * c
		capLine, err := capacityLine(s, c, n)
		if err != nil {
			return err
		}
		p.Add(capLine)
		lg.Add("capacity", capLine)
	}

	for i, r := range results {
		var xys plotter.XYs
		for j := range n {
			var v float64
			if j < len(r.seconds) {
				v = float64(r.seconds[j].requests)
			}
			ymax = max(ymax, v)
			xys = append(xys, plotter.XY{X: float64(j) + 0.5, Y: max(v, 1)})
		}
		line, err := modeLine(xys, i)
		if err != nil {
			return err
		}
		p.Add(line)
		lg.Add(r.mode, line)
	}
	p.Y.Max = max(ymax, 1) * 1.5
	return saveChart(filepath.Join(dir, plotFile(fleet, k, s.name)), chartHeight, lg, p)
}

// modeLine returns xys as a line in the style of the ith mode of a chart,
// the same in every chart of a run, so that a mode keeps its colour from
// one chart to the next.
func modeLine(xys plotter.XYs, i int) (*plotter.Line, error) {
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = plotutil.Color(i)
	line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
	line.Width = vg.Points(1.5)
	return line, nil
}

// saveChart writes plots, stacked, with lg beside them, as base.svg and
// base.png, chartWidth wide and height high.
func saveChart(base string, height vg.Length, lg plot.Legend, plots ...*plot.Plot) error {
	svg := vgsvg.New(chartWidth, height)
	drawChart(svg, lg, plots...)
	if err := writeChart(base+".svg", svg); err != nil {
		return err
	}
	png := vgimg.New(chartWidth, height)
	drawChart(png, lg, plots...)
	return writeChart(base+".png", vgimg.PngCanvas{Canvas: png})
}

// newTimePlot returns a plot titled title over the first n seconds of a
// scenario, with a grid.
func newTimePlot(title string, n int) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.X.Min, p.X.Max = 0, float64(n)
	p.Add(plotter.NewGrid())
	return p
}

// logY gives p a logarithmic y axis, so that a storm of thousands and a
// trickle of a few a second both show.
func logY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
}

// newLegend returns the legend of a chart, which drawChart puts beside the
// plots.
func newLegend() plot.Legend {
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	return lg
}

// capacityLine returns the capacity of s at nominal c per second over its
// first n seconds, each second's average, as a dashed black step line: what
// the requests chart's per-second counts compare with.
func capacityLine(s scenario, c float64, n int) (*plotter.Line, error) {
	dur := s.duration()
	var xys plotter.XYs
	for i := range n {
		from := time.Duration(i) * time.Second
		v := s.capacityBetween(c, from, min(from+time.Second, dur)) / min(time.Second, dur-from).Seconds()
		xys = append(xys, plotter.XY{X: float64(i), Y: v}, plotter.XY{X: float64(i + 1), Y: v})
	}
	return referenceLine(xys)
}

// referenceLine returns xys as a dashed black line, the style of a
// capacity that the modes' lines compare with.
func referenceLine(xys plotter.XYs) (*plotter.Line, error) {
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = color.Black
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	line.Width = vg.Points(1)
	return line, nil
}

// drawChart draws plots top to bottom on the left of c, their data areas
// aligned so that stacked plots share the x axis's positions, and lg in the
// strip on its right.
func drawChart(c vg.CanvasSizer, lg plot.Legend, plots ...*plot.Plot) {
	dc := draw.New(c)
	split := dc.Max.X - legendWidth
	left := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: dc.Min, Max: vg.Point{X: split, Y: dc.Max.Y}}}
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Points(12)}
	for i, cs := range plot.Align(rows, tiles, left) {
		plots[i].Draw(cs[0])
	}
	lg.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: split + vg.Points(6), Y: dc.Min.Y}, Max: vg.Point{X: dc.Max.X, Y: dc.Max.Y - vg.Points(24)}}})
}

// writeChart writes the drawn chart w into the file name.
func writeChart(name string, w interface {
	WriteTo(io.Writer) (int64, error)
}) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
