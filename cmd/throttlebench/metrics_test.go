package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bucketCapacity is the retry bucket of jitterretry.New(jitterretry.DynamoDB):
// the SDK's 500 tokens.
const bucketCapacity = 500

// TestRunPlotMetricsEndToEnd runs a fleet through run with -plot-metrics
// for a fraction of a second per mode: the chart of the gauges is written,
// beside no requests chart (no -plot).
func TestRunPlotMetricsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := run([]string{"-fleet", "2", "-k", "2", "-modes", "sdk-standard,ours-full,ours-full+rate", "-initial-rate", "300",
		"-scenarios", "drop", "-scale", "0.05", "-pause", "0", "-plot-metrics", dir}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	for _, ext := range []string{"svg", "png"} {
		fi, err := os.Stat(filepath.Join(dir, "throttle_f2_k2_drop_metrics."+ext))
		require.NoError(t, err)
		assert.Positive(t, fi.Size())
	}
	_, err = os.Stat(filepath.Join(dir, "throttle_f2_k2_drop.png"))
	assert.ErrorIs(t, err, os.ErrNotExist, "expect no requests chart without -plot")
}

// TestRunOneSamplesTheGauges runs each kind of mode briefly with the gauges
// sampled, as -plot-metrics does, and checks the series against what the
// retryers can report: every client's tokens within the bucket, a positive
// rate only with the limiter on, nothing for the SDK's retryer.
func TestRunOneSamplesTheGauges(t *testing.T) {
	up := mustUpstream(t)
	const fleet = 2
	cfg := loadConfig{capacity: 500, burstSeconds: 0.1, drain: 30 * time.Second, fleet: fleet, gauges: true}
	s := mustScenario(t, scenarioDrop, 0.1)

	for name, tc := range map[string]struct {
		mode     string
		sampled  bool // the retryer has the gauges
		withRate bool // the limiter is on, limited from the start (-initial-rate)
	}{
		"sdk":          {mode: "sdk-standard"},
		"ours":         {mode: "ours-full", sampled: true},
		"ours limited": {mode: "ours-full+rate", sampled: true, withRate: true},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := parseMode(tc.mode, tuning{initialRate: 300})
			require.NoError(t, err)
			r, err := runOne(cfg, up, m, 2, s)
			require.NoError(t, err)
			if !tc.sampled {
				assert.Empty(t, r.gauges, "expect no gauges from the SDK's retryer")
				return
			}
			require.NotEmpty(t, r.gauges)
			var rates int
			last := time.Duration(-1)
			for _, g := range r.gauges {
				assert.Greater(t, g.at, last, "expect the samples in order")
				assert.LessOrEqual(t, g.at, s.duration(), "expect no sample after the end")
				last = g.at
				assertSpread(t, g.tokens, fleet, 0, bucketCapacity, "tokens at %v", g.at)
				if g.rate.n > 0 {
					rates++
					assertSpread(t, g.rate, fleet, math.SmallestNonzeroFloat64, math.Inf(1), "rate at %v", g.at)
				}
			}
			if tc.withRate {
				assert.Positive(t, rates, "expect the limiter's rate reported")
			} else {
				assert.Zero(t, rates, "expect no rate without the limiter")
			}
		})
	}
}

// assertSpread checks that s has a value from at most clients clients,
// every one within [lo, hi], and that its mean lies between its least and
// its most.
func assertSpread(t *testing.T, s spread, clients int, lo, hi float64, msgAndArgs ...any) {
	t.Helper()
	assert.Positive(t, s.n, msgAndArgs...)
	assert.LessOrEqual(t, s.n, clients, msgAndArgs...)
	assert.GreaterOrEqual(t, s.min, lo, msgAndArgs...)
	assert.LessOrEqual(t, s.max, hi, msgAndArgs...)
	assert.LessOrEqual(t, s.min, s.mean, msgAndArgs...)
	assert.LessOrEqual(t, s.mean, s.max, msgAndArgs...)
}

func TestSpreadOf(t *testing.T) {
	assert.Equal(t, spread{}, spreadOf(nil), "expect nothing reported to be n=0")
	assert.Equal(t, spread{n: 1, min: 7, mean: 7, max: 7}, spreadOf([]float64{7}))
	assert.Equal(t, spread{n: 3, min: 0, mean: 200, max: 500}, spreadOf([]float64{500, 0, 100}))
}

// TestReportedBreaksWhereNoClientReported: the rate's line breaks while
// every limiter is unlimited, and a lone sample is a run of its own.
func TestReportedBreaksWhereNoClientReported(t *testing.T) {
	rate := func(g gaugeSample) spread { return g.rate }
	var samples []gaugeSample
	for i, n := range []int{0, 1, 1, 0, 0, 2, 0, 1} {
		samples = append(samples, gaugeSample{at: time.Duration(i) * gaugeInterval, rate: spread{n: n}})
	}
	var lens []int
	for _, run := range reported(samples, rate) {
		lens = append(lens, len(run))
		for _, g := range run {
			assert.Positive(t, g.rate.n)
		}
	}
	assert.Equal(t, []int{2, 1, 1}, lens)
	assert.Empty(t, reported(samples[:1], rate))
}

// TestPlotMetricsWithoutARate: modes without a limiter still get a chart,
// whose rate plot says that none was reported, and the SDK's modes alone
// get none.
func TestPlotMetricsWithoutARate(t *testing.T) {
	dir := t.TempDir()
	s := mustScenario(t, scenarioSteady, 0.1)
	sdk := result{mode: "sdk-standard"}
	require.NoError(t, plotMetrics(dir, 1, 4, s, math.Inf(1), []result{sdk}))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "expect no chart without a sampled mode")

	ours := result{mode: "ours-full", gauges: []gaugeSample{
		{at: 0, tokens: spreadOf([]float64{500})},
		{at: gaugeInterval, tokens: spreadOf([]float64{495})},
	}}
	require.NoError(t, plotMetrics(dir, 1, 4, s, math.Inf(1), []result{sdk, ours}))
	svg, err := os.ReadFile(filepath.Join(dir, "throttle_k4_steady_metrics.svg"))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "none reported")
}

func TestParseFlagsPlotMetrics(t *testing.T) {
	cfg, err := parseFlags([]string{"-plot-metrics", "out", "-modes", "sdk-standard,ours-full"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "out", cfg.metricsDir)
	assert.True(t, cfg.load.gauges, "expect the runs to sample the gauges")

	cfg, err = parseFlags([]string{"-modes", "ours-full"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.False(t, cfg.load.gauges, "expect no provider without -plot-metrics")

	_, err = parseFlags([]string{"-plot-metrics", "out", "-modes", "sdk-standard,sdk-adaptive"}, &bytes.Buffer{})
	assert.Error(t, err, "expect -plot-metrics without one of ours rejected")
}
