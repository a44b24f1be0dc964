package jitterretry

// This file owns the send-rate limiter's quiet tally: the sends and
// successful answers it counts without its lock, while they would change
// nothing but the current window's counts.

import (
	"math"
	"runtime"
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
// A paced limiter's sends took the lock still, where a caller that finds
// nobody waiting and its turn due only moves the queue's clock on: the
// tally takes such turns too, with one compare-and-swap on the time the
// next one is due (see takeTurn).
//
// The limiter opens the tally under its lock, as it unlocks (see
// sendRate.openQuietLocked): until the earliest time its control would
// next act on the clock alone (the window's end, an idle start-over), and
// only in a state where a send (unlimited, or paced with nobody waiting;
// no retry expected) or a successful answer (no cut or jump under test, no episode of throttles
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
	// from, sendsUntil, turnsUntil and oksUntil are readings of the
	// limiter's clock, in nanoseconds since its epoch: a send unpaced, a
	// send paced, or a successful answer, read from from until its end is
	// counted here; an end of 0 counts none. A bound of each mode of
	// sends: a sender that read the mode as unpaced as the tally went
	// from paced to closed found the paced sends' bound open, and was sent
	// without a turn (up to seven callers of one instant at once, in each
	// of ten runs of 40 of TestQuietTallyPacesRacingSendersATurnApart on 2
	// cores).
	from, sendsUntil, turnsUntil, oksUntil atomic.Int64
	// turn is the time between two turns, in nanoseconds, while sends
	// counted here are paced (see takeTurn); 0 while they are not.
	turn atomic.Int64
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
	// next is the reading at which the next paced turn is due (see
	// takeTurn), written by every paced send, as the counts are;
	// math.MaxInt64 (see takeTurns) or unset while none is taken here.
	// pacing counts the paced senders between their first look at next
	// and their count: the lock's holder waits for them (see takeTurns).
	next, pacing atomic.Int64
}

// sendsOpen reports whether a send may be counted here, at some time: the
// limiter reads its clock only then.
func (t *quietTally) sendsOpen() bool {
	return t.sendsUntil.Load() != 0 || t.turnsUntil.Load() != 0
}

// oksOpen is sendsOpen for successful answers.
func (t *quietTally) oksOpen() bool { return t.oksUntil.Load() != 0 }

// countSend counts a send at the reading read returns (nanoseconds since
// the limiter's epoch), and reports whether it could: if not, the limiter
// takes it under its lock. A paced send takes its turn (see takeTurn).
func (t *quietTally) countSend(read func() time.Duration) bool {
	if t.turn.Load() > 0 {
		return t.countPacedSend(read)
	}
	r := read()
	if !t.within(r, &t.sendsUntil) {
		return false
	}
	t.count(r)
	return true
}

// countPacedSend is countSend for a paced send. It counts itself among the
// senders pacing from its first look at next until its count, so that the
// lock's holder, which closes the pace and then waits for them (see
// takeTurns), finds every turn taken counted: a turn whose count came
// after, taken for one not taken, was given back when the tally opened
// again, and sent a second caller at the same instant (helper-240: 8
// goroutines racing for one turn, two sent at once in 3 of 10 runs of 200).
func (t *quietTally) countPacedSend(read func() time.Duration) bool {
	t.pacing.Add(1)
	defer t.pacing.Add(-1)
	for {
		// next before turn, which open stores first: a next of the
		// open's goes with its turn. And both before the reading: a
		// turn another sender took since is one it read the clock for
		// before this reading, and this one finds the next turn no
		// later than its reading allows.
		next, turn := t.next.Load(), t.turn.Load()
		r := read()
		if turn <= 0 || !t.within(r, &t.turnsUntil) {
			return false
		}
		switch taken, raced := t.takeTurn(r, next, turn); {
		case raced:
			continue
		case !taken:
			return false
		}
		t.count(r)
		return true
	}
}

// count counts a send read at r.
func (t *quietTally) count(r time.Duration) {
	t.lastAt.Store(int64(r)) // before the count: a take that sees it sees this
	t.sent.Add(1)
}

// takeTurn takes the turn due at reading r, next being when the next turn
// was due as read before r: one turn after the last one taken, or r if
// that was longer ago, the queue's own rule for a caller who finds nobody
// waiting (see sendQueue.clock), which keeps no rate unused, due a
// nanosecond early as turnsDue is. It reports whether it took it, and, if
// not, whether another sender took a turn meanwhile, so that the caller
// reads the clock again: readings taken before that turn's would find it
// not due (two goroutines sharing a client at a rate far above theirs
// went to the lock for every other send). A turn not due, or none taken
// here (next is math.MaxInt64: see takeTurns), waits in the queue, under
// the lock.
func (t *quietTally) takeTurn(r time.Duration, next, turn int64) (taken, raced bool) {
	if int64(r) < next-1 {
		return false, false
	}
	if !t.next.CompareAndSwap(next, max(next, int64(r))+turn) {
		return false, true
	}
	return true, false
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
// A turn above 0 paces the sends, the first due at next (see takeTurn);
// the lock's holder takes the pace back with takeTurns, before it opens
// the tally again. The caller holds the limiter's lock.
func (t *quietTally) open(from, sends, oks, next, turn time.Duration) {
	sends = max(sends, 0)
	t.from.Store(int64(from))
	if turn > 0 {
		t.sendsUntil.Store(0) // first: a sender that read the mode unpaced counts no more
		t.turn.Store(int64(turn))
		t.next.Store(int64(next)) // after turn: see countPacedSend
		t.turnsUntil.Store(int64(sends))
	} else {
		t.turnsUntil.Store(0)
		t.turn.Store(0)
		t.sendsUntil.Store(int64(sends))
	}
	t.oksUntil.Store(int64(max(oks, 0)))
}

// close stops the counting.
func (t *quietTally) close() {
	t.sendsUntil.Store(0)
	t.turnsUntil.Store(0)
	t.oksUntil.Store(0)
}

// takeTurns stops the paced sends (see takeTurn), waits for the senders
// still pacing (each a clock reading and a few instructions from its
// count, or from finding no turn), and returns the reading at which the
// next turn was due: every turn taken here is then counted. The caller
// holds the limiter's lock, and reads the clock after: every turn taken
// was read at or before it. It yields while it waits, then sleeps: a
// slow Options.Clock in a sender's reading kept a core busy for as long
// (helper-242: 151 ms of CPU in 204 ms behind a reading of 200 ms).
func (t *quietTally) takeTurns() time.Duration {
	next := t.next.Swap(math.MaxInt64)
	for i := 0; t.pacing.Load() != 0; i++ {
		if i < pacingSpins {
			runtime.Gosched()
		} else {
			time.Sleep(pacingNap)
		}
	}
	return time.Duration(next)
}

// pacingSpins and pacingNap shape takeTurns' wait: a sender is due within
// a clock reading (tens of nanoseconds on the monotonic clock), so a few
// yields end nearly every wait, and naps end the rest without a core.
const (
	pacingSpins = 64
	pacingNap   = 20 * time.Microsecond
)

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
