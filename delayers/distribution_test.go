package delayers

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// draws is the sample size of the distribution tests. With a fixed seed the
// tests are deterministic; the tolerances below are a few standard errors of
// this sample size, so a formula with the wrong mean, spread or shape fails.
const draws = 100_000

// ksCritical is the one-sample Kolmogorov-Smirnov distance a correct
// formula exceeds with probability 0.001 at n draws; the two-sample form for
// two samples of n is ksCritical*sqrt(2).
var ksCritical = 1.95 / math.Sqrt(draws)

type summary struct {
	mean, sd float64
	sorted   []float64
}

func summarise(xs []float64) summary {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	return summary{mean: mean, sd: math.Sqrt(ss / float64(len(xs)-1)), sorted: sorted}
}

// quantile returns the q-quantile of the sample (nearest rank).
func (s summary) quantile(q float64) float64 {
	i := int(q * float64(len(s.sorted)-1))
	return s.sorted[i]
}

// ksUniform is the Kolmogorov-Smirnov distance between the sample and
// uniform[lo, hi).
func (s summary) ksUniform(lo, hi float64) float64 {
	n := float64(len(s.sorted))
	var d float64
	for i, x := range s.sorted {
		f := min(max((x-lo)/(hi-lo), 0), 1)
		d = max(d, math.Abs(float64(i+1)/n-f), math.Abs(f-float64(i)/n))
	}
	return d
}

// ksTwo is the two-sample Kolmogorov-Smirnov distance.
func ksTwo(a, b summary) float64 {
	x, y := a.sorted, b.sorted
	var i, j int
	var d float64
	for i < len(x) && j < len(y) {
		v := min(x[i], y[j])
		for i < len(x) && x[i] == v {
			i++
		}
		for j < len(y) && y[j] == v {
			j++
		}
		d = max(d, math.Abs(float64(i)/float64(len(x))-float64(j)/float64(len(y))))
	}
	return d
}

// sample draws n delays of attempt from d, in seconds.
func sample(t testing.TB, d Delayer, attempt int, err error) []float64 {
	t.Helper()
	xs := make([]float64, draws)
	for i := range xs {
		v, e := d.BackoffDelay(attempt, err)
		require.NoError(t, e)
		xs[i] = v.Seconds()
	}
	return xs
}

