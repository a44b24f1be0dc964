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

func TestRunOCCIsDeterministicForASeed(t *testing.T) {
	for _, st := range BlogStrategies() {
		if !st.Reproducible {
			continue
		}
		t.Run(st.Name, func(t *testing.T) {
			a, err := RunOCC(Params{}, st, 30, 42, 7)
			require.NoError(t, err)
			b, err := RunOCC(Params{}, st, 30, 42, 7)
			require.NoError(t, err)
			assert.Equal(t, a, b, "expect the same run for the same seed")

			c, err := RunOCC(Params{}, st, 30, 43, 7)
			require.NoError(t, err)
			assert.NotEqual(t, a.Done, c.Done, "expect another seed to give another run")
		})
	}
}

func TestSweepOCCDoesNotDependOnWorkersOrOtherRows(t *testing.T) {
	cfg := OCCConfig{
		Clients: []int{10, 40}, Runs: 8, Seed: 3,
		Strategies: []Strategy{mustStrategy(t, StrategyFull), mustStrategy(t, StrategyDecorrelated)},
	}
	cfg.Workers = 1
	one, err := SweepOCC(cfg)
	require.NoError(t, err)
	cfg.Workers = 4
	four, err := SweepOCC(cfg)
	require.NoError(t, err)
	assert.Equal(t, one, four, "expect the same rows for any number of workers")

	alone, err := SweepOCC(OCCConfig{Clients: []int{40}, Runs: 8, Seed: 3, Strategies: []Strategy{mustStrategy(t, StrategyDecorrelated)}})
	require.NoError(t, err)
	assert.Equal(t, one[3], alone[0], "expect a row not to depend on the other rows of the sweep")
}

func TestRunOCCAccounting(t *testing.T) {
	for _, st := range BlogStrategies() {
		t.Run(st.Name, func(t *testing.T) {
			r, err := RunOCC(Params{}, st, 25, 1, 0)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, r.Calls, 25, "expect at least one write per client")
			require.Len(t, r.Done, 25)
			// Each success needs a read, a reply, a write and a reply:
			// four messages of about 10 ms, so no client finishes before
			// about 40 ms.
			assert.Greater(t, slices.Min(r.Done), 20*time.Millisecond)
			assert.Equal(t, slices.Max(r.Done), r.Time, "expect Time to be the last client's success")
		})
	}
}

func TestRunOCCSingleClientNeverConflicts(t *testing.T) {
	r, err := RunOCC(Params{}, mustStrategy(t, StrategyExponential), 1, 9, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Calls, "expect a lone client's write to succeed at once")
}

func TestRunOCCRejectsBadInput(t *testing.T) {
	_, err := RunOCC(Params{}, mustStrategy(t, StrategyFull), 0, 1, 0)
	assert.Error(t, err)
	_, err = RunOCC(Params{Base: -time.Millisecond}, mustStrategy(t, StrategyFull), 5, 1, 0)
	assert.Error(t, err)
	_, err = RunOCC(Params{Base: 3 * time.Second}, mustStrategy(t, StrategyFull), 5, 1, 0)
	assert.Error(t, err, "expect a base above the cap to be refused")
	_, err = SweepOCC(OCCConfig{Clients: []int{5}, Runs: 0})
	assert.Error(t, err)
	_, err = LookupStrategy("jittery")
	assert.ErrorContains(t, err, "decorrelated", "expect the error to list the valid names")
}

// The blog's ordering, at a small number of runs: qualitative claims of the
// post, each with a wide margin so that the test does not depend on the seed.
// Nothing here measures wall-clock time: Time is virtual.
func TestBlogOrdering(t *testing.T) {
	var sts []Strategy
	for _, name := range []string{StrategyNone, StrategyExponential, StrategyFull, StrategyEqual, StrategyDecorrelated} {
		sts = append(sts, mustStrategy(t, name))
	}
	rows, err := SweepOCC(OCCConfig{Clients: []int{20, 50, 100}, Runs: 20, Seed: 1, Strategies: sts})
	require.NoError(t, err)
	for _, n := range []int{20, 50, 100} {
		m := rowsByStrategy(rows, n)
		none, expo, full, equal, dec := m[StrategyNone], m[StrategyExponential], m[StrategyFull], m[StrategyEqual], m[StrategyDecorrelated]
		for _, j := range []OCCRow{full, equal, dec} {
			assert.Greater(t, expo.TimeMs.Mean, 4*j.TimeMs.Mean, "N=%d: expect exponential to be by far the slowest, vs %s", n, j.Strategy)
		}
		assert.Greater(t, equal.TimeMs.Mean, full.TimeMs.Mean, "N=%d: expect equal to take more time than full", n)
		assert.Greater(t, equal.TimeMs.Mean, dec.TimeMs.Mean, "N=%d: expect equal to take more time than decorrelated", n)
		for _, fewest := range []OCCRow{full, equal} {
			for _, more := range []OCCRow{none, expo} {
				assert.Less(t, fewest.Calls.Mean, more.Calls.Mean, "N=%d: expect %s to make fewer calls than %s", n, fewest.Strategy, more.Strategy)
			}
		}
		// Below about 30 clients decorrelated jitter makes the fewest calls
		// (BENCHMARKS.md); from moderate N on it is faster but costlier.
		if n >= 50 {
			assert.Less(t, full.Calls.Mean, dec.Calls.Mean, "N=%d: expect full to make fewer calls than decorrelated", n)
			assert.Less(t, equal.Calls.Mean, dec.Calls.Mean, "N=%d: expect equal to make fewer calls than decorrelated", n)
			assert.Less(t, dec.TimeMs.Mean, full.TimeMs.Mean, "N=%d: expect decorrelated to be the fastest jitter", n)
		}
	}
}

