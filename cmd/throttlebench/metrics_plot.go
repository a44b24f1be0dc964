package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// metricsChartHeight is the height of the gauges' chart, two plots high.
const metricsChartHeight = 8 * vg.Inch

// metricsFile returns the base name of the gauges' chart of fleet clients
// of k goroutines in scenario s: the requests chart's, so that the two sort
// together.
func metricsFile(fleet, k int, s string) string { return plotFile(fleet, k, s) + "_metrics" }

// plotMetrics writes the chart of the retryers' gauges sampled in the runs
// of results (ours' modes, with -plot-metrics; the others have none), for
// fleet clients of k goroutines in scenario s at nominal capacity c, as SVG
// and PNG into dir. Above, the retry bucket's tokens left; below, on a
// logarithmic axis, the rate the send-rate limiter allows, with the
// capacity (for a fleet, each client's fair share of it) as a dashed black
// line, phase by phase. One line per mode, in the mode's colour of the requests chart. For
// a fleet the line is the mean over the clients, and a translucent band
// runs from the least to the most; the rate is over the clients whose
// limiter was limited at that instant, and the line breaks where none was.
// It writes nothing when no result has samples.
func plotMetrics(dir string, fleet, k int, s scenario, c float64, results []result) error {
	if !slices.ContainsFunc(results, func(r result) bool { return len(r.gauges) > 0 }) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := int(math.Ceil(s.duration().Seconds()))
	// The instruments' names go in the titles: as the y axes' labels they
	// would be longer than the plots are high, which gonum makes room for
	// above the plot. What a fleet's lines are goes under the shared x
	// axis, the one place wide enough.
	tokens := newTimePlot(fmt.Sprintf("Retry bucket tokens left (%s), %s, %s", instBucketTokens, runLabel(fleet, k), s.name), n)
	tokens.Y.Label.Text = "tokens"
	tokens.Y.Min = 0
	rate := newTimePlot(fmt.Sprintf("Send rate the limiter allows (%s)", instSendRate), n)
	rate.Y.Label.Text = "requests/s (log scale)"
	logY(rate)
	if fleet > 1 {
		rate.X.Label.Text += fmt.Sprintf("; lines: the mean of the %d clients' values, bands: the least to the most", fleet)
	}
	lg := newLegend()

	rateMin, rateMax := math.Inf(1), math.Inf(-1)
	if !math.IsInf(c, 1) { // an unlimited capacity has no line
		capLine, err := phaseLine(s, c/float64(fleet))
		if err != nil {
			return err
		}
		rate.Add(capLine)
		name := "capacity"
		if fleet > 1 {
			name = fmt.Sprintf("capacity / %d", fleet)
		}
		lg.Add(name, capLine)
		for _, xy := range capLine.XYs {
			rateMin, rateMax = min(rateMin, xy.Y), max(rateMax, xy.Y)
		}
	}

	var tokensMax float64
	anyRate := false
	for i, r := range results { // i, not a count of the sampled: the requests chart's colours
		line, err := addSpread(tokens, r.gauges, func(g gaugeSample) spread { return g.tokens }, i, fleet > 1)
		if err != nil {
			return err
		}
		if line != nil {
			lg.Add(r.mode, line)
		}
		if _, err := addSpread(rate, r.gauges, func(g gaugeSample) spread { return g.rate }, i, fleet > 1); err != nil {
			return err
		}
		for _, g := range r.gauges {
			tokensMax = max(tokensMax, g.tokens.max)
			if g.rate.n > 0 {
				anyRate = true
				rateMin, rateMax = min(rateMin, g.rate.min), max(rateMax, g.rate.max)
			}
		}
	}
	tokens.Y.Max = max(tokensMax, 1) * 1.1 // a full bucket's line clear of the frame
	if !anyRate {
		rate.Title.Text += ": none reported (no limiter on, or unlimited throughout)"
	}
	if rateMin > rateMax { // neither a rate nor a capacity to show
		rateMin, rateMax = 1, 1000
	}
	rate.Y.Min, rate.Y.Max = rateMin/1.5, rateMax*1.5
	return saveChart(filepath.Join(dir, metricsFile(fleet, k, s.name)), metricsChartHeight, lg, tokens, rate)
}

// phaseLine returns the capacity of s at nominal c per second, phase by
// phase, as a dashed black step line: what gauges sampled many times a
// second compare with, where capacityLine's averages over whole seconds
// would blur a change within a second.
func phaseLine(s scenario, c float64) (*plotter.Line, error) {
	var xys plotter.XYs
	var at time.Duration
	for _, p := range s.phases {
		xys = append(xys, plotter.XY{X: at.Seconds(), Y: c * p.frac}, plotter.XY{X: (at + p.dur).Seconds(), Y: c * p.frac})
		at += p.dur
	}
	return referenceLine(xys)
}

// addSpread adds gauge v of samples to p in the style of the ith mode: its
// mean as a line, broken where no client reported v, and with band the
// least to the most of the clients as a translucent band behind it. A lone
// sample between breaks is a dot. It returns a piece of the line for the
// legend, nil when no sample has v.
func addSpread(p *plot.Plot, samples []gaugeSample, v func(gaugeSample) spread, i int, band bool) (*plotter.Line, error) {
	var legend *plotter.Line
	for _, run := range reported(samples, v) {
		mean := make(plotter.XYs, len(run))
		for j, g := range run {
			mean[j] = plotter.XY{X: g.at.Seconds(), Y: v(g).mean}
		}
		if band && len(run) > 1 {
			// The band's outline: along the most forwards, back along the
			// least.
			ring := make(plotter.XYs, 0, 2*len(run))
			for _, g := range run {
				ring = append(ring, plotter.XY{X: g.at.Seconds(), Y: v(g).max})
			}
			for _, g := range slices.Backward(run) {
				ring = append(ring, plotter.XY{X: g.at.Seconds(), Y: v(g).min})
			}
			poly, err := plotter.NewPolygon(ring)
			if err != nil {
				return nil, err
			}
			poly.Color = translucent(plotutil.Color(i))
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		line, err := modeLine(mean, i)
		if err != nil {
			return nil, err
		}
		p.Add(line)
		if len(run) == 1 { // a line of one point draws nothing
			dot, err := plotter.NewScatter(mean)
			if err != nil {
				return nil, err
			}
			dot.Color, dot.Shape, dot.Radius = line.Color, draw.CircleGlyph{}, vg.Points(2)
			p.Add(dot)
		}
		legend = line
	}
	return legend, nil
}

// reported splits samples into the runs of consecutive samples in which
// some client reported gauge v.
func reported(samples []gaugeSample, v func(gaugeSample) spread) [][]gaugeSample {
	var runs [][]gaugeSample
	start := -1
	for j, g := range samples {
		switch {
		case v(g).n > 0 && start < 0:
			start = j
		case v(g).n == 0 && start >= 0:
			runs = append(runs, samples[start:j])
			start = -1
		}
	}
	if start >= 0 {
		runs = append(runs, samples[start:])
	}
	return runs
}

// translucent returns c at a quarter of its opacity, for a band that the
// lines over it show through.
func translucent(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 0x40}
}
