package delayers

import (
	"errors"
	"math"
	mathrand "math/rand"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionErrors(t *testing.T) {
	cases := map[string]struct {
		opts   Options
		option string
		value  time.Duration
		reason string
	}{
		"negative base":          {opts: Options{Base: -1}, option: "Base", value: -1, reason: "negative"},
		"negative throttle base": {opts: Options{ThrottleBase: -time.Second}, option: "ThrottleBase", value: -time.Second, reason: "negative"},
		"negative cap":           {opts: Options{Cap: -time.Minute}, option: "Cap", value: -time.Minute, reason: "negative"},
	}
	for name, c := range cases {
		for _, strategy := range Strategies() {
			t.Run(name+"/"+string(strategy), func(t *testing.T) {
				d, err := New(strategy, func(o *Options) { *o = c.opts })
				require.Error(t, err, "expect an error, got delayer %v", d)
				// A typed nil pointer inside the interface would pass
				// assert.Nil but fail a caller's d != nil check.
				assert.True(t, d == nil, "expect a nil Delayer interface with an error, got %#v", d)
				var oe *OptionError
				require.True(t, errors.As(err, &oe), "expect *OptionError, got %T", err)
				assert.Equal(t, c.option, oe.Option, "expect option %s, got %s", c.option, oe.Option)
				assert.Equal(t, c.value, oe.Value, "expect value %v, got %v", c.value, oe.Value)
				assert.Contains(t, err.Error(), c.reason, "expect reason %q in %q", c.reason, err.Error())
				assert.Contains(t, err.Error(), c.option, "expect option %q in %q", c.option, err.Error())
				assert.True(t, errors.Is(err, ErrInvalidOption), "expect errors.Is(err, ErrInvalidOption) for %v", err)
			})
		}
	}
}

// TestConstructorsReturnNilOnError checks each typed constructor, not only
// New, so a caller never receives a half-built delayer.
func TestConstructorsReturnNilOnError(t *testing.T) {
	bad := func(o *Options) { o.Cap = -1 }
	e, err := NewExponential(bad)
	assert.Nil(t, e, "expect nil Exponential, got %v", e)
	assert.Error(t, err)
	f, err := NewFull(bad)
	assert.Nil(t, f, "expect nil Full, got %v", f)
	assert.Error(t, err)
	q, err := NewEqual(bad)
	assert.Nil(t, q, "expect nil Equal, got %v", q)
	assert.Error(t, err)
	d, err := NewDecorrelated(bad)
	assert.Nil(t, d, "expect nil Decorrelated, got %v", d)
	assert.Error(t, err)
}

func TestOptionDefaults(t *testing.T) {
	cases := map[string]struct {
		opts                     Options
		base, throttleBase, cap_ time.Duration
	}{
		"zero value is the SDK's numbers":      {opts: Options{}, base: 50 * time.Millisecond, throttleBase: time.Second, cap_: 20 * time.Second},
		"small cap clamps both default bases":  {opts: Options{Cap: 10 * time.Millisecond}, base: 10 * time.Millisecond, throttleBase: 10 * time.Millisecond, cap_: 10 * time.Millisecond},
		"cap between the defaults":             {opts: Options{Cap: 500 * time.Millisecond}, base: 50 * time.Millisecond, throttleBase: 500 * time.Millisecond, cap_: 500 * time.Millisecond},
		"one nanosecond cap":                   {opts: Options{Cap: 1}, base: 1, throttleBase: 1, cap_: 1},
		"explicit base equal to cap":           {opts: Options{Base: time.Second, ThrottleBase: time.Second, Cap: time.Second}, base: time.Second, throttleBase: time.Second, cap_: time.Second},
		"explicit base, default throttle base": {opts: Options{Base: 5 * time.Second}, base: 5 * time.Second, throttleBase: time.Second, cap_: 20 * time.Second},
		"explicit small cap and explicit base": {opts: Options{Base: time.Millisecond, Cap: 2 * time.Millisecond}, base: time.Millisecond, throttleBase: 2 * time.Millisecond, cap_: 2 * time.Millisecond},
	}
	for name, c := range cases {
		for _, strategy := range Strategies() {
			t.Run(name+"/"+string(strategy), func(t *testing.T) {
				d := mustNew(t, strategy, func(o *Options) { *o = c.opts })
				s := d
				assert.Equal(t, c.base, s.Base(), "expect base %v, got %v", c.base, s.Base())
				assert.Equal(t, c.throttleBase, s.ThrottleBase(), "expect throttle base %v, got %v", c.throttleBase, s.ThrottleBase())
				assert.Equal(t, c.cap_, s.Cap(), "expect cap %v, got %v", c.cap_, s.Cap())
			})
		}
	}
}

func TestParseStrategy(t *testing.T) {
	cases := map[string]struct {
		in      string
		expect  Strategy
		wantErr bool
	}{
		"exponential":  {in: "exponential", expect: StrategyExponential},
		"full":         {in: "full", expect: StrategyFull},
		"equal":        {in: "equal", expect: StrategyEqual},
		"decorrelated": {in: "decorrelated", expect: StrategyDecorrelated},
		"empty":        {in: "", wantErr: true},
		"wrong case":   {in: "Full", wantErr: true},
		"padded":       {in: " full", wantErr: true},
		"unknown":      {in: "fibonacci", wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseStrategy(c.in)
			if !c.wantErr {
				require.NoError(t, err)
				assert.Equal(t, c.expect, got, "expect %q, got %q", c.expect, got)
				return
			}
			require.Error(t, err, "expect an error for %q, got strategy %q", c.in, got)
			assert.Equal(t, Strategy(""), got, "expect no strategy, got %q", got)
			assert.ErrorIs(t, err, ErrUnknownStrategy, "expect ErrUnknownStrategy, got %v", err)
			assert.Contains(t, err.Error(), "unknown strategy", "expect 'unknown strategy' in %q", err.Error())
			for _, s := range Strategies() {
				assert.Contains(t, err.Error(), string(s), "expect valid choice %q named in %q", s, err.Error())
			}
		})
	}
}

