package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/jitterretry/jitterretry/internal/sim"
)

// Chart size: small enough to commit, as in the blog's figures.
const (
	chartWidth  = 6 * vg.Inch
	chartHeight = 4 * vg.Inch
)

// plotOCC writes occ_calls.{svg,png} and occ_time.{svg,png} into dir: one line per
// strategy against N. Like the blog's time figure, the time chart leaves out
// capped exponential backoff without jitter, which is off its scale.
func plotOCC(dir string, rows []sim.OCCRow, runs int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := []struct {
		file, title, ylabel string
		value               func(sim.OCCRow) float64
		skip                map[string]bool
	}{
		{"occ_calls", fmt.Sprintf("Calls (writes) against clients, mean of %d runs", runs), "calls",
			func(r sim.OCCRow) float64 { return r.Calls.Mean }, nil},
		{"occ_time", fmt.Sprintf("Time to the last success, mean of %d runs (exponential omitted)", runs), "milliseconds",
			func(r sim.OCCRow) float64 { return r.TimeMs.Mean }, map[string]bool{sim.StrategyExponential: true}},
	}
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title
		p.X.Label.Text = "clients (N)"
		p.Y.Label.Text = c.ylabel
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		p.X.Tick.Marker = clientTicks(rows)
		p.Add(plotter.NewGrid())
		for i, name := range strategiesOf(rows) {
			if c.skip[name] {
				continue
			}
			var xys plotter.XYs
			for _, r := range rows {
				if r.Strategy == name {
					xys = append(xys, plotter.XY{X: float64(r.Clients), Y: c.value(r)})
				}
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			line.Color = plotutil.Color(i)
			if c, ok := strategyColors[name]; ok {
				line.Color = c
			}
			line.Dashes = plotutil.Dashes(i)
			line.Width = vg.Points(1.5)
			p.Add(line)
			p.Legend.Add(name, line)
		}
		for _, ext := range []string{"svg", "png"} {
			if err := p.Save(chartWidth, chartHeight, filepath.Join(dir, c.file+"."+ext)); err != nil {
				return err
			}
		}
	}
	return nil
}

// strategiesOf returns the strategies of rows in their first-seen order, the
// order of -strategies, which fixes each line's colour and dash.
func strategiesOf(rows []sim.OCCRow) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range rows {
		if !seen[r.Strategy] {
			seen[r.Strategy] = true
			names = append(names, r.Strategy)
		}
	}
	return names
}

// strategyColors keeps each of the blog's strategies in one colour across
// charts; other strategies take plotutil's palette.
var strategyColors = map[string]color.Color{
	sim.StrategyNone:         color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff},
	sim.StrategyExponential:  color.RGBA{A: 0xff},
	sim.StrategyFull:         color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	sim.StrategyEqual:        color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	sim.StrategyDecorrelated: color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	sim.StrategySDK:          color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// clientTicks labels the x axis with whole numbers of clients: the first N
// and every step after it, and the last N when it falls between.
func clientTicks(rows []sim.OCCRow) plot.Ticker {
	lo, hi := rows[0].Clients, rows[0].Clients
	for _, r := range rows {
		lo, hi = min(lo, r.Clients), max(hi, r.Clients)
	}
	step := max(1, (hi-lo)/9)
	var ticks []plot.Tick
	v := lo
	for ; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: float64(v), Label: strconv.Itoa(v)})
	}
	if last := v - step; hi-last > step/2 {
		ticks = append(ticks, plot.Tick{Value: float64(hi), Label: strconv.Itoa(hi)})
	}
	return plot.ConstantTicks(ticks)
}
