package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/delayers"
)

func TestExperimentalStrategiesAreDeterministicAndBounded(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	for _, st := range ExperimentalStrategies() {
		t.Run(st.Name, func(t *testing.T) {
			a, err := RunOCC(Params{}, st, 40, 6, 1)
			require.NoError(t, err)
			b, err := RunOCC(Params{}, st, 40, 6, 1)
			require.NoError(t, err)
			assert.Equal(t, a, b, "expect the same run for the same seed")

			newBackoff, err := st.newRun(p, delayers.NewSource(4))
			require.NoError(t, err)
			bo := newBackoff()
			for n := 1; n <= 200; n++ {
				d, err := bo.Delay(n)
				require.NoError(t, err)
				require.GreaterOrEqual(t, d, time.Duration(0), "n=%d", n)
				require.LessOrEqual(t, d, p.Cap, "n=%d", n)
			}
		})
	}
}

func TestGentleWindow(t *testing.T) {
	tests := map[string]struct {
		n    int
		want time.Duration
	}{
		"first retry is the first window": {n: 1, want: 80 * time.Millisecond},
		"second grows by half":            {n: 2, want: 120 * time.Millisecond},
		"fifth":                           {n: 5, want: 405 * time.Millisecond},
		"capped":                          {n: 9, want: 2000 * time.Millisecond},
		"huge attempt stays capped":       {n: math.MaxInt, want: 2000 * time.Millisecond},
		"attempt below 1 counts as 1":     {n: 0, want: 80 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := gentleWindow(80*time.Millisecond, 2*time.Second, gentleGrowth, tc.n)
			assert.InDelta(t, float64(tc.want), float64(got), 1, "expect %v, got %v", tc.want, got)
		})
	}
}

func TestLogLogGrowth(t *testing.T) {
	tests := map[string]struct{ w, want float64 }{
		"below 4 slots doubles": {w: 2, want: 2},
		"4 slots doubles":       {w: 4, want: 2},
		"16 slots: lg lg = 2":   {w: 16, want: 1.5},
		"256 slots: lg lg = 3":  {w: 256, want: 4.0 / 3},
		"65536 slots":           {w: 65536, want: 1.25},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.InDelta(t, tc.want, loglogGrowth(tc.w), 1e-12)
		})
	}
}

func TestPollyV2(t *testing.T) {
	assert.Zero(t, pollyV2Curve(0), "expect the curve to start at 0")
	for x := 0.1; x < 20; x += 0.1 {
		require.Greater(t, pollyV2Curve(x), pollyV2Curve(x-0.1), "expect an increasing curve, so delays are positive")
	}
	// The first delay's median is close to the median asked for: the scaling
	// 1/1.4 makes it f(0.5)/1.4 ≈ 0.9 of it.
	median := 100 * time.Millisecond
	src := delayers.NewSource(5)
	var firsts []time.Duration
	for range 2001 {
		b := &pollyV2Backoff{src: src, median: median, cap: time.Minute}
		d, err := b.Delay(1)
		require.NoError(t, err)
		firsts = append(firsts, d)
	}
	slices.Sort(firsts)
	assert.InDelta(t, float64(median), float64(firsts[1000]), 0.15*float64(median))
}
