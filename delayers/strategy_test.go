package delayers

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every strategy is an SDK BackoffDelayer and a Delayer.
var (
	_ retry.BackoffDelayer = (*Exponential)(nil)
	_ Delayer              = (*Exponential)(nil)
	_ Delayer              = (*Full)(nil)
	_ Delayer              = (*Equal)(nil)
	_ Delayer              = (*Decorrelated)(nil)
)

// refWindow is min(cap, base*2^(attempt-1)) by repeated doubling, written
// independently of window() so the two can check each other.
func refWindow(base, cap time.Duration, attempt int) time.Duration {
	w := min(base, cap)
	for i := 1; i < attempt && w < cap; i++ {
		if w > cap/2 {
			w = cap
		} else {
			w *= 2
		}
	}
	return w
}

// optionSets are the settings the edge tests run under.
var optionSets = map[string]func(*Options){
	"defaults":                 func(*Options) {},
	"cap below default bases":  withBounds(0, 0, 10*time.Millisecond),
	"nanosecond base, max cap": withBounds(1, 1, math.MaxInt64),
	"base equals cap":          withBounds(time.Second, time.Second, time.Second),
	"bases near MaxInt64":      withBounds(math.MaxInt64-1, math.MaxInt64, math.MaxInt64),
	"throttle base below base": withBounds(time.Second, time.Millisecond, time.Minute),
}

// edgeGrowths are the Options.Growth values the edge tests run under: the
// default doubling, both ends of the valid range and the simulator's 1.5.
var edgeGrowths = []float64{0, MinGrowth, 1.5, MaxGrowth}

func TestBackoffDelayEdgeInputs(t *testing.T) {
	const draws = 20
	for _, strategy := range Strategies() {
		for _, growth := range edgeGrowths {
			if strategy == StrategyDecorrelated && growth != 0 {
				continue // rejected: see TestGrowthOptionErrors
			}
			for optName, opt := range optionSets {
				for attemptName, attempt := range edgeAttempts {
					for errName, ec := range errorCases {
						name := string(strategy) + "/growth " + strconv.FormatFloat(growth, 'g', -1, 64) + "/" + optName + "/attempt " + attemptName + "/" + errName
						t.Run(name, func(t *testing.T) {
							testEdgeInput(t, strategy, growth, opt, attempt, ec.err, ec.throttle, draws)
						})
					}
				}
			}
		}
	}
}

// testEdgeInput checks draws delays of one strategy, setting and attempt
// against the window: refWindow's doubling for growth 0, and for other
// factors grownWindow, itself checked against refGrownWindow.
func testEdgeInput(t *testing.T, strategy Strategy, growth float64, opt func(*Options), attempt int, e error, throttle bool, draws int) {
	t.Helper()
	d := mustNew(t, strategy, opt, withSeed(uint64(attempt)), func(o *Options) { o.Growth = growth })
	s := d
	base := s.Base()
	if throttle {
		base = s.ThrottleBase()
	}
	w := refWindow(base, s.Cap(), attempt)
	if growth != 0 {
		w = grownWindow(base, s.Cap(), growth, attempt)
		ref := refGrownWindow(base, s.Cap(), growth, attempt)
		require.True(t, closeWindows(w, ref), "expect window %v, got %v", ref, w)
	}
	for range draws {
		var got time.Duration
		var err error
		require.NotPanics(t, func() { got, err = d.BackoffDelay(attempt, e) })
		require.NoError(t, err, "expect no error, got %v", err)
		require.GreaterOrEqual(t, got, time.Duration(0), "expect a delay >= 0, got %v", got)
		require.LessOrEqual(t, got, s.Cap(), "expect a delay <= cap %v, got %v", s.Cap(), got)
		switch strategy {
		case StrategyExponential:
			require.Equal(t, w, got, "expect window %v, got %v", w, got)
		case StrategyFull:
			require.Less(t, got, w, "expect a delay below window %v, got %v", w, got)
		case StrategyEqual:
			require.GreaterOrEqual(t, got, w/2, "expect a delay >= half window %v, got %v", w/2, got)
			require.Less(t, got, w, "expect a delay below window %v, got %v", w, got)
		case StrategyDecorrelated:
			require.GreaterOrEqual(t, got, base, "expect a delay >= base %v, got %v", base, got)
			if attempt <= 1 {
				hi := min(s.Cap(), triple(base))
				require.LessOrEqual(t, got, hi, "expect a first delay <= %v, got %v", hi, got)
			}
		}
	}
}