func TestNewUnknownStrategy(t *testing.T) {
	d, err := New("fibonacci")
	require.Error(t, err, "expect an error, got delayer %v", d)
	assert.True(t, d == nil, "expect a nil Delayer interface, got %#v", d)
	assert.True(t, strings.Contains(err.Error(), `"fibonacci"`), "expect the name in %q", err.Error())
	assert.ErrorIs(t, err, ErrUnknownStrategy, "expect ErrUnknownStrategy, got %v", err)
	assert.NotErrorIs(t, err, ErrInvalidOption, "expect an unknown strategy not to be an option error, got %v", err)

	// An unknown strategy is reported even when the options are also bad.
	_, err = New("fibonacci", func(o *Options) { o.Cap = -1 })
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUnknownStrategy, "expect ErrUnknownStrategy, got %v", err)
}

func TestStrategiesReturnsACopy(t *testing.T) {
	s := Strategies()
	require.Len(t, s, 4, "expect 4 strategies, got %d", len(s))
	s[0] = "changed"
	assert.Equal(t, StrategyExponential, Strategies()[0], "expect the package list unchanged, got %q", Strategies()[0])
	assert.Equal(t, []Strategy{StrategyExponential, StrategyFull, StrategyEqual, StrategyDecorrelated}, Strategies())
}

func TestStrategyString(t *testing.T) {
	for _, s := range Strategies() {
		got, err := ParseStrategy(string(s))
		require.NoError(t, err)
		assert.Equal(t, s, got, "expect %q to round-trip, got %q", s, got)
	}
}

