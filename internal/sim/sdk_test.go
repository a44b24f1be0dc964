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

// ksStatistic returns the two-sample Kolmogorov-Smirnov statistic: the
// largest distance between the empirical distribution functions of a and b,
// which it sorts.
func ksStatistic(a, b []time.Duration) float64 {
	slices.Sort(a)
	slices.Sort(b)
	var i, j int
	var d float64
	for i < len(a) && j < len(b) {
		x := min(a[i], b[j])
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// The SDK's row draws from crypto/rand, which no seed controls. Its retry
// behaviour 2.1 formula is rand*min(base*2^(attempt-1), cap): full jitter
// with the same window. This test shows the two have the same distribution
// at every attempt of the experiment, so the sdk row differs from the full
// row only by sampling noise.
func TestSDKBackoffIsFullJitterInDistribution(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	newFull, err := mustStrategy(t, StrategyFull).newRun(p, delayers.NewSource(8))
	require.NoError(t, err)
	newSDK, err := mustStrategy(t, StrategySDK).newRun(p, nil)
	require.NoError(t, err)
	full, sdk := newFull(), newSDK()

	const samples = 4000
	// The 1e-6 critical value of the two-sample test, c(α)*sqrt(2/n) with
	// c(α) = sqrt(-ln(α/2)/2): a false failure once in a million runs.
	critical := math.Sqrt(-math.Log(1e-6/2)/2) * math.Sqrt(2.0/samples)
	draw := func(b Backoff, n int) []time.Duration {
		out := make([]time.Duration, samples)
		for i := range out {
			d, err := b.Delay(n)
			require.NoError(t, err)
			out[i] = d
		}
		return out
	}
	for n := 1; n <= 10; n++ {
		d := ksStatistic(draw(full, n), draw(sdk, n))
		assert.Less(t, d, critical, "n=%d: expect the SDK's delays to be distributed as full jitter's", n)
		// The test has the power to see an off-by-one attempt: the window
		// of the next attempt is twice as wide (below the cap).
		if n < 8 {
			wrong := ksStatistic(draw(full, n+1), draw(sdk, n))
			assert.Greater(t, wrong, critical, "n=%d: expect a doubled window to be detected", n)
		}
	}
}