func TestExponentialDefaults(t *testing.T) {
	d, err := NewExponential()
	require.NoError(t, err)
	cases := map[string]struct {
		attempt int
		err     error
		expect  time.Duration
	}{
		"attempt 1":          {attempt: 1, expect: 50 * time.Millisecond},
		"attempt 2":          {attempt: 2, expect: 100 * time.Millisecond},
		"attempt 5":          {attempt: 5, expect: 800 * time.Millisecond},
		"attempt 9":          {attempt: 9, expect: 12800 * time.Millisecond},
		"attempt 10 capped":  {attempt: 10, expect: 20 * time.Second},
		"throttle attempt 1": {attempt: 1, err: throttleErr(), expect: time.Second},
		"throttle attempt 2": {attempt: 2, err: throttleErr(), expect: 2 * time.Second},
		"throttle attempt 5": {attempt: 5, err: throttleErr(), expect: 16 * time.Second},
		"throttle attempt 6": {attempt: 6, err: throttleErr(), expect: 20 * time.Second},
		"429 attempt 3":      {attempt: 3, err: tooManyRequestsErr(), expect: 4 * time.Second},
		"server error":       {attempt: 3, err: serverErr(), expect: 200 * time.Millisecond},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := d.BackoffDelay(c.attempt, c.err)
			require.NoError(t, err)
			assert.Equal(t, c.expect, got, "expect %v, got %v", c.expect, got)
		})
	}
}

func TestThrottleOption(t *testing.T) {
	cases := map[string]struct {
		throttle retry.IsErrorThrottle
		err      error
		expect   time.Duration
	}{
		"always true, plain error": {throttle: retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.TrueTernary }), err: errors.New("x"), expect: time.Second},
		"always true, nil error":   {throttle: retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.TrueTernary }), err: nil, expect: DefaultBase},
		"false, SDK throttle":      {throttle: retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.FalseTernary }), err: throttleErr(), expect: DefaultBase},
		"unknown counts as no":     {throttle: retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.UnknownTernary }), err: throttleErr(), expect: DefaultBase},
		"empty list, SDK throttle": {throttle: retry.IsErrorThrottles{}, err: throttleErr(), expect: DefaultBase},
		"default, SDK throttle":    {throttle: nil, err: throttleErr(), expect: time.Second},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := NewExponential(func(o *Options) { o.Throttle = c.throttle })
			require.NoError(t, err)
			got, err := d.BackoffDelay(1, c.err)
			require.NoError(t, err)
			assert.Equal(t, c.expect, got, "expect %v, got %v", c.expect, got)
		})
	}
}

// TestDefaultThrottlesNotMutated checks that a delayer snapshots the SDK's
// default classifiers: a caller appending to retry.DefaultThrottles later
// does not change an existing delayer, and building one does not change the
// SDK's list.
func TestDefaultThrottlesNotMutated(t *testing.T) {
	before := len(retry.DefaultThrottles)
	d, err := NewExponential()
	require.NoError(t, err)
	require.Len(t, retry.DefaultThrottles, before, "expect %d default throttles, got %d", before, len(retry.DefaultThrottles))

	// Overwrite the backing array the delayer would share if it did not copy.
	saved := retry.DefaultThrottles[0]
	retry.DefaultThrottles[0] = retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.FalseTernary })
	defer func() { retry.DefaultThrottles[0] = saved }()

	got, err := d.BackoffDelay(1, throttleErr())
	require.NoError(t, err)
	assert.Equal(t, time.Second, got, "expect throttle base 1s, got %v", got)
}

func TestNewSkipsNilOptionFunc(t *testing.T) {
	for _, strategy := range Strategies() {
		t.Run(string(strategy), func(t *testing.T) {
			d := mustNew(t, strategy, nil, func(o *Options) { o.Cap = time.Second })
			assert.Equal(t, time.Second, d.Cap(), "expect cap 1s, got %v", d.Cap())
		})
	}
}

// TestANilDelayerActsAsItsZeroValue: a constructor's nil result, kept
// despite its error, answers every method as its type's zero value does,
// the defaults, instead of panicking.
func TestANilDelayerActsAsItsZeroValue(t *testing.T) {
	for name, d := range map[string]Delayer{
		"Exponential":  (*Exponential)(nil),
		"Full":         (*Full)(nil),
		"Equal":        (*Equal)(nil),
		"Decorrelated": (*Decorrelated)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, DefaultBase, d.Base())
			assert.Equal(t, DefaultThrottleBase, d.ThrottleBase())
			assert.Equal(t, DefaultCap, d.Cap())
			if g, ok := d.(interface{ Growth() float64 }); ok {
				assert.Equal(t, float64(DefaultGrowth), g.Growth())
			}
			delay, err := d.BackoffDelay(3, throttleErr())
			require.NoError(t, err)
			assert.LessOrEqual(t, delay, DefaultCap)
			assert.GreaterOrEqual(t, delay, time.Duration(0))
			assert.LessOrEqual(t, d.Delay(math.MaxInt, false), DefaultCap)
			q := d.NewSequence()
			assert.LessOrEqual(t, q.Next(nil), 3*DefaultBase, "a first retry's delay under the defaults")
			assert.Equal(t, 1, q.Attempt())
		})
	}
}
