package jitterretry

// This file owns the time the retryer's clocked state (the send-rate
// limiter, a refilling bucket) reads from Options.Clock: one that never
// goes back and does not run ahead of the clock.

import (
	"math"
	"time"
)

// maxClockHold is how long, in the clock's own time, a clock stepped back
// holds a steadyTime where it was before the step is taken for good: long
// enough to tell a step from a reading or two out of line, short enough
// that a waiting caller, which asks again at least every sendWindow, is
// held little longer.
const maxClockHold = 100 * time.Millisecond

// steadyTime turns a clock's readings into a time that never goes back
// and does not run ahead of the clock. A reading behind the latest time
// given (a clock without a monotonic reading, stepped back) gives that
// time again. Only once the readings have stayed behind it while the
// clock moved on maxClockHold is the step taken for good: the time goes
// on from the latest, by as much as the clock moves. A reading that comes
// back up before then (jitter, one bad reading) adds nothing, so readings
// moving back and forth count no time twice however far they move.
// Taking each step back for good at once let each return forward count
// again: a clock jittering by up to 20 ms let a limiter fixed at 50
// requests a second send 2,760 in one (helper-110); taking it once a
// reading was more than maxClockHold behind let a jitter of 60 ms, or a
// single reading an hour back, do the same (helper-111).
//
// The zero value is ready. It is not safe for concurrent use: its owner
// reads it under its lock.
type steadyTime struct {
	latest time.Time
	skew   time.Duration // the steps back taken for good, in all
	behind bool          // the last reading was behind latest
	since  time.Time     // while behind: the earliest such reading in a row, skew added
}

// at returns the time of a reading of the clock. It is split from
// steppedBack so that its usual path stays one comparison: the limiter
// reads it twice an attempt.
func (s *steadyTime) at(reading time.Time) time.Time {
	now := reading
	if s.skew != 0 {
		now = now.Add(s.skew)
	}
	if now.Before(s.latest) {
		return s.steppedBack(now)
	}
	s.latest, s.behind = now, false
	return now
}

// steppedBack returns the time of a reading, skew added, that is behind
// the latest time given, and takes the step for good once the readings
// have stayed behind for maxClockHold of the clock's time.
func (s *steadyTime) steppedBack(now time.Time) time.Time {
	switch {
	case !s.behind || now.Before(s.since):
		s.behind, s.since = true, now
	case now.Sub(s.since) >= maxClockHold:
		step := s.latest.Sub(now) // saturates: readings 292 years apart at most
		if step > math.MaxInt64-s.skew {
			step = math.MaxInt64 - s.skew
		}
		s.skew += step
		s.behind = false
	}
	return s.latest
}
