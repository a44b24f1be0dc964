package delayers

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWindow(t *testing.T) {
	cases := map[string]struct {
		base, cap time.Duration
		attempt   int
		expect    time.Duration
	}{
		"first retry is base":          {base: 50 * time.Millisecond, cap: 20 * time.Second, attempt: 1, expect: 50 * time.Millisecond},
		"second doubles":               {base: 50 * time.Millisecond, cap: 20 * time.Second, attempt: 2, expect: 100 * time.Millisecond},
		"third doubles again":          {base: 50 * time.Millisecond, cap: 20 * time.Second, attempt: 3, expect: 200 * time.Millisecond},
		"last below cap":               {base: 50 * time.Millisecond, cap: 20 * time.Second, attempt: 9, expect: 12800 * time.Millisecond},
		"first at cap":                 {base: 50 * time.Millisecond, cap: 20 * time.Second, attempt: 10, expect: 20 * time.Second},
		"exactly cap":                  {base: time.Second, cap: 16 * time.Second, attempt: 5, expect: 16 * time.Second},
		"one past exactly cap":         {base: time.Second, cap: 16 * time.Second, attempt: 6, expect: 16 * time.Second},
		"attempt zero counts as one":   {base: time.Second, cap: 20 * time.Second, attempt: 0, expect: time.Second},
		"negative counts as one":       {base: time.Second, cap: 20 * time.Second, attempt: -1, expect: time.Second},
		"zero base":                    {base: 0, cap: 20 * time.Second, attempt: 5, expect: 0},
		"negative base":                {base: -time.Second, cap: 20 * time.Second, attempt: 5, expect: 0},
		"base above cap is clamped":    {base: 30 * time.Second, cap: 20 * time.Second, attempt: 1, expect: 20 * time.Second},
		"one nanosecond base":          {base: 1, cap: math.MaxInt64, attempt: 63, expect: 1 << 62},
		"one nanosecond base shift 63": {base: 1, cap: math.MaxInt64, attempt: 64, expect: math.MaxInt64},
		"max cap, max shift":           {base: 1, cap: math.MaxInt64, attempt: math.MaxInt, expect: math.MaxInt64},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := window(c.base, c.cap, c.attempt)
			assert.Equal(t, c.expect, got, "expect window %v, got %v", c.expect, got)
		})
	}
}

// TestWindowOverflowAttemptNearIntLimits is the regression test for the
// shift overflow: attempt-1 wraps around at math.MinInt, and a shift of 63 or
// more, or a base near math.MaxInt64, must saturate at cap instead of
// overflowing into a negative or small window.
func TestWindowOverflowAttemptNearIntLimits(t *testing.T) {
	const capD = 20 * time.Second
	cases := map[string]struct {
		base    time.Duration
		cap     time.Duration
		attempt int
		expect  time.Duration
	}{
		"attempt 63":                   {base: DefaultBase, cap: capD, attempt: 63, expect: capD},
		"attempt 64":                   {base: DefaultBase, cap: capD, attempt: 64, expect: capD},
		"attempt 1000":                 {base: DefaultBase, cap: capD, attempt: 1000, expect: capD},
		"attempt MaxInt":               {base: DefaultBase, cap: capD, attempt: math.MaxInt, expect: capD},
		"attempt 0":                    {base: DefaultBase, cap: capD, attempt: 0, expect: DefaultBase},
		"attempt -1":                   {base: DefaultBase, cap: capD, attempt: -1, expect: DefaultBase},
		"attempt MinInt":               {base: DefaultBase, cap: capD, attempt: math.MinInt, expect: DefaultBase},
		"attempt MinInt+1":             {base: DefaultBase, cap: capD, attempt: math.MinInt + 1, expect: DefaultBase},
		"base near MaxInt64 attempt 1": {base: math.MaxInt64 - 1, cap: math.MaxInt64, attempt: 1, expect: math.MaxInt64 - 1},
		"base near MaxInt64 attempt 2": {base: math.MaxInt64 - 1, cap: math.MaxInt64, attempt: 2, expect: math.MaxInt64},
		"base half MaxInt64 attempt 2": {base: math.MaxInt64 / 2, cap: math.MaxInt64, attempt: 2, expect: math.MaxInt64 - 1},
		"base MaxInt64 attempt MaxInt": {base: math.MaxInt64, cap: math.MaxInt64, attempt: math.MaxInt, expect: math.MaxInt64},
		"base 2 attempt 63":            {base: 2, cap: math.MaxInt64, attempt: 63, expect: math.MaxInt64},
		"base 1 attempt 63":            {base: 1, cap: math.MaxInt64, attempt: 63, expect: 1 << 62},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := window(c.base, c.cap, c.attempt)
			assert.Equal(t, c.expect, got, "expect window %v, got %v", c.expect, got)
			assert.GreaterOrEqual(t, got, time.Duration(0), "expect a non-negative window, got %v", got)
		})
	}
}