func TestSDKRowMatchesFullJitter(t *testing.T) {
	rows, err := SweepOCC(OCCConfig{Clients: []int{100}, Runs: 20, Seed: 5,
		Strategies: []Strategy{mustStrategy(t, StrategyFull), mustStrategy(t, StrategySDK)}})
	require.NoError(t, err)
	full, sdk := rows[0], rows[1]
	// Independent estimates of the same mean: their difference has a
	// standard error of sqrt(se1²+se2²); six of them is a margin no seed
	// should reach.
	for name, pair := range map[string][2]Summary{
		"calls": {full.Calls, sdk.Calls},
		"time":  {full.TimeMs, sdk.TimeMs},
	} {
		se := math.Hypot(pair[0].SE, pair[1].SE)
		assert.InDelta(t, pair[0].Mean, pair[1].Mean, 6*se, "expect the SDK's %s to equal full jitter's", name)
	}
}

// TestDelayerAttemptMapping checks that the blog's window min(cap, base*2^n),
// n = 1 on the first retry, is what the strategies receive.
func TestDelayerAttemptMapping(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	blogWindow := func(n int) time.Duration {
		return min(p.Cap, p.Base*time.Duration(math.Pow(2, float64(n))))
	}
	tests := map[string]struct {
		n    int
		want time.Duration
	}{
		"first retry waits 2*base":      {n: 1, want: 10 * time.Millisecond},
		"second retry waits 4*base":     {n: 2, want: 20 * time.Millisecond},
		"eighth retry is below cap":     {n: 8, want: 1280 * time.Millisecond},
		"ninth retry reaches the cap":   {n: 9, want: 2000 * time.Millisecond},
		"a late retry stays at the cap": {n: 40, want: 2000 * time.Millisecond},
	}
	newBackoff, err := mustStrategy(t, StrategyExponential).newRun(p, delayers.NewSource(1))
	require.NoError(t, err)
	b := newBackoff()
	doubled, err := delayers.NewExponential(func(o *delayers.Options) { o.Base, o.Cap = 2*p.Base, p.Cap })
	require.NoError(t, err)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := b.Delay(tc.n)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "expect the blog's window for n=%d", tc.n)
			if tc.n < 30 {
				assert.Equal(t, blogWindow(tc.n), got)
			}
			alt, err := doubled.BackoffDelay(tc.n, errConflict)
			require.NoError(t, err)
			assert.Equal(t, got, alt, "expect attempt n+1 with base to equal attempt n with 2*base")
		})
	}
	assert.Equal(t, 2, DelayerAttempt(1), "expect the first retry to follow the failure of attempt 2")
}

func TestJitteredStrategiesStayInTheBlogsWindow(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	for _, name := range []string{StrategyFull, StrategyEqual, StrategySDK} {
		t.Run(name, func(t *testing.T) {
			newBackoff, err := mustStrategy(t, name).newRun(p, delayers.NewSource(2))
			require.NoError(t, err)
			b := newBackoff()
			for n := 1; n <= 10; n++ {
				w := min(p.Cap, p.Base<<n)
				lo := time.Duration(0)
				if name == StrategyEqual {
					lo = w / 2
				}
				var top time.Duration
				for range 400 {
					d, err := b.Delay(n)
					require.NoError(t, err)
					require.GreaterOrEqual(t, d, lo, "n=%d", n)
					require.Less(t, d, w, "n=%d", n)
					top = max(top, d)
				}
				assert.Greater(t, top, w*9/10, "n=%d: expect the window's top to be reached, so the window is not half as wide", n)
			}
		})
	}
}

func TestDecorrelatedKeepsEachClientsPrev(t *testing.T) {
	p, err := Params{}.withDefaults()
	require.NoError(t, err)
	newBackoff, err := mustStrategy(t, StrategyDecorrelated).newRun(p, delayers.NewSource(3))
	require.NoError(t, err)
	a, b := newBackoff(), newBackoff()
	prev := p.Base
	for n := 1; n <= 30; n++ {
		d, err := a.Delay(n)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, d, p.Base)
		assert.LessOrEqual(t, d, min(p.Cap, 3*prev), "n=%d: expect at most 3x this client's previous sleep", n)
		prev = d
		if n%3 == 0 {
			// Another client's retries must not move this client's chain.
			_, err := b.Delay(n)
			require.NoError(t, err)
		}
	}
}