func TestGrowthOptionErrors(t *testing.T) {
	windowedStrategies := []Strategy{StrategyExponential, StrategyFull, StrategyEqual}
	cases := map[string]struct {
		growth     float64
		strategies []Strategy
		reason     string
	}{
		"one, a constant window":  {growth: 1, strategies: windowedStrategies, reason: "must be within [1.01, 8], or 0 for the default 2"},
		"just below MinGrowth":    {growth: math.Nextafter(MinGrowth, 0), strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"just above MaxGrowth":    {growth: math.Nextafter(MaxGrowth, 9), strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"a half, a shrinking one": {growth: 0.5, strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"negative":                {growth: -2, strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"smallest subnormal":      {growth: math.SmallestNonzeroFloat64, strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"NaN":                     {growth: math.NaN(), strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"+Inf":                    {growth: math.Inf(1), strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"-Inf":                    {growth: math.Inf(-1), strategies: windowedStrategies, reason: "must be within [1.01, 8]"},
		"decorrelated, 1.5":       {growth: 1.5, strategies: []Strategy{StrategyDecorrelated}, reason: "decorrelated jitter has no window"},
		"decorrelated, NaN":       {growth: math.NaN(), strategies: []Strategy{StrategyDecorrelated}, reason: "decorrelated jitter has no window"},
	}
	for name, c := range cases {
		for _, strategy := range c.strategies {
			t.Run(name+"/"+string(strategy), func(t *testing.T) {
				d, err := New(strategy, func(o *Options) { o.Growth = c.growth })
				require.Error(t, err, "expect an error, got delayer %v", d)
				assert.True(t, d == nil, "expect a nil Delayer interface with an error, got %#v", d)
				var oe *OptionError
				require.True(t, errors.As(err, &oe), "expect *OptionError, got %T", err)
				assert.Equal(t, "Growth", oe.Option, "expect option Growth, got %s", oe.Option)
				assert.Zero(t, oe.Value, "expect no duration Value for Growth, got %v", oe.Value)
				if math.IsNaN(c.growth) {
					assert.True(t, math.IsNaN(oe.Factor), "expect Factor NaN, got %v", oe.Factor)
				} else {
					assert.Equal(t, c.growth, oe.Factor, "expect Factor %v, got %v", c.growth, oe.Factor)
				}
				assert.Contains(t, err.Error(), "delayers: invalid Growth ", "expect the option in %q", err.Error())
				assert.NotContains(t, err.Error(), "0s", "expect the factor, not a zero duration, in %q", err.Error())
				assert.Contains(t, err.Error(), c.reason, "expect reason %q in %q", c.reason, err.Error())
				assert.ErrorIs(t, err, ErrInvalidOption, "expect errors.Is(err, ErrInvalidOption) for %v", err)
			})
		}
	}
}

// TestGrowthErrorMessage pins the whole message once, so its wording is a
// deliberate change.
func TestGrowthErrorMessage(t *testing.T) {
	_, err := NewFull(func(o *Options) { o.Growth = 1 })
	require.Error(t, err)
	assert.Equal(t, "delayers: invalid Growth 1: must be within [1.01, 8], or 0 for the default 2", err.Error())
	_, err = NewDecorrelated(func(o *Options) { o.Growth = 1.5 })
	require.Error(t, err)
	assert.Equal(t, "delayers: invalid Growth 1.5: applies only to the windowed strategies (exponential, full, equal): decorrelated jitter has no window", err.Error())
}

// TestNilOptionErrorPrints: a typed nil in an error interface prints
// instead of panicking in the caller's logging, and matches nothing, as a
// nil *jitterretry.GiveUpError (it matched ErrInvalidOption: an outside
// review, helper-177). A zero OptionError prints no empty fields.
func TestNilOptionErrorPrints(t *testing.T) {
	var oe *OptionError
	assert.NotPanics(t, func() { assert.Contains(t, oe.Error(), "nil") })
	assert.False(t, errors.Is(oe, ErrInvalidOption))
	assert.True(t, errors.Is(&OptionError{}, ErrInvalidOption))
	assert.Equal(t, "delayers: invalid option", (&OptionError{}).Error())
}

// TestDurationErrorsComeBeforeGrowth: with several bad fields, the
// durations are reported first, as before Growth existed.
func TestDurationErrorsComeBeforeGrowth(t *testing.T) {
	_, err := NewFull(func(o *Options) { o.Cap, o.Growth = -1, 100 })
	var oe *OptionError
	require.True(t, errors.As(err, &oe), "expect *OptionError, got %T", err)
	assert.Equal(t, "Cap", oe.Option, "expect Cap reported first, got %s", oe.Option)
}

func TestGrowthDefaults(t *testing.T) {
	cases := map[string]struct {
		growth, expect float64
	}{
		"zero is the doubling": {growth: 0, expect: DefaultGrowth},
		"explicit 2":           {growth: 2, expect: 2},
		"1.5":                  {growth: 1.5, expect: 1.5},
		"MinGrowth":            {growth: MinGrowth, expect: MinGrowth},
		"MaxGrowth":            {growth: MaxGrowth, expect: MaxGrowth},
	}
	type grower interface{ Growth() float64 }
	for name, c := range cases {
		for _, strategy := range []Strategy{StrategyExponential, StrategyFull, StrategyEqual} {
			t.Run(name+"/"+string(strategy), func(t *testing.T) {
				d := mustNew(t, strategy, func(o *Options) { o.Growth = c.growth })
				g, ok := d.(grower)
				require.True(t, ok, "expect %T to report its Growth", d)
				assert.Equal(t, c.expect, g.Growth(), "expect growth %v, got %v", c.expect, g.Growth())
				assert.Equal(t, DefaultBase, d.Base(), "expect Growth to leave Base at %v, got %v", DefaultBase, d.Base())
			})
		}
	}
	d := mustNew(t, StrategyDecorrelated)
	_, ok := d.(grower)
	assert.False(t, ok, "expect Decorrelated, which has no window, to have no Growth method")
}

// TestExplicitGrowth2IsTheDefault: Growth 2 and Growth 0 give the same
// delays, bit for bit, since both take the integer doubling.
func TestExplicitGrowth2IsTheDefault(t *testing.T) {
	for _, strategy := range []Strategy{StrategyExponential, StrategyFull, StrategyEqual} {
		t.Run(string(strategy), func(t *testing.T) {
			a := mustNew(t, strategy, withSeed(9), withBounds(1, 3, math.MaxInt64))
			b := mustNew(t, strategy, withSeed(9), withBounds(1, 3, math.MaxInt64), func(o *Options) { o.Growth = 2 })
			// attempt+i wraps from math.MaxInt to math.MinInt, itself an edge.
			for _, attempt := range edgeAttempts {
				for i := range 70 {
					x, _ := a.BackoffDelay(attempt+i, nil)
					y, _ := b.BackoffDelay(attempt+i, nil)
					require.Equal(t, x, y, "expect attempt %d to give %v, got %v", attempt+i, x, y)
				}
			}
		})
	}
}

// TestBaseAboveCapIsCapped: a cap below a base is a cap, as in the SDK: the
// first window is the cap, not an error.
func TestBaseAboveCapIsCapped(t *testing.T) {
	for _, strategy := range Strategies() {
		t.Run(string(strategy), func(t *testing.T) {
			d, err := New(strategy, func(o *Options) { o.Base, o.ThrottleBase, o.Cap = 2*time.Second, time.Minute, time.Second })
			require.NoError(t, err)
			assert.Equal(t, time.Second, d.Base())
			assert.Equal(t, time.Second, d.ThrottleBase())
			for attempt := 1; attempt <= 3; attempt++ {
				got, _ := d.BackoffDelay(attempt, nil)
				assert.LessOrEqual(t, got, time.Second, "expect delays within the cap")
			}
		})
	}
}

// TestDecorrelatedTakesTheDefaultGrowth: 2 is the default every strategy
// starts from, so decorrelated jitter accepts it written out.
func TestDecorrelatedTakesTheDefaultGrowth(t *testing.T) {
	d, err := New(StrategyDecorrelated, func(o *Options) { o.Growth = 2 })
	require.NoError(t, err)
	assert.NotNil(t, d)
}

// sourceFunc is a Source made of a func; a nil one cannot be called.
type sourceFunc func() uint64

func (f sourceFunc) Uint64() uint64 { return f() }

// constantSource is a stateless Source whose pointer methods never read
// their receiver, so a nil *constantSource works.
type constantSource struct{}

func (*constantSource) Uint64() uint64 { return 1 << 63 }

// TestOptionsHoldingANilThatCannotBeCalledAreRefused: a Throttle or Source
// that is a nil func, a nil pointer to a type with value methods, or a nil
// pointer of a type known to dereference it, is refused by every
// constructor, where the first delay would otherwise panic.
func TestOptionsHoldingANilThatCannotBeCalledAreRefused(t *testing.T) {
	cases := map[string]struct {
		set    func(*Options)
		option string
		held   string
	}{
		"nil Source func":          {set: func(o *Options) { o.Source = sourceFunc(nil) }, option: "Source", held: "delayers.sourceFunc"},
		"nil *rand.Rand":           {set: func(o *Options) { o.Source = (*rand.Rand)(nil) }, option: "Source", held: "*rand.Rand"},
		"nil *rand.PCG":            {set: func(o *Options) { o.Source = (*rand.PCG)(nil) }, option: "Source", held: "*rand.PCG"},
		"nil Throttle func":        {set: func(o *Options) { o.Throttle = retry.IsErrorThrottleFunc(nil) }, option: "Throttle", held: "retry.IsErrorThrottleFunc"},
		"nil *ThrottleErrorCode":   {set: func(o *Options) { o.Throttle = (*retry.ThrottleErrorCode)(nil) }, option: "Throttle", held: "*retry.ThrottleErrorCode"},
		"nil entry of a list":      {set: func(o *Options) { o.Throttle = retry.IsErrorThrottles{retry.DefaultThrottles[0], nil} }, option: "Throttle", held: "entry 1"},
		"nil func entry of a list": {set: func(o *Options) { o.Throttle = retry.IsErrorThrottles{retry.IsErrorThrottleFunc(nil)} }, option: "Throttle", held: "entry 0"},
		"nil entry of a list in the list": {set: func(o *Options) {
			o.Throttle = retry.IsErrorThrottles{retry.DefaultThrottles[0], retry.IsErrorThrottles{nil}}
		}, option: "Throttle", held: "entry 1.0"},
		"nil func in a list in the list": {set: func(o *Options) {
			o.Throttle = retry.IsErrorThrottles{retry.IsErrorThrottles{retry.IsErrorThrottleFunc(nil)}}
		}, option: "Throttle", held: "entry 0.0"},
		"a list that holds itself": {set: func(o *Options) {
			self := retry.IsErrorThrottles{nil}
			self[0] = self
			o.Throttle = self
		}, option: "Throttle", held: "at entry 0 holds itself"},
		"nil entry of a pointer to a list": {set: func(o *Options) {
			o.Throttle = &retry.IsErrorThrottles{retry.IsErrorThrottles{nil}}
		}, option: "Throttle", held: "entry 0.0"},
		"a pointer to a nil func": {set: func(o *Options) {
			f := retry.IsErrorThrottleFunc(nil)
			o.Throttle = &f
		}, option: "Throttle", held: "*retry.IsErrorThrottleFunc"},
		"a zero *rand.Rand": {set: func(o *Options) { o.Source = &rand.Rand{} }, option: "Source", held: "zero math/rand/v2.Rand"},
		"nil *rand.Zipf":    {set: func(o *Options) { o.Source = (*rand.Zipf)(nil) }, option: "Source", held: "*rand.Zipf"},
		// Built, but not safe for concurrent use: one delayer serves every
		// request of a client, and racing draws corrupt the generator
		// (helper-71: data races under -race, accepted before).
		"a built *rand.Rand": {set: func(o *Options) { o.Source = rand.New(rand.NewPCG(1, 2)) }, option: "Source", held: "not safe for concurrent use"},
		"a built *rand.PCG":  {set: func(o *Options) { o.Source = rand.NewPCG(1, 2) }, option: "Source", held: "*rand.PCG"},
		// math/rand's own source, as a Source64 (helper-191: accepted, and
		// racing under -race, though the doc said math/rand's were refused).
		"math/rand's NewSource": {set: func(o *Options) { o.Source = mathrand.NewSource(1).(mathrand.Source64) }, option: "Source", held: "not safe for concurrent use"},
	}
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	for name, c := range cases {
		for _, strategy := range Strategies() {
			t.Run(name+"/"+string(strategy), func(t *testing.T) {
				var d Delayer
				var err error
				require.NotPanics(t, func() { d, err = New(strategy, c.set) })
				require.Error(t, err, "expect the option refused, got a delayer %v", d)
				assert.True(t, d == nil, "expect no delayer with the error, got %#v", d)
				var oe *OptionError
				require.ErrorAs(t, err, &oe)
				assert.Equal(t, c.option, oe.Option)
				assert.ErrorIs(t, err, ErrInvalidOption)
				assert.Contains(t, err.Error(), c.held, "expect the error to say what the option holds")
				assert.NotContains(t, err.Error(), " 0s", "expect no duration printed for %s", c.option)
				if d != nil {
					assert.NotPanics(t, func() { _, _ = d.BackoffDelay(1, throttle) })
				}
			})
		}
	}
	t.Run("lists that end are accepted", func(t *testing.T) {
		answers := retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.TrueTernary })
		doubled := retry.IsErrorThrottles{answers}
		for range 40 { // 2^40 paths: each list is checked once
			doubled = retry.IsErrorThrottles{doubled, doubled}
		}
		view := retry.IsErrorThrottles{answers, nil}
		view[1] = view[:1] // a shorter view of itself
		for _, list := range []retry.IsErrorThrottles{doubled, view} {
			d, err := NewFull(func(o *Options) { o.Throttle = list; o.ThrottleBase, o.Cap = time.Second, time.Second })
			require.NoError(t, err)
			got, err := d.BackoffDelay(1, throttle)
			require.NoError(t, err)
			assert.LessOrEqual(t, got, time.Second)
		}
	})
	t.Run("a nil receiver that works is accepted", func(t *testing.T) {
		d, err := NewFull(func(o *Options) { o.Source = (*constantSource)(nil) })
		require.NoError(t, err)
		got, err := d.BackoffDelay(1, nil)
		require.NoError(t, err)
		assert.Equal(t, DefaultBase/2, got, "expect half the first window from a source at the middle of its range")
	})
}

// TestContentionTakesASourceHoldingNilAsNone: Contention has no
// constructor to refuse it, so a Source that cannot be called means the
// runtime's generator, as nil does.
func TestContentionTakesASourceHoldingNilAsNone(t *testing.T) {
	for name, src := range map[string]Source{
		"nil func":         sourceFunc(nil),
		"nil *rand.Rand":   (*rand.Rand)(nil),
		"a zero rand.Rand": &rand.Rand{},
		"a zero rand.Zipf": &rand.Zipf{},
	} {
		t.Run(name, func(t *testing.T) {
			c := Contention{Cap: time.Second, Source: src}
			var got time.Duration
			require.NotPanics(t, func() { got = c.Next(time.Unix(100, 0), 10*time.Millisecond, 1, 2) })
			assert.True(t, got >= 0 && got <= time.Second, "expect a delay within [0, Cap], got %v", got)
		})
	}
}
