package jitterretry

// This file owns the send-rate limiter's quiet tally: the sends and
// successful answers it counts without its lock, while they would change
// nothing but the current window's counts.

import (
	"sync/atomic"
	"time"
)

// quietTally counts sends and successful answers with one atomic add each,
// for the limiter to take into its window when it next takes its lock.
// Every attempt otherwise took the limiter's lock twice, once to send and
// once for its answer, and read the clock under it, where an unthrottled
// limiter's sends and answers only add to a count: two goroutines sharing
// one client took 422 ns an attempt, 308 ns for one, above issue 15's
// tenth of the SDK's failed-attempt decision in parallel (3,212 ns);
// counted here, 163 and 164 (BenchmarkAttempt, 2 cores, 2026-12-07).
//
// The limiter opens the tally under its lock, as it unlocks (see
// sendRate.openQuietLocked): until the earliest time its control would
// next act on the clock alone (the window's end, an idle start-over), and
// only in a state where a send (unlimited, no retry expected) or a
// successful answer (no cut or jump under test, no episode of throttles
// under way) would only be counted. A count that lands after the limiter
// changed state (a throttle taken under the lock meanwhile) is one that
// came before that change: the order of a send and an answer racing each
// other is no better defined with the lock.
//
// The limiter reads its clock outside the lock for it, as the time since
// its epoch, and counts only a reading between the time the lock's holder
// last read and the end it set, on the clock's own scale: a clock stepped
// back (see steadyTime) falls before it, and its counts go through the
// lock. The zero value is closed.
type quietTally struct {
	// from, sendsUntil and oksUntil are readings of the limiter's clock,
	// in nanoseconds since its epoch: a send, or a successful answer, read
	// from from until its end is counted here; an end of 0 counts none.
	from, sendsUntil, oksUntil atomic.Int64
	// The counts, written by every attempt, on a cache line of their own:
	// sharing the line of the bounds, which every attempt reads, each
	// write made the other cores' next reading of them a miss.
	_ [64]byte
	// sent and ok are counted since the limiter last took them; lastAt
	// is the reading of the last count (racing counts store readings
	// microseconds apart: any will do) and rtt the round trip the last
	// success reported, at least minRTT, which a success under the lock
	// would have set (see sendRate.observe). Each count stores them
	// before it adds itself: a take that sees the count sees them.
	sent, ok, lastAt, rtt atomic.Int64
}

// sendsOpen reports whether a send may be counted here, at some time: the
// limiter reads its clock only then.
func (t *quietTally) sendsOpen() bool { return t.sendsUntil.Load() != 0 }

// oksOpen is sendsOpen for successful answers.
func (t *quietTally) oksOpen() bool { return t.oksUntil.Load() != 0 }

// countSend counts a send read at r (nanoseconds since the limiter's
// epoch), and reports whether it could: if not, the limiter takes it under
// its lock.
func (t *quietTally) countSend(r time.Duration) bool {
	if !t.within(r, &t.sendsUntil) {
		return false
	}
	t.lastAt.Store(int64(r)) // before the count: a take that sees it sees this
	t.sent.Add(1)
	return true
}

// countOK counts a successful answer read at r, reporting a round trip of
// rtt, as countSend a send.
func (t *quietTally) countOK(r, rtt time.Duration) bool {
	if !t.within(r, &t.oksUntil) {
		return false
	}
	t.lastAt.Store(int64(r))
	t.rtt.Store(int64(max(rtt, minRTT))) // as observe sets it
	t.ok.Add(1)
	return true
}

// within reports whether reading r falls in the tally's range ending at
// until.
func (t *quietTally) within(r time.Duration, until *atomic.Int64) bool {
	return r < time.Duration(until.Load()) && r >= time.Duration(t.from.Load())
}

// open lets sends be counted from from until sends, successful answers
// until oks (0 or less: none), each the time since the limiter's epoch.
// The caller holds the limiter's lock.
func (t *quietTally) open(from, sends, oks time.Duration) {
	t.from.Store(int64(from))
	t.sendsUntil.Store(int64(max(sends, 0)))
	t.oksUntil.Store(int64(max(oks, 0)))
}

// close stops the counting.
func (t *quietTally) close() {
	t.sendsUntil.Store(0)
	t.oksUntil.Store(0)
}

// take returns the sends and successful answers counted since the last
// take, and starts the counts over; with them, the reading of the last
// count and the round trip the last success reported (0 when none came).
func (t *quietTally) take() (sent, ok int64, lastAt, rtt time.Duration) {
	if t.sent.Load() == 0 && t.ok.Load() == 0 {
		return 0, 0, 0, 0 // no write: the counts' line stays shared
	}
	sent, ok = t.sent.Swap(0), t.ok.Swap(0)
	lastAt = time.Duration(t.lastAt.Load())
	if ok > 0 {
		rtt = time.Duration(t.rtt.Load())
	}
	return sent, ok, lastAt, rtt
}