func TestWindowedDistributions(t *testing.T) {
	cases := map[string]struct {
		strategy Strategy
		growth   float64 // Options.Growth; 0 is the doubling
		attempt  int
		err      error
		w        time.Duration
		lo, hi   float64 // support, as fractions of w
		mean, sd float64 // as fractions of w
	}{
		"full attempt 1":          {strategy: StrategyFull, attempt: 1, w: 50 * time.Millisecond, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full attempt 4":          {strategy: StrategyFull, attempt: 4, w: 400 * time.Millisecond, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full at cap":             {strategy: StrategyFull, attempt: 30, w: 20 * time.Second, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full throttle attempt 2": {strategy: StrategyFull, attempt: 2, err: throttleErr(), w: 2 * time.Second, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"equal attempt 1":         {strategy: StrategyEqual, attempt: 1, w: 50 * time.Millisecond, lo: 0.5, hi: 1, mean: 0.75, sd: 1 / math.Sqrt(48)},
		"equal attempt 4":         {strategy: StrategyEqual, attempt: 4, w: 400 * time.Millisecond, lo: 0.5, hi: 1, mean: 0.75, sd: 1 / math.Sqrt(48)},
		"equal at cap":            {strategy: StrategyEqual, attempt: 30, w: 20 * time.Second, lo: 0.5, hi: 1, mean: 0.75, sd: 1 / math.Sqrt(48)},
		"equal throttle at cap":   {strategy: StrategyEqual, attempt: 6, err: throttleErr(), w: 20 * time.Second, lo: 0.5, hi: 1, mean: 0.75, sd: 1 / math.Sqrt(48)},
		"exponential attempt 4":   {strategy: StrategyExponential, attempt: 4, w: 400 * time.Millisecond, lo: 1, hi: 1, mean: 1, sd: 0},
		"exponential throttle":    {strategy: StrategyExponential, attempt: 3, err: throttleErr(), w: 4 * time.Second, lo: 1, hi: 1, mean: 1, sd: 0},

		// Growth 1.5: w = 50 ms * 1.5^(attempt-1), truncated to whole
		// nanoseconds (1281445312.5 ns at attempt 9).
		"full x1.5 attempt 1":          {strategy: StrategyFull, growth: 1.5, attempt: 1, w: 50 * time.Millisecond, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full x1.5 attempt 4":          {strategy: StrategyFull, growth: 1.5, attempt: 4, w: 168750 * time.Microsecond, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full x1.5 attempt 9":          {strategy: StrategyFull, growth: 1.5, attempt: 9, w: 1281445312, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full x1.5 at cap":             {strategy: StrategyFull, growth: 1.5, attempt: 16, w: 20 * time.Second, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"full x1.5 throttle attempt 3": {strategy: StrategyFull, growth: 1.5, attempt: 3, err: throttleErr(), w: 2250 * time.Millisecond, lo: 0, hi: 1, mean: 0.5, sd: 1 / math.Sqrt(12)},
		"equal x1.5 attempt 4":         {strategy: StrategyEqual, growth: 1.5, attempt: 4, w: 168750 * time.Microsecond, lo: 0.5, hi: 1, mean: 0.75, sd: 1 / math.Sqrt(48)},
		"exponential x1.5 attempt 4":   {strategy: StrategyExponential, growth: 1.5, attempt: 4, w: 168750 * time.Microsecond, lo: 1, hi: 1, mean: 1, sd: 0},
		"exponential x3 attempt 4":     {strategy: StrategyExponential, growth: 3, attempt: 4, w: 1350 * time.Millisecond, lo: 1, hi: 1, mean: 1, sd: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := mustNew(t, c.strategy, withSeed(0x5eed), func(o *Options) { o.Growth = c.growth })
			s := summarise(sample(t, d, c.attempt, c.err))
			w := c.w.Seconds()
			lo, hi := c.lo*w, c.hi*w
			require.GreaterOrEqual(t, s.sorted[0], lo, "expect min >= %v, got %v", lo, s.sorted[0])
			require.LessOrEqual(t, s.sorted[len(s.sorted)-1], hi, "expect max <= %v, got %v", hi, s.sorted[len(s.sorted)-1])
			if c.sd == 0 {
				assert.Equal(t, hi, s.sorted[len(s.sorted)-1], "expect every delay %v, got max %v", hi, s.sorted[len(s.sorted)-1])
				assert.Equal(t, lo, s.sorted[0], "expect every delay %v, got min %v", lo, s.sorted[0])
				return
			}
			if c.hi == 1 {
				assert.Less(t, s.sorted[len(s.sorted)-1], hi, "expect max < window %v, got %v", hi, s.sorted[len(s.sorted)-1])
			}
			// Five standard errors of the mean; the spread within 1.5%.
			mean, sd := c.mean*w, c.sd*w
			tol := 5 * sd / math.Sqrt(draws)
			assert.InDelta(t, mean, s.mean, tol, "expect mean %v ± %v, got %v", mean, tol, s.mean)
			assert.InEpsilon(t, sd, s.sd, 0.015, "expect standard deviation %v, got %v", sd, s.sd)
			ks := s.ksUniform(lo, hi)
			assert.Less(t, ks, ksCritical, "expect uniform on [%v, %v): KS distance %v, got %v", lo, hi, ksCritical, ks)
		})
	}
}

func TestDecorrelatedFirstAttemptIsUniform(t *testing.T) {
	cases := map[string]struct {
		attempt int
		err     error
		base    time.Duration
	}{
		"attempt 1":          {attempt: 1, base: DefaultBase},
		"attempt 0":          {attempt: 0, base: DefaultBase},
		"throttle attempt 1": {attempt: 1, err: throttleErr(), base: DefaultThrottleBase},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := mustNew(t, StrategyDecorrelated, withSeed(7))
			s := summarise(sample(t, d, c.attempt, c.err))
			lo, hi := c.base.Seconds(), 3*c.base.Seconds()
			require.GreaterOrEqual(t, s.sorted[0], lo, "expect min >= base %v, got %v", lo, s.sorted[0])
			require.Less(t, s.sorted[len(s.sorted)-1], hi, "expect max < 3*base %v, got %v", hi, s.sorted[len(s.sorted)-1])
			mean, sd := (lo+hi)/2, (hi-lo)/math.Sqrt(12)
			tol := 5 * sd / math.Sqrt(draws)
			assert.InDelta(t, mean, s.mean, tol, "expect mean %v ± %v, got %v", mean, tol, s.mean)
			assert.InEpsilon(t, sd, s.sd, 0.015, "expect standard deviation %v, got %v", sd, s.sd)
			ks := s.ksUniform(lo, hi)
			assert.Less(t, ks, ksCritical, "expect uniform on [base, 3*base): KS distance below %v, got %v", ksCritical, ks)
		})
	}
}

// referenceDecorrelated simulates the blog's formula directly, in floating
// point seconds with its own generator, for n steps per draw:
//
//	sleep = base; repeat n times: sleep = min(cap, uniform(base, sleep*3))
func referenceDecorrelated(base, cap time.Duration, n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b, c := base.Seconds(), cap.Seconds()
	xs := make([]float64, draws)
	for i := range xs {
		sleep := b
		for range n {
			sleep = math.Min(c, b+r.Float64()*(3*sleep-b))
		}
		xs[i] = sleep
	}
	return xs
}

func TestDecorrelatedMatchesReference(t *testing.T) {
	cases := map[string]struct {
		base, cap time.Duration
		attempt   int
		err       error
	}{
		"attempt 2":               {base: DefaultBase, cap: DefaultCap, attempt: 2},
		"attempt 3":               {base: DefaultBase, cap: DefaultCap, attempt: 3},
		"attempt 5":               {base: DefaultBase, cap: DefaultCap, attempt: 5},
		"attempt 8, cap reached":  {base: DefaultBase, cap: DefaultCap, attempt: 8},
		"attempt 6, small cap":    {base: DefaultBase, cap: 500 * time.Millisecond, attempt: 6},
		"throttle attempt 4":      {base: DefaultThrottleBase, cap: DefaultCap, attempt: 4, err: throttleErr()},
		"attempt 20, deep in cap": {base: 10 * time.Millisecond, cap: 2 * time.Second, attempt: 20},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			opts := func(o *Options) { o.Cap = c.cap }
			if c.err == nil {
				opts = withBounds(c.base, 0, c.cap)
			}
			d := mustNew(t, StrategyDecorrelated, opts, withSeed(11))
			stateless := summarise(sample(t, d, c.attempt, c.err))
			ref := summarise(referenceDecorrelated(c.base, c.cap, c.attempt, 13))

			// The Sequence's attempt-th delay, one fresh loop per draw.
			seqD := mustNew(t, StrategyDecorrelated, opts, withSeed(17))
			seq := make([]float64, draws)
			for i := range seq {
				q := seqD.NewSequence()
				var v time.Duration
				for range c.attempt {
					v = q.Next(c.err)
				}
				seq[i] = v.Seconds()
			}
			sequence := summarise(seq)

			base, capS := c.base.Seconds(), c.cap.Seconds()
			ksTol := ksCritical * math.Sqrt2
			for what, s := range map[string]summary{"stateless": stateless, "sequence": sequence} {
				require.GreaterOrEqual(t, s.sorted[0], base, "%s: expect min >= base %v, got %v", what, base, s.sorted[0])
				require.LessOrEqual(t, s.sorted[len(s.sorted)-1], capS, "%s: expect max <= cap %v, got %v", what, capS, s.sorted[len(s.sorted)-1])
				tol := 5 * math.Sqrt2 * ref.sd / math.Sqrt(draws)
				assert.InDelta(t, ref.mean, s.mean, tol, "%s: expect reference mean %v ± %v, got %v", what, ref.mean, tol, s.mean)
				for _, q := range []float64{0.1, 0.5, 0.9} {
					want, got := ref.quantile(q), s.quantile(q)
					// A quantile's own sampling error is about
					// sqrt(q(1-q)/n)/density; 3% relative is well above
					// it at these quantiles and well below what a one-step
					// shift of the chain moves them.
					assert.InEpsilon(t, want, got, 0.03, "%s: expect %v-quantile %v, got %v", what, q, want, got)
				}
				ks := ksTwo(ref, s)
				assert.Less(t, ks, ksTol, "%s: expect KS distance to reference below %v, got %v", what, ksTol, ks)
			}
		})
	}
}

// TestDecorrelatedChainStopsAtMax checks that attempts beyond
// maxDecorrelatedChain draw the same chain length: with the same seed, every
// attempt from maxDecorrelatedChain up gives the same delay.
func TestDecorrelatedChainStopsAtMax(t *testing.T) {
	cases := map[string]int{
		"maxDecorrelatedChain+1": maxDecorrelatedChain + 1,
		"1000":                   1000,
		"MaxInt":                 math.MaxInt,
	}
	for name, attempt := range cases {
		t.Run(name, func(t *testing.T) {
			at := mustNew(t, StrategyDecorrelated, withBounds(1, 0, math.MaxInt64), withSeed(3))
			beyond := mustNew(t, StrategyDecorrelated, withBounds(1, 0, math.MaxInt64), withSeed(3))
			for range 100 {
				want, _ := at.BackoffDelay(maxDecorrelatedChain, nil)
				got, _ := beyond.BackoffDelay(attempt, nil)
				require.Equal(t, want, got, "expect the %d-step delay %v, got %v", maxDecorrelatedChain, want, got)
			}
		})
	}
}
