package delayers

import (
	"errors"
	"strings"
	"testing"
	"time"

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
		"negative base":              {opts: Options{Base: -1}, option: "Base", value: -1, reason: "negative"},
		"negative throttle base":     {opts: Options{ThrottleBase: -time.Second}, option: "ThrottleBase", value: -time.Second, reason: "negative"},
		"negative cap":               {opts: Options{Cap: -time.Minute}, option: "Cap", value: -time.Minute, reason: "negative"},
		"base above cap":             {opts: Options{Base: 2 * time.Second, Cap: time.Second}, option: "Base", value: 2 * time.Second, reason: "larger than Cap 1s"},
		"throttle base above cap":    {opts: Options{ThrottleBase: 2 * time.Second, Cap: time.Second}, option: "ThrottleBase", value: 2 * time.Second, reason: "larger than Cap 1s"},
		"base above default cap":     {opts: Options{Base: 21 * time.Second}, option: "Base", value: 21 * time.Second, reason: "larger than Cap 20s"},
		"throttle above default cap": {opts: Options{ThrottleBase: time.Minute}, option: "ThrottleBase", value: time.Minute, reason: "larger than Cap 20s"},
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
