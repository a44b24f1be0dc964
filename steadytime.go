package jitterretry

// This file owns the time the retryer's clocked state (the send-rate
// limiter, a refilling bucket) reads from Options.Clock: one that never
// goes back and does not run ahead of the clock.

import (
	"math"
	"time"
)

// A clock stepped back by less than maxClockStall is held: the time stays
// where it was until the clock passes it again. A step back of more is
// taken for good once stepReadings readings in a row, each no earlier
// than the one before, have stayed that far behind over stepSpan of the
// clock's own time. A clock's readings cannot tell a step from jitter: the
// stall bounds what jitter can do (within ±maxClockStall/2 it counts no
// time twice, whatever its pattern), and the run of readings keeps one or
// two readings out of line, far back, from counting as a step. A second is
// long for a limiter to stand still, but only a clock without a monotonic
// reading that stepped back makes it do so.
const (
	maxClockStall = time.Second
	stepReadings  = 3
	stepSpan      = 100 * time.Millisecond
)

// steadyTime turns a clock's readings into a time that never goes back
// and does not run ahead of the clock: a reading behind the latest time
// given gives that time again, and a step back is taken for good as the
// constants above say, the time then going on from where it was by as
// much as the clock moves. Taking each step back for good at once let
// each return forward count again: a clock jittering by up to 20 ms let a
// limiter fixed at 50 requests a second send 2,760 in one (helper-110);
// a hold of 100 ms of the clock's time, measured between readings that
// jitter, let a random jitter of ±100 ms run it 3.7 times too fast, and
// one reading an hour back followed by one half an hour back move it half
// an hour ahead (helper-111, helper-113). A step is taken less
// maxClockStall, so jitter of ±maxClockStall/2 on top of it cannot run the
// time ahead; the time stands still for up to a second more. A step back
// further than a Duration holds (292 years: a clock counting up from the
// zero time) is never taken: the time stands until the clock passes where
// it was. The run counts readings, not time: read once every few seconds,
// a clock stepped back stalls the time for three readings, but a caller
// the stall holds back asks again within sendWindow.
//
// The zero value is ready. It is not safe for concurrent use: its owner
// reads it under its lock.
type steadyTime struct {
	latest time.Time
	skew   time.Duration // the steps back taken for good, in all
	run    int           // readings in a row at least maxClockStall behind, each no earlier than the last
	first  time.Time     // the run's first reading, skew added
	last   time.Time     // the run's last reading, skew added
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
	s.latest, s.run = now, 0
	return now
}

// steppedBack returns the time of a reading, skew added, that is behind
// the latest time given, and takes a step back for good when the run of
// readings far behind shows one.
func (s *steadyTime) steppedBack(now time.Time) time.Time {
	behind := s.latest.Sub(now)
	switch {
	case behind < maxClockStall || behind == math.MaxInt64:
		// Held: jitter, or a step further back than a Duration holds
		// (Sub saturates), which no skew could undo.
		s.run = 0
		return s.latest
	case s.run == 0 || now.Before(s.last):
		s.run, s.first = 1, now
	default:
		s.run++
	}
	s.last = now
	if s.run >= stepReadings && now.Sub(s.first) >= stepSpan {
		// The run's readings rise: this one, the least behind, is the
		// step, less maxClockStall, for the jitter this reading and the
		// latest may carry: taken whole, a step of 2 s under jitter of
		// ±0.4 s ran the time 0.7 s ahead (helper-114). The rest is held
		// until the clock passes where the time was.
		s.skew += min(behind-maxClockStall, math.MaxInt64-s.skew)
		s.run = 0
	}
	return s.latest
}
