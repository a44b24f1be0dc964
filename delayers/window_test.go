package delayers

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