func TestBetween(t *testing.T) {
	cases := map[string]struct {
		lo, hi time.Duration
		x      uint64
		expect time.Duration
	}{
		"x zero gives lo":                 {lo: 10, hi: 20, x: 0, expect: 10},
		"x max gives hi-1":                {lo: 10, hi: 20, x: math.MaxUint64, expect: 19},
		"x half gives midpoint":           {lo: 0, hi: 100, x: 1 << 63, expect: 50},
		"empty range gives lo":            {lo: 10, hi: 10, x: math.MaxUint64, expect: 10},
		"inverted range gives lo":         {lo: 20, hi: 10, x: math.MaxUint64, expect: 20},
		"one-wide range x max":            {lo: 7, hi: 8, x: math.MaxUint64, expect: 7},
		"zero to MaxInt64 x zero":         {lo: 0, hi: math.MaxInt64, x: 0, expect: 0},
		"zero to MaxInt64 x max":          {lo: 0, hi: math.MaxInt64, x: math.MaxUint64, expect: math.MaxInt64 - 1},
		"near MaxInt64 x max":             {lo: math.MaxInt64 - 3, hi: math.MaxInt64, x: math.MaxUint64, expect: math.MaxInt64 - 1},
		"full int64 span x max":           {lo: math.MinInt64, hi: math.MaxInt64, x: math.MaxUint64, expect: math.MaxInt64 - 1},
		"full int64 span x zero":          {lo: math.MinInt64, hi: math.MaxInt64, x: 0, expect: math.MinInt64},
		"decorrelated first step x max":   {lo: DefaultBase, hi: 3 * DefaultBase, x: math.MaxUint64, expect: 3*DefaultBase - 1},
		"decorrelated first step x zero":  {lo: DefaultBase, hi: 3 * DefaultBase, x: 0, expect: DefaultBase},
		"equal jitter of one ns at x max": {lo: 0, hi: 1, x: math.MaxUint64, expect: 0},
		"quarter of the way":              {lo: 0, hi: 1 << 40, x: 1 << 62, expect: 1 << 38},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := between(c.lo, c.hi, c.x)
			assert.Equal(t, c.expect, got, "expect %v, got %v", c.expect, got)
		})
	}
}

func TestTripleSaturates(t *testing.T) {
	cases := map[string]struct {
		d, expect time.Duration
	}{
		"zero":                {d: 0, expect: 0},
		"one":                 {d: 1, expect: 3},
		"default base":        {d: DefaultBase, expect: 150 * time.Millisecond},
		"largest exact":       {d: math.MaxInt64 / 3, expect: math.MaxInt64 / 3 * 3},
		"smallest saturating": {d: math.MaxInt64/3 + 1, expect: math.MaxInt64},
		"MaxInt64":            {d: math.MaxInt64, expect: math.MaxInt64},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := triple(c.d)
			assert.Equal(t, c.expect, got, "expect %v, got %v", c.expect, got)
		})
	}
}

