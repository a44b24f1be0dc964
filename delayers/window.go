package delayers

import (
	"math"
	"math/bits"
	"time"
)

// maxShift is the largest doubling count that can be applied to a positive
// time.Duration without the shift itself overflowing int64.
const maxShift = 62

// window returns min(cap, base*2^(attempt-1)) without overflow. Attempts below
// 1 count as 1, so the first retry's window is base.
func window(base, cap time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	// Compare before subtracting: attempt-1 wraps to math.MaxInt at
	// math.MinInt, which would turn the smallest attempt into the cap.
	if attempt <= 1 {
		return min(base, cap)
	}
	shift := attempt - 1
	if shift > maxShift || base > cap>>uint(shift) {
		return cap
	}
	return base << uint(shift)
}

// grownWindow returns min(cap, base*growth^(attempt-1)), the window of the
// windowed strategies. growth 2 takes window's exact integer shifts, so the
// default gives the same delays, bit for bit, as before Growth existed.
// Other factors, which Options restricts to [MinGrowth, MaxGrowth], are
// computed in float64 and truncated to whole nanoseconds:
//
//   - attempts below 1 count as 1, compared before subtracting, as in window;
//   - growth^(attempt-1) is +Inf for large attempts (math.Pow of a number
//     above 1 to a huge power), and any product not below cap, +Inf
//     included, gives cap, so nothing overflows and the result is never NaN;
//   - a product below float64(cap) is below 2^63, so truncating it to an
//     int64 cannot overflow; the final min covers a cap that rounded up in
//     float64.
//
// The window never shrinks as attempt grows: float multiplication and
// truncation are monotone, and math.Pow's error, a few ulps per squaring,
// is many orders of magnitude below the factor of at least MinGrowth
// between one attempt and the next.
func grownWindow(base, cap time.Duration, growth float64, attempt int) time.Duration {
	if growth == DefaultGrowth {
		return window(base, cap, attempt)
	}
	if base <= 0 {
		return 0
	}
	if attempt <= 1 || base >= cap {
		return min(base, cap)
	}
	w := float64(base) * math.Pow(growth, float64(attempt-1))
	if !(w < float64(cap)) {
		return cap
	}
	return min(time.Duration(w), cap)
}

// between maps the random value x to a duration in [lo, hi) by a 64x64-bit
// multiply, so it needs no division, no float and never panics. It returns lo
// when hi <= lo. Being a pure function of x, it is tested at x = 0 and
// x = math.MaxUint64.
func between(lo, hi time.Duration, x uint64) time.Duration {
	if hi <= lo {
		return lo
	}
	span := uint64(hi) - uint64(lo)
	offset, _ := bits.Mul64(x, span)
	return lo + time.Duration(offset)
}

// triple returns 3*d, saturating at math.MaxInt64.
func triple(d time.Duration) time.Duration {
	if d > math.MaxInt64/3 {
		return math.MaxInt64
	}
	return 3 * d
}
