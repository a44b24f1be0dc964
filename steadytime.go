package jitterretry

// This file owns the time the retryer's clocked state (the send-rate
// limiter, a refilling bucket) reads from Options.Clock: one that never
// goes back and does not run ahead of the clock.

import "time"

// maxClockHold is the longest, in the clock's own time, that a clock
// stepped back holds a steadyTime where it was: long enough to absorb the
// jitter of a clock whose readings move back and forth (an offset
// re-synced from a time server), short enough that a waiting caller,
// which asks again at least every sendWindow, is held little longer.
const maxClockHold = 100 * time.Millisecond

// steadyTime turns a clock's readings into a time that never goes back
// and does not run ahead of the clock. A reading behind the latest time
// given (a clock without a monotonic reading, stepped back) gives that
// time again, until the clock passes it, or for maxClockHold of the
// clock's time at most: a larger step goes on from where it was, by as
// much as the clock moves, so that a clock stepped back for good stalls
// nothing for long. Readings that jitter back and forth by less than
// maxClockHold do not add up: only time past the latest given counts.
// Going on from where it was after every step back let each return
// forward count again: a clock jittering by up to 20 ms let a limiter
// fixed at 50 requests a second send 2,760 in one (helper-110).
//
// The zero value is ready. It is not safe for concurrent use: its owner
// reads it under its lock.
type steadyTime struct {
	latest time.Time
	skew   time.Duration // how far the clock stepped back beyond maxClockHold, in all
}

// at returns the time of a reading of the clock. It is split from
// steppedBack so that it inlines: the limiter reads it twice an attempt.
func (s *steadyTime) at(reading time.Time) time.Time {
	now := reading
	if s.skew != 0 {
		now = now.Add(s.skew)
	}
	if now.Before(s.latest) {
		return s.steppedBack(now)
	}
	s.latest = now
	return now
}

// steppedBack returns the time of a reading, with the skew added, that is
// behind the latest time given.
func (s *steadyTime) steppedBack(now time.Time) time.Time {
	if behind := s.latest.Sub(now); behind > maxClockHold {
		s.skew += behind - maxClockHold
	}
	return s.latest
}
