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
// A paced limiter's sends took the lock still, where a caller that finds
// nobody waiting and its turn due only moves the queue's clock on: the
// tally takes such turns too, and counts them, with one compare-and-swap
// on a word that holds the time the next one is due and the count (see
// takeTurn).
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
	// pace is the paced sends' word (see packPace): the reading at which
	// the next turn is due and the turns taken, written by every paced
	// send, as the counts are. One word, so that the swap that takes a
	// turn counts it: with the count apart, the lock's holder had to wait
	// for the senders between the two, or give back a turn taken and not
	// yet counted (helper-240: two sends of one instant at once).
	pace atomic.Uint64
	// opened is the count of turns pace held when the holder opened it,
	// written and read under the limiter's lock only.
	opened uint64
}

// A pace word holds, from the top: paceClosed, set while no turn may be
// taken (see takeTurns); the low paceNextBits bits of the reading at which
// the next turn is due, which tell it within paceSpan of any reading (see
// paceNext); the count of turns taken, modulo 2^paceCountBits. Each
// opening of the pace moves the count on by one, so that no swap of a
// sender that read an earlier pace can succeed (its turn length may be a
// rate's since cut), and a pace takes fewer turns than the count holds
// (see canPace).
const (
	paceCountBits = 27
	paceNextBits  = 36
	paceCountMask = 1<<paceCountBits - 1
	paceNextMask  = 1<<paceNextBits - 1
	paceClosed    = 1 << 63
	// paceSpan is half the range of the next turn's bits: about 34 s.
	paceSpan = 1 << (paceNextBits - 1)
)

// packPace returns the open pace word of the next turn due at reading
// next (nanoseconds since the limiter's epoch), count turns taken.
func packPace(next int64, count uint64) uint64 {
	return uint64(next)&paceNextMask<<paceCountBits | count&paceCountMask
}

// paceNext returns the reading at which w's next turn is due: the one
// whose low bits w holds within paceSpan of reading r.
func paceNext(w uint64, r int64) int64 {
	d := (int64(w>>paceCountBits) - r) & paceNextMask
	if d >= paceSpan {
		d -= 1 << paceNextBits
	}
	return r + d
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

// countPacedSend is countSend for a paced send: it takes and counts its
// turn (see takeTurn).
func (t *quietTally) countPacedSend(read func() time.Duration) bool {
	for {
		// The pace before turn, which open stores first: a pace of the
		// open's goes with its turn. And both before the reading: a
		// turn another sender took since is one it read the clock for
		// before this reading, and this one finds the next turn no
		// later than its reading allows.
		w, turn := t.pace.Load(), t.turn.Load()
		r := read()
		if w&paceClosed != 0 || turn <= 0 || !t.within(r, &t.turnsUntil) {
			return false
		}
		switch taken, raced := t.takeTurn(w, int64(r), turn); {
		case raced:
			continue
		case !taken:
			return false
		}
		return true
	}
}

// count counts a send read at r.
func (t *quietTally) count(r time.Duration) {
	t.lastAt.Store(int64(r)) // before the count: a take that sees it sees this
	t.sent.Add(1)
}

// takeTurn takes and counts the turn due at reading r, w being the open
// pace as read before r: the next turn is due one turn after the last one
// taken, or at r if that was longer ago, the queue's own rule for a caller
// who finds nobody waiting (see sendQueue.clock), which keeps no rate
// unused, due a nanosecond early as turnsDue is. It reports whether it
// took it, and, if not, whether another sender took a turn meanwhile (or
// the pace was closed), so that the caller reads the clock again: readings
// taken before that turn's would find it not due (two goroutines sharing a
// client at a rate far above theirs went to the lock for every other
// send). A turn not due waits in the queue, under the lock.
func (t *quietTally) takeTurn(w uint64, r, turn int64) (taken, raced bool) {
	next := paceNext(w, r)
	if r < next-1 {
		return false, false
	}
	if !t.pace.CompareAndSwap(w, packPace(max(next, r)+turn, w+1)) {
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
// A turn above 0 paces the sends, the first due at next (see takeTurn),
// when the pace word can hold it (see canPace); it reports whether it
// does: the lock's holder then takes the pace back with takeTurns, before
// it opens the tally again. Sends it cannot pace are left to the lock.
// The caller holds the limiter's lock.
func (t *quietTally) open(from, sends, oks, next, turn time.Duration) (paced bool) {
	sends = max(sends, 0)
	if turn > 0 && !canPace(from, sends, next, turn) {
		sends, turn = 0, 0
	}
	t.from.Store(int64(from))
	if turn > 0 {
		// The bounds first: a sender that read the mode unpaced counts
		// no more, and one that reads this pace's word reads its bound
		// (or none), not the last opening's.
		t.sendsUntil.Store(0)
		t.turnsUntil.Store(0)
		t.turn.Store(int64(turn))
		// A count no earlier pace's word holds; a next no earlier than
		// from, which changes no turn (each is due at its reading or
		// later), and keeps it within paceSpan of every reading here.
		t.opened = (t.pace.Load() + 1) & paceCountMask
		t.pace.Store(packPace(int64(max(next, from)), t.opened)) // after turn: see countPacedSend
		t.turnsUntil.Store(int64(sends))
		paced = true
	} else {
		t.turnsUntil.Store(0)
		t.turn.Store(0)
		t.sendsUntil.Store(int64(sends))
	}
	t.oksUntil.Store(int64(max(oks, 0)))
	return paced
}

// canPace reports whether the pace word can hold the turns of length turn
// between readings from and until, the first due at next: every next turn
// (no later than a turn after next or until) within paceSpan of every
// reading, and fewer turns than the count holds (one a turn at most; a
// nanosecond at the rate's highest).
func canPace(from, until, next, turn time.Duration) bool {
	span := max(until, next) - from
	return span < paceSpan/2 && turn < paceSpan/2 && int64(span/turn) < paceCountMask/2
}

// close stops the counting.
func (t *quietTally) close() {
	t.sendsUntil.Store(0)
	t.turnsUntil.Store(0)
	t.oksUntil.Store(0)
}

// takeTurns closes the pace opened last (see takeTurn) and returns the
// reading at which the next turn was due, and how many turns were taken:
// each is counted by the swap that took it. The caller holds the
// limiter's lock, and reads the clock after: every turn taken was read at
// or before it.
func (t *quietTally) takeTurns() (next time.Duration, taken uint64) {
	w := t.pace.Or(paceClosed)
	return time.Duration(paceNext(w, t.from.Load())), (w - t.opened) & paceCountMask
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
