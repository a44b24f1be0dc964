package delayers

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSequenceExponential(t *testing.T) {
	q := mustNew(t, StrategyExponential).NewSequence()
	want := []time.Duration{50, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 20000, 20000}
	for i, w := range want {
		w *= time.Millisecond
		got := q.Next(errors.New("boom"))
		require.Equal(t, w, got, "expect delay %d to be %v, got %v", i+1, w, got)
		require.Equal(t, i+1, q.Attempt(), "expect attempt %d, got %d", i+1, q.Attempt())
	}
	q.Reset()
	assert.Equal(t, 0, q.Attempt(), "expect attempt 0 after Reset, got %d", q.Attempt())
	got := q.Next(nil)
	assert.Equal(t, 50*time.Millisecond, got, "expect the first window again after Reset, got %v", got)
}

// TestSequenceMatchesBackoffDelay: for the windowed strategies a Sequence
// draws one value per Next, exactly as BackoffDelay does per call, so with
// the same seed the n-th Next equals BackoffDelay(n).
func TestSequenceMatchesBackoffDelay(t *testing.T) {
	for _, strategy := range []Strategy{StrategyExponential, StrategyFull, StrategyEqual} {
		for _, growth := range []float64{0, 1.5} {
			t.Run(string(strategy)+"/growth "+strconv.FormatFloat(growth, 'g', -1, 64), func(t *testing.T) {
				testSequenceMatchesBackoffDelay(t, strategy, func(o *Options) { o.Growth = growth })
			})
		}
	}
}

func testSequenceMatchesBackoffDelay(t *testing.T, strategy Strategy, opt func(*Options)) {
	t.Helper()
	q := mustNew(t, strategy, withSeed(8), opt).NewSequence()
	d := mustNew(t, strategy, withSeed(8), opt)
	for attempt := 1; attempt <= 70; attempt++ {
		var err error
		if attempt%4 == 0 {
			err = throttleErr()
		}
		want, _ := d.BackoffDelay(attempt, err)
		got := q.Next(err)
		require.Equal(t, want, got, "expect Next %d to be %v, got %v", attempt, want, got)
	}
}

// TestSequenceDecorrelatedKeepsPrev checks every step against the one before
// it: base <= next < 3*prev, and never above cap.
func TestSequenceDecorrelatedKeepsPrev(t *testing.T) {
	d := mustNew(t, StrategyDecorrelated, withSeed(21), func(o *Options) { o.Cap = 3 * time.Second })
	s := d
	q := d.NewSequence()
	prev := s.Base()
	var atCap int
	for i := range 10_000 {
		if i%50 == 0 {
			q.Reset()
			prev = s.Base()
		}
		got := q.Next(nil)
		hi := min(s.Cap(), 3*prev-1)
		require.GreaterOrEqual(t, got, s.Base(), "expect >= base %v, got %v", s.Base(), got)
		require.LessOrEqual(t, got, hi, "expect <= min(cap, 3*prev) %v after %v, got %v", hi, prev, got)
		if got == s.Cap() {
			atCap++
		}
		prev = got
	}
	assert.Greater(t, atCap, 0, "expect the chain to reach the cap, got %d delays at cap", atCap)
}

func TestSequenceDecorrelatedThrottleSwitch(t *testing.T) {
	cases := map[string]struct {
		before, after error
		lo, hi        time.Duration
	}{
		"to throttle":    {before: nil, after: throttleErr(), lo: time.Second, hi: 3 * time.Second},
		"from throttle":  {before: throttleErr(), after: serverErr(), lo: DefaultBase, hi: 3 * DefaultBase},
		"throttle stays": {before: throttleErr(), after: throttleErr(), lo: time.Second, hi: DefaultCap},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			q := mustNew(t, StrategyDecorrelated).NewSequence()
			for range 20 {
				q.Next(c.before)
			}
			for range 200 {
				probe := *q
				got := probe.Next(c.after)
				require.GreaterOrEqual(t, got, c.lo, "expect >= %v, got %v", c.lo, got)
				require.Less(t, got, c.hi+1, "expect <= %v, got %v", c.hi, got)
			}
			assert.Equal(t, 20, q.Attempt(), "expect probes not to advance the loop, got attempt %d", q.Attempt())
		})
	}
}

func TestSequenceAttemptSaturates(t *testing.T) {
	for _, strategy := range Strategies() {
		t.Run(string(strategy), func(t *testing.T) {
			d := mustNew(t, strategy)
			s := d
			q := d.NewSequence()
			q.attempt = maxAttempt - 1
			for range 3 {
				var got time.Duration
				require.NotPanics(t, func() { got = q.Next(nil) })
				require.Equal(t, maxAttempt, q.Attempt(), "expect attempt to stay at MaxInt, got %d", q.Attempt())
				require.LessOrEqual(t, got, s.Cap(), "expect <= cap, got %v", got)
				if strategy == StrategyExponential {
					require.Equal(t, s.Cap(), got, "expect cap at MaxInt attempts, got %v", got)
				}
			}
		})
	}
}

// TestSequencesAreIndependent: two loops from one delayer share settings and
// the source but not their attempt count or prev.
func TestSequencesAreIndependent(t *testing.T) {
	d := mustNew(t, StrategyExponential)
	a, b := d.NewSequence(), d.NewSequence()
	for range 5 {
		a.Next(nil)
	}
	got := b.Next(nil)
	assert.Equal(t, DefaultBase, got, "expect a fresh loop to start at base, got %v", got)
	assert.Equal(t, 5, a.Attempt(), "expect the first loop at attempt 5, got %d", a.Attempt())
	assert.Equal(t, 1, b.Attempt(), "expect the second loop at attempt 1, got %d", b.Attempt())
}

// TestANilSequenceAnswersAsAFreshOne: a *Sequence field left nil (the loop
// forgot NewSequence) has nowhere to count, so every Next answers as a
// fresh zero Sequence's first, within the defaults' first window, instead
// of panicking; Attempt stays 0 and Reset does nothing.
func TestANilSequenceAnswersAsAFreshOne(t *testing.T) {
	var q *Sequence
	for range 20 {
		assert.LessOrEqual(t, q.Next(errors.New("boom")), DefaultBase)
		assert.GreaterOrEqual(t, q.Next(nil), time.Duration(0))
		assert.LessOrEqual(t, q.NextFor(true), DefaultThrottleBase)
	}
	assert.Equal(t, 0, q.Attempt())
	q.Reset()
	assert.Equal(t, 0, q.Attempt())
}