func TestGrownWindow(t *testing.T) {
	const (
		base = 50 * time.Millisecond
		capD = 20 * time.Second
	)
	cases := map[string]struct {
		base, cap time.Duration
		growth    float64
		attempt   int
		expect    time.Duration
	}{
		"1.5: first retry is base":                      {base: base, cap: capD, growth: 1.5, attempt: 1, expect: base},
		"1.5: second grows by half":                     {base: base, cap: capD, growth: 1.5, attempt: 2, expect: 75 * time.Millisecond},
		"1.5: fourth":                                   {base: base, cap: capD, growth: 1.5, attempt: 4, expect: 168750 * time.Microsecond},
		"1.5: last below cap, 50 ms * 1.5^14 truncated": {base: base, cap: capD, growth: 1.5, attempt: 15, expect: 14596463012},
		"1.5: first at cap":                             {base: base, cap: capD, growth: 1.5, attempt: 16, expect: capD},
		"1.5: attempt zero counts as one":               {base: base, cap: capD, growth: 1.5, attempt: 0, expect: base},
		"1.5: negative counts as one":                   {base: base, cap: capD, growth: 1.5, attempt: -7, expect: base},
		"1.5: zero base":                                {base: 0, cap: capD, growth: 1.5, attempt: 5, expect: 0},
		"1.5: negative base":                            {base: -time.Second, cap: capD, growth: 1.5, attempt: 5, expect: 0},
		"1.5: base above cap is clamped":                {base: 30 * time.Second, cap: capD, growth: 1.5, attempt: 1, expect: capD},
		"1.5: base above cap, attempt 2":                {base: 30 * time.Second, cap: capD, growth: 1.5, attempt: 2, expect: capD},
		"1.5: base equal to cap":                        {base: capD, cap: capD, growth: 1.5, attempt: 3, expect: capD},
		"3: exact in float":                             {base: time.Second, cap: time.Hour, growth: 3, attempt: 5, expect: 81 * time.Second},
		"MaxGrowth: one ns base":                        {base: 1, cap: math.MaxInt64, growth: MaxGrowth, attempt: 21, expect: 1 << 60},
		"MaxGrowth: one ns base, saturates":             {base: 1, cap: math.MaxInt64, growth: MaxGrowth, attempt: 22, expect: math.MaxInt64},
		"MinGrowth: one ns base stays at one":           {base: 1, cap: math.MaxInt64, growth: MinGrowth, attempt: 2, expect: 1},
		"MinGrowth: 100 ns base grows by one":           {base: 100, cap: math.MaxInt64, growth: MinGrowth, attempt: 2, expect: 101},
		"2 takes the exact shifts":                      {base: 3, cap: math.MaxInt64, growth: 2, attempt: 62, expect: 3 << 61},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := grownWindow(c.base, c.cap, c.growth, c.attempt)
			assert.Equal(t, c.expect, got, "expect window %v, got %v", c.expect, got)
		})
	}
}

// TestGrownWindowOverflowAttemptNearIntLimits is the regression test for
// the float path's overflow cases: math.Pow to a power near math.MaxInt is
// +Inf, a product at or above 2^63 cannot be converted to an int64, and
// attempt-1 wraps at math.MinInt. Each must give cap or base, never a
// negative, NaN-derived or small window.
func TestGrownWindowOverflowAttemptNearIntLimits(t *testing.T) {
	const capD = 20 * time.Second
	cases := map[string]struct {
		base, cap time.Duration
		growth    float64
		attempt   int
		expect    time.Duration
	}{
		"attempt 64":                               {base: DefaultBase, cap: capD, growth: 1.5, attempt: 64, expect: capD},
		"attempt 1000":                             {base: DefaultBase, cap: capD, growth: 1.5, attempt: 1000, expect: capD},
		"attempt 1e6, Pow is +Inf":                 {base: DefaultBase, cap: capD, growth: 1.5, attempt: 1_000_000, expect: capD},
		"attempt MaxInt":                           {base: DefaultBase, cap: capD, growth: 1.5, attempt: math.MaxInt, expect: capD},
		"attempt MaxInt, MinGrowth":                {base: 1, cap: math.MaxInt64, growth: MinGrowth, attempt: math.MaxInt, expect: math.MaxInt64},
		"attempt MaxInt, MaxGrowth":                {base: math.MaxInt64, cap: math.MaxInt64, growth: MaxGrowth, attempt: math.MaxInt, expect: math.MaxInt64},
		"attempt MinInt":                           {base: DefaultBase, cap: capD, growth: 1.5, attempt: math.MinInt, expect: DefaultBase},
		"attempt MinInt+1":                         {base: DefaultBase, cap: capD, growth: 1.5, attempt: math.MinInt + 1, expect: DefaultBase},
		"base near MaxInt64, attempt 1":            {base: math.MaxInt64 - 1, cap: math.MaxInt64, growth: 1.5, attempt: 1, expect: math.MaxInt64 - 1},
		"base near MaxInt64, attempt 2":            {base: math.MaxInt64 - 1, cap: math.MaxInt64, growth: MinGrowth, attempt: 2, expect: math.MaxInt64},
		"product just under 2^63":                  {base: 1 << 61, cap: math.MaxInt64, growth: 3.99, attempt: 2, expect: 9200313606762639360}, // float64(3.99) * 2^61, exact
		"product at 2^63":                          {base: 1 << 61, cap: math.MaxInt64, growth: 4, attempt: 2, expect: math.MaxInt64},
		"cap just above the float below it":        {base: 1 << 61, cap: math.MaxInt64 - 100, growth: 4, attempt: 2, expect: math.MaxInt64 - 100},
		"cap that rounds up in float64, attempt 2": {base: (1 << 62) + 1, cap: (1 << 62) + 3, growth: MinGrowth, attempt: 2, expect: (1 << 62) + 3},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := grownWindow(c.base, c.cap, c.growth, c.attempt)
			assert.Equal(t, c.expect, got, "expect window %v, got %v", c.expect, got)
			assert.GreaterOrEqual(t, got, time.Duration(0), "expect a non-negative window, got %v", got)
		})
	}
}

