package main

import "time"

// recoveryTarget is the fraction of capacity that counts as recovered.
const recoveryTarget = 0.95

// recoverySeconds is how many whole seconds after a rise of capacity the
// report shows one by one: issue 15 wants the first at 90% with the
// limiter.
const recoverySeconds = 3

// recoveryTime returns how long after at the successes in a sliding one-second
// window first reach recoveryTarget of the capacity in that window, with
// bins the successes per binWidth from the start; false when no window
// within dur does.
func recoveryTime(bins []int64, at, dur time.Duration, capacity func(from, to time.Duration) float64) (time.Duration, bool) {
	per := int(time.Second / binWidth)
	for first := int(at / binWidth); ; first++ {
		from := time.Duration(first) * binWidth
		to := from + time.Second
		if to > dur || first+per > len(bins) {
			return 0, false
		}
		if float64(sum(bins[first:first+per])) >= recoveryTarget*capacity(from, to) {
			return from - at, true
		}
	}
}

// secondsAfter returns, for each of the first n whole seconds after at that
// end within dur, the successes in that second over its capacity, with bins
// the successes per binWidth from the start. The seconds start at at's bin,
// as recoveryTime's windows do; a rise between bins is in capacity's figure.
func secondsAfter(bins []int64, at, dur time.Duration, n int, capacity func(from, to time.Duration) float64) []float64 {
	per := int(time.Second / binWidth)
	var out []float64
	for first := int(at / binWidth); len(out) < n; first += per {
		from := time.Duration(first) * binWidth
		to := from + time.Second
		if to > dur || first+per > len(bins) {
			break
		}
		out = append(out, ratio(float64(sum(bins[first:first+per])), capacity(from, to)))
	}
	return out
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}
