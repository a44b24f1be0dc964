package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecoveryTime(t *testing.T) {
	capacity := func(from, to time.Duration) float64 { return 500 * (to - from).Seconds() }
	// 2 s of bins: 20 at 10 a bin (100/s), then 50 a bin (500/s) from 1.3 s.
	bins := make([]int64, 30)
	for i := range bins {
		bins[i] = 10
		if i >= 13 {
			bins[i] = 50
		}
	}
	// The window [1.3 s, 2.3 s) is the first with 500 successes.
	got, ok := recoveryTime(bins, time.Second, 3*time.Second, capacity)
	require.True(t, ok)
	assert.Equal(t, 300*time.Millisecond, got)

	// A window that would end past the run does not count.
	_, ok = recoveryTime(bins, time.Second, 2*time.Second, capacity)
	assert.False(t, ok, "expect no full window within the run")

	// 95% is enough: 48 a bin is 480/s.
	for i := range bins {
		bins[i] = 48
	}
	got, ok = recoveryTime(bins, time.Second, 3*time.Second, capacity)
	require.True(t, ok)
	assert.Equal(t, time.Duration(0), got)
}

func TestSecondsAfter(t *testing.T) {
	drop := mustScenario(t, scenarioDrop, 1) // 500/s, 100/s from 2 s, 500/s again from 7 s to 12 s
	// A rise 50 ms into a bin: the first second starts at the rise's bin, so
	// its capacity is 50 ms at 100/s and 950 ms at 500/s.
	late := scenario{"late", []phase{{7050 * time.Millisecond, 0.2}, {5 * time.Second, 1}}}
	// bins returns 12 s of bins of 10 successes, then from 7 s on the
	// elements of after, the last one repeated.
	bins := func(after ...int64) []int64 {
		b := make([]int64, 120)
		for i := range b {
			b[i] = 10
			if i >= 70 {
				b[i] = after[min(i-70, len(after)-1)]
			}
		}
		return b
	}
	var ramp []int64 // 20, 40 then 50 a bin: 200/s, 400/s, then 500/s
	for i := range 30 {
		ramp = append(ramp, []int64{20, 40, 50}[i/10])
	}
	for name, tc := range map[string]struct {
		scen    scenario
		bins    []int64
		at, dur time.Duration
		n       int
		want    []float64
	}{
		"full recovery":           {drop, bins(50), 7 * time.Second, 12 * time.Second, 3, []float64{1, 1, 1}},
		"ramp":                    {drop, bins(ramp...), 7 * time.Second, 12 * time.Second, 3, []float64{0.4, 0.8, 1}},
		"only n seconds":          {drop, bins(45), 7 * time.Second, 12 * time.Second, 2, []float64{0.9, 0.9}},
		"nothing after the rise":  {drop, bins(0), 7 * time.Second, 12 * time.Second, 3, []float64{0, 0, 0}},
		"the run ends first":      {drop, bins(50), 7 * time.Second, 8500 * time.Millisecond, 3, []float64{1}},
		"no whole second left":    {drop, bins(50), 7 * time.Second, 7900 * time.Millisecond, 3, nil},
		"fewer bins than the run": {drop, bins(50)[:75], 7 * time.Second, 12 * time.Second, 3, nil},
		"rise within a bin":       {late, bins(50), 7050 * time.Millisecond, 12 * time.Second, 1, []float64{500 / (5 + 475.0)}},
	} {
		t.Run(name, func(t *testing.T) {
			capacity := func(from, to time.Duration) float64 { return tc.scen.capacityBetween(500, from, to) }
			got := secondsAfter(tc.bins, tc.at, tc.dur, tc.n, capacity)
			require.Len(t, got, len(tc.want))
			for i := range got {
				assert.InDelta(t, tc.want[i], got[i], 1e-9, "second %d after the rise", i+1)
			}
		})
	}
}