// TestGrownWindowNeverShrinks walks every attempt from 1 until the window
// saturates, and a stretch near math.MaxInt, for factors at and near the
// ends of the valid range: each window is at least the one before it and
// within [min(base, cap), cap].
func TestGrownWindowNeverShrinks(t *testing.T) {
	growths := []float64{MinGrowth, math.Nextafter(MinGrowth, 2), 1.0173, 1.25, 1.5, math.Sqrt2, 1.6, 2, 2.5, 3, math.E, 7.99, MaxGrowth}
	bounds := map[string][2]time.Duration{
		"one ns base, max cap":   {1, math.MaxInt64},
		"default base and cap":   {DefaultBase, DefaultCap},
		"odd base, odd cap":      {7919, 123456789013},
		"base a third of MaxInt": {math.MaxInt64 / 3, math.MaxInt64},
		"base equal to cap":      {time.Second, time.Second},
	}
	for _, g := range growths {
		for name, b := range bounds {
			t.Run(name+"/"+strconv.FormatFloat(g, 'g', -1, 64), func(t *testing.T) {
				base, capD := b[0], b[1]
				prev := grownWindow(base, capD, g, math.MinInt)
				require.Equal(t, min(base, capD), prev, "expect attempt MinInt to give base")
				for attempt := 0; ; attempt++ {
					w := grownWindow(base, capD, g, attempt)
					require.GreaterOrEqual(t, w, prev, "expect attempt %d's window >= %v, got %v", attempt, prev, w)
					require.LessOrEqual(t, w, capD, "expect attempt %d's window <= cap %v, got %v", attempt, capD, w)
					if w == capD {
						break
					}
					require.Less(t, attempt, 10_000, "expect the window to reach cap %v, got %v at attempt %d", capD, w, attempt)
					prev = w
				}
				for attempt := math.MaxInt - 3; attempt > 0; attempt++ {
					require.Equal(t, capD, grownWindow(base, capD, g, attempt), "expect cap at attempt %d", attempt)
				}
			})
		}
	}
}

// refGrownWindow is min(cap, base*growth^(attempt-1)) by repeated
// multiplication in float64, written independently of grownWindow. The two
// round differently, so they agree to a relative 1e-9, not to the
// nanosecond.
func refGrownWindow(base, cap time.Duration, growth float64, attempt int) time.Duration {
	w := float64(min(base, cap))
	for i := 1; i < attempt && w < float64(cap); i++ {
		w *= growth
	}
	if w >= float64(cap) {
		return cap
	}
	return min(time.Duration(w), cap)
}

// closeWindows reports whether two windows agree within the rounding of
// refGrownWindow.
func closeWindows(a, b time.Duration) bool {
	d := math.Abs(float64(a) - float64(b))
	return d <= 1 || d <= 1e-9*math.Max(float64(a), float64(b))
}

func TestGrownWindowMatchesReference(t *testing.T) {
	for _, g := range []float64{MinGrowth, 1.1, 1.5, 2, 3, MaxGrowth} {
		for _, b := range [][2]time.Duration{{1, math.MaxInt64}, {DefaultBase, DefaultCap}, {DefaultThrottleBase, DefaultCap}, {999, 1 << 40}} {
			for attempt := -1; attempt < 5000; attempt++ {
				got, want := grownWindow(b[0], b[1], g, attempt), refGrownWindow(b[0], b[1], g, attempt)
				if !closeWindows(got, want) {
					t.Fatalf("growth %v, base %v, cap %v, attempt %d: expect %v, got %v", g, b[0], b[1], attempt, want, got)
				}
			}
		}
	}
}
