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
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Server requests per second (throttled included), %s, %s", runLabel(fleet, k), s.name)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests/s (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 1
	p.X.Min = 0
	lg := plot.NewLegend()
	lg.Top, lg.Left = true, true
	p.Add(plotter.NewGrid())

	dur := s.duration()
	n := int(math.Ceil(dur.Seconds()))
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
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		line.Width = vg.Points(1.5)
		p.Add(line)
		lg.Add(r.mode, line)
	}
	p.Y.Max = max(ymax, 1) * 1.5
	base := filepath.Join(dir, plotFile(fleet, k, s.name))
	svg := vgsvg.New(chartWidth, chartHeight)
	drawChart(svg, p, lg)
	if err := writeChart(base+".svg", svg); err != nil {
		return err
	}
	png := vgimg.New(chartWidth, chartHeight)
	drawChart(png, p, lg)
	return writeChart(base+".png", vgimg.PngCanvas{Canvas: png})
}

// capacityLine returns the capacity of s at nominal c per second over its
// first n seconds, as a dashed black step line.
func capacityLine(s scenario, c float64, n int) (*plotter.Line, error) {
	dur := s.duration()
	var xys plotter.XYs
	for i := range n {
		from := time.Duration(i) * time.Second
		v := s.capacityBetween(c, from, min(from+time.Second, dur)) / min(time.Second, dur-from).Seconds()
		xys = append(xys, plotter.XY{X: float64(i), Y: v}, plotter.XY{X: float64(i + 1), Y: v})
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.Color = color.Black
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	line.Width = vg.Points(1)
	return line, nil
}

// drawChart draws p on the left of c and lg in the strip on its right.
func drawChart(c vg.CanvasSizer, p *plot.Plot, lg plot.Legend) {
	dc := draw.New(c)
	split := dc.Max.X - legendWidth
	p.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: dc.Min, Max: vg.Point{X: split, Y: dc.Max.Y}}})
	lg.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: split + vg.Points(6), Y: dc.Min.Y}, Max: vg.Point{X: dc.Max.X, Y: dc.Max.Y - vg.Points(24)}}})
}

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
