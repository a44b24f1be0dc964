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

// maxSource always draws math.MaxUint64, so full jitter returns the top of
// its window, w-1 ns: the window itself, read through the real delayer.
type maxSource struct{}

func (maxSource) Uint64() uint64 { return math.MaxUint64 }

// TestGentleWindow pins the mapping of full-1.5x: the blog's n-th retry has
// the window min(cap, 4 round trips * 1.5^(n-1)), 80 ms first by default.
func TestGentleWindow(t *testing.T) {
	tests := map[string]struct {
		n    int
		want time.Duration
	}{
		"first retry is the first window": {n: 1, want: 80 * time.Millisecond},
		"second grows by half":            {n: 2, want: 120 * time.Millisecond},
		"fifth":                           {n: 5, want: 405 * time.Millisecond},
		"eighth, last below cap":          {n: 8, want: 1366875 * time.Microsecond},
		"capped":                          {n: 9, want: 2000 * time.Millisecond},
		"huge retry stays capped":         {n: math.MaxInt, want: 2000 * time.Millisecond},
		"retry below 1 counts as 1":       {n: 0, want: 80 * time.Millisecond},
	}
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	st, err := LookupStrategy(StrategyFullGentle)
	require.NoError(t, err)
	newBackoff, err := st.newRun(p, maxSource{})
	require.NoError(t, err)
	bo := newBackoff()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := bo.Delay(tc.n)
			require.NoError(t, err)
			assert.Equal(t, tc.want-1, got, "expect the top of window %v, got %v", tc.want, got)
		})
	}
}

// TestGentleSmallCap: a cap below the first window of four round trips
// caps every window, as the formula min(cap, ...) says.
func TestGentleSmallCap(t *testing.T) {
	st, err := LookupStrategy(StrategyFullGentle)
	require.NoError(t, err)
	p, err := Params{Cap: 50 * time.Millisecond}.withDefaults()
	require.NoError(t, err)
	newBackoff, err := st.newRun(p, maxSource{})
	require.NoError(t, err)
	for _, n := range []int{1, 2, 100} {
		got, err := newBackoff().Delay(n)
		require.NoError(t, err)
		assert.Equal(t, p.Cap-1, got, "retry %d: expect the top of the capped window, got %v", n, got)
	}
	_, err = RunOCC(p, st, 10, 2, 1)
	require.NoError(t, err)
}

// TestGentleUsesDelayers: full-1.5x is delayers.Full with Growth 1.5, not a
// formula of its own: with the same seed it returns what that delayer does.
func TestGentleUsesDelayers(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	st, err := LookupStrategy(StrategyFullGentle)
	require.NoError(t, err)
	newBackoff, err := st.newRun(p, delayers.NewSource(6))
	require.NoError(t, err)
	bo := newBackoff()
	d, err := delayers.NewFull(func(o *delayers.Options) {
		o.Base, o.Cap, o.Growth, o.Source = 80*time.Millisecond, 2*time.Second, 1.5, delayers.NewSource(6)
	})
	require.NoError(t, err)
	assert.Equal(t, 1.5, d.Growth())
	for n := 1; n <= 30; n++ {
		got, err := bo.Delay(n)
		require.NoError(t, err)
		want, _ := d.BackoffDelay(n, nil)
		require.Equal(t, want, got, "retry %d: expect %v, got %v", n, want, got)
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
