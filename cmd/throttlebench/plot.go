package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

const (
	chartWidth  = 7 * vg.Inch
	chartHeight = 4.5 * vg.Inch
)

// plotFile returns the base name of the chart of k goroutines in scenario s.
func plotFile(k int, s string) string { return fmt.Sprintf("throttle_k%d_%s", k, s) }

// plotRequests writes a chart of the server-seen requests per second (throttled
// included), one line per mode, with the capacity as a dashed black line, as
// SVG and PNG into dir. The y axis is logarithmic so that a storm of
// thousands and a starvation of a few requests a second both show; a second
// with no request is drawn at 1.
func plotRequests(dir string, k int, s scenario, c float64, results []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Server requests per second (throttled included), K=%d, %s", k, s.name)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "requests/s (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 1
	p.X.Min = 0
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())

	dur := s.duration()
	n := int(math.Ceil(dur.Seconds()))
	ymax := 2 * c
	var capXY plotter.XYs
	for i := range n {
		from := time.Duration(i) * time.Second
		v := s.capacityBetween(c, from, min(from+time.Second, dur)) / min(time.Second, dur-from).Seconds()
		capXY = append(capXY, plotter.XY{X: float64(i), Y: v}, plotter.XY{X: float64(i + 1), Y: v})
	}
	capLine, err := plotter.NewLine(capXY)
	if err != nil {
		return err
	}
	capLine.Color = color.Black
	capLine.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	capLine.Width = vg.Points(1)
	p.Add(capLine)
	p.Legend.Add("capacity", capLine)

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
		p.Legend.Add(r.mode, line)
	}
	p.Y.Max = ymax * 3 // room for the legend
	for _, ext := range []string{"svg", "png"} {
		if err := p.Save(chartWidth, chartHeight, filepath.Join(dir, plotFile(k, s.name)+"."+ext)); err != nil {
			return err
		}
	}
	return nil
}
