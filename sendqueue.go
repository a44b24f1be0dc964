package jitterretry

// This file owns the send queue: callers waiting for their turn to send, at
// a rate the send-rate limiter sets; retries before first attempts, each
// line first come, first served.

import (
	"math"
	"slices"
	"sort"
	"time"
)

// sendQueue hands out turns at rate per second, each to the first place
// waiting: in the retries' line, else in the first attempts'. A retry's
// attempt already waited its turn once; sent behind the first attempts
// that came meanwhile, an operation throttled once waited the queue twice,
// and the throttled operations, a few in a hundred, made the tail of the
// latency (at 256 callers on 500 writes a second, a p99 of some 1.4 s
// against a p50 of 0.5 s; 0.95 s with retries first). A change of rate reaches
// every caller already waiting at once: a cut cannot be followed by sends
// promised at the old rate, nor a rise by new callers sent alongside them.
// A place given back costs no time: the line steps over it.
//
// Its methods are called under the limiter's lock. The zero value is an
// unlimited queue; init makes its wake channels.
type sendQueue struct {
	rate float64 // turns per second; +Inf while unlimited
	// clock counts the turns come due at the rate: turn n (from 0) is due
	// once clock >= n. turns counts those handed to places. While no place
	// waits the clock stays at most at turns: no unused rate is kept, and
	// a caller finding the queue empty is due at once.
	clock    float64
	turns    uint64
	servedAt time.Time
	retries  sendLine
	firsts   sendLine // first attempts
	// near wakes the callers whose turn may come within nearReach or a
	// turn, far the others, who ask again within a window anyway: woken
	// with the rest at every give-back, thousands of waiters queued to
	// run, and held the refusals among them past their deadlines.
	near, far sendWake
	wokenAt   time.Time // when a give-back last woke the near callers (see giveBackWake)
}

// sendWake wakes the callers waiting on it.
type sendWake struct {
	changed chan struct{} // closed, and replaced, to wake them
	watched bool          // changed was handed to a waiting caller
}

// sendLine is one line of places, numbered from 0 in the order taken.
type sendLine struct {
	issued uint64   // places handed out; the next one is number issued
	next   uint64   // the first place not yet due
	holes  []uint64 // places given back, from next to issued, ascending
}

// sendPlace is a caller's place in a queue, valid only with the queue that
// handed it out. A place given back keeps reporting a delay; it is not sent.
type sendPlace struct {
	place   uint64
	retry   bool // in the retries' line
	counted bool // sent at once, counted by the limiter's quiet tally: never in a line
}

func (q *sendQueue) init(rate float64) {
	q.rate = rate
	q.near.changed, q.far.changed = make(chan struct{}), make(chan struct{})
}

func (q *sendQueue) line(p sendPlace) *sendLine {
	if p.retry {
		return &q.retries
	}
	return &q.firsts
}

// advance brings the queue up to now, which never goes back (the limiter
// goes on from where it was after a clock stepped back), and returns how
// many turns came due since the last call (in fractions of one).
func (q *sendQueue) advance(now time.Time) float64 {
	dt := now.Sub(q.servedAt)
	switch {
	case math.IsInf(q.rate, 1):
		// Counted when reserved.
		q.hand(math.Inf(1))
		q.clock, q.servedAt = float64(q.turns), now
		return 0
	case dt <= 0:
		return 0
	}
	q.servedAt = now
	return q.serve(q.rate * dt.Seconds())
}

// serve moves the clock on by up to n turns, hands the turns come due to
// the places waiting, and returns how far the clock moved: no further than
// the last place waiting (the queue ran dry: no unused rate is kept).
func (q *sendQueue) serve(n float64) float64 {
	from := q.clock
	q.clock += n
	q.hand(q.turnsDue())
	if q.retries.waiting() == 0 && q.firsts.waiting() == 0 {
		q.clock = min(q.clock, float64(q.turns))
	}
	return max(q.clock-from, 0)
}

// turnsDue counts the turns due and not yet handed out: those the clock
// reached, or will within a nanosecond. The clock is a sum of fractions,
// and may stop a rounding short of a turn the time it read has reached.
func (q *sendQueue) turnsDue() float64 {
	return math.Floor(q.clock+q.rate/float64(time.Second)) - float64(q.turns) + 1
}

// hand gives up to n turns to the places waiting, the retries first.
func (q *sendQueue) hand(n float64) {
	if !(n >= 1) {
		return
	}
	left := uint64(min(n, float64(q.retries.waiting()+q.firsts.waiting())))
	given := q.retries.serve(min(left, q.retries.waiting()))
	q.turns += given + q.firsts.serve(left-given)
}

// tookTurns records n turns taken without the lock by places due at once
// (see quietTally.takeTurn), the turn after them due at next, and brings
// the queue up to now as those places left it; it returns how far the
// clock moved, as advance does. Nobody waited meanwhile: the clock stands
// as many turns behind its last turn as the time to next holds. Every
// turn was counted, on a reading at or before now (see
// quietTally.takeTurns); the clock never goes back all the same (a clock
// stepped back since, which the limiter's steady time absorbs).
func (q *sendQueue) tookTurns(n uint64, next, now time.Time) float64 {
	q.turns += n
	from := q.clock
	q.clock = max(q.clock, float64(q.turns)-q.rate*max(next.Sub(now), 0).Seconds())
	q.servedAt = now
	return q.clock - from
}

// release makes up to n more of the waiting places due at once, ahead of
// their turn at the rate, which does not change, and returns how many it
// made due; the callers waiting are woken to ask again. It serves a short
// probe above the rate. The queue must be brought up to now first.
func (q *sendQueue) release(n float64) float64 {
	if math.IsInf(q.rate, 1) || !(n > 0) {
		return 0
	}
	if n = q.serve(n); n > 0 {
		q.wake()
	}
	return n
}

// reserve takes the next place in the retries' line or the first
// attempts'; it reports whether the place is due at once because the queue
// is unlimited. (A place that finds a turn free at a rate is counted as the
// clock moves on past it.)
func (q *sendQueue) reserve(retry bool) (sendPlace, bool) {
	p := sendPlace{retry: retry}
	l := q.line(p)
	p.place = l.issued
	l.issued++
	if math.IsInf(q.rate, 1) {
		q.hand(1)
		q.clock = float64(q.turns)
		return p, true
	}
	q.hand(q.turnsDue())
	return p, false
}

// delay returns how long p waits before it is due at the current rate, and
// the channel closed when that may change.
func (q *sendQueue) delay(p sendPlace) (time.Duration, <-chan struct{}) {
	l := q.line(p)
	if l.due(p.place) || math.IsInf(q.rate, 1) {
		return 0, nil
	}
	ahead := l.ahead(p.place)
	if !p.retry {
		ahead += q.retries.waiting()
	}
	// At least a nanosecond: a place is due only once handed its turn.
	wait := max(secondsToDuration((float64(q.turns+ahead)-q.clock)/q.rate), 1)
	w := &q.far
	if wait <= nearReach || wait-nearReach <= secondsToDuration(1/q.rate) {
		// Places given back ahead may make it due before it would ask
		// again (see nearReach).
		w = &q.near
	}
	w.watched = true
	return wait, w.changed
}

// cancel gives p back at time now; its caller does not send. A place
// given back already, and not yet passed by the line, changes nothing. A
// place the queue made due gives its turn to the next place waiting, if
// any: its caller's context ended as its turn came, and kept, the turn was
// lost, the queue sending below its rate once for each such caller
// (helper-164). The first give-back in giveBackWake with callers behind
// wakes those whose turn one place given back may bring before they ask
// again, so that a burst of give-ups wakes them once; a caller whose turn
// the burst brought sooner, or who was handed a turn after that, finds it
// when a give-back giveBackWake after that wakes it, or when it next asks,
// within a window. Each place must be given back at
// most once, and never after it was sent: given back twice once the line
// passed it, a place would give a turn it no longer has. (waitToSend gives
// back only the place it did not send, once.)
func (q *sendQueue) cancel(p sendPlace, now time.Time) {
	l := q.line(p)
	switch {
	case l.due(p.place):
		if !q.waiting() || q.turns == 0 {
			// None to take it: an idle queue keeps no turn (see clock).
			return
		}
		q.turns--
		q.hand(q.turnsDue())
	case !l.giveBack(p.place):
		return
	case p.place+1 == l.issued && !(p.retry && q.firsts.waiting() > 0):
		return // nobody behind
	}
	if q.wokenAt.IsZero() || now.Sub(q.wokenAt) >= giveBackWake {
		q.wokenAt = now
		q.near.wake()
	}
}

// A caller whose turn give-backs brought forward finds it when woken, or
// when it next asks, within a window; found late, it is sent beside the
// callers behind it, who took theirs on time, and a moment's sends exceed
// the rate. So give-backs wake the callers whose turn is within nearReach
// (or a turn past it), at most once in giveBackWake: a stream of them can
// bring a turn two windows away due within the window before its caller
// asks. With one window and one wake a window, 96 of 128 callers leaving
// at every instant bunched sends to 36-39 in 50 ms at 500 a second, where
// the rate allows 26 and callers that do not leave sent 26-27; with these,
// 28-29 (helper-251's stress, three runs each, 2026-12-07). Waking every
// caller, far ones too, every giveBackWake: 28, but a crowd of 5,000 on
// 1000 a second, deadlines of 200-1000 ms, then made 3,375-8,952 of some
// 39,500 refusals late, the worst by 20-50 ms, on 4.9-7.0 s of CPU in 5
// s, against 57-114, the worst by 2-6 ms, on 1.3-1.6 s (seven runs); with
// these, 47-143, the worst by 1.5-14 ms, on 1.5-1.8 s (five runs).
const (
	nearReach    = 2 * sendWindow
	giveBackWake = 10 * time.Millisecond
)

// waiting reports whether places are waiting to come due. (Counting a place
// as waiting until the clock passed it kept an idle limiter from starting
// over for 1/rate after its last place came due: 1000 s at MinRate 0.001,
// helper-110.)
func (q *sendQueue) waiting() bool {
	return q.retries.waiting() > 0 || q.firsts.waiting() > 0
}

// setRate changes the rate, and wakes the waiting callers so they measure
// their delay again.
func (q *sendQueue) setRate(r float64) {
	if r == q.rate {
		return
	}
	q.rate = r
	q.wake()
}

func (q *sendQueue) wake() {
	q.near.wake()
	q.far.wake()
}

func (w *sendWake) wake() {
	if !w.watched {
		return
	}
	close(w.changed)
	w.changed = make(chan struct{})
	w.watched = false
}

func (l *sendLine) due(place uint64) bool { return place < l.next }

// waiting counts the places not yet due and not given back.
func (l *sendLine) waiting() uint64 { return l.issued - l.next - uint64(len(l.holes)) }

// ahead counts the places waiting before place, which is not due.
func (l *sendLine) ahead(place uint64) uint64 {
	return place - l.next - uint64(l.holesBefore(place))
}

// serve makes the first n waiting places due (n at most those waiting),
// stepping over the places given back, and returns n.
func (l *sendLine) serve(n uint64) uint64 {
	next, skipped := l.next+n, 0
	for skipped < len(l.holes) && l.holes[skipped] < next {
		skipped++
		next++
	}
	l.holes, l.next = l.holes[skipped:], next
	return n
}

// giveBack records place as given back, and reports whether it was
// waiting: not due, not given back already, and handed out.
func (l *sendLine) giveBack(place uint64) bool {
	if l.due(place) || place >= l.issued {
		return false
	}
	i := l.holesBefore(place)
	if i < len(l.holes) && l.holes[i] == place {
		return false
	}
	l.holes = slices.Insert(l.holes, i, place)
	return true
}

func (l *sendLine) holesBefore(place uint64) int {
	return sort.Search(len(l.holes), func(i int) bool { return l.holes[i] >= place })
}

// secondsToDuration converts s seconds to a Duration, saturating instead of
// overflowing.
func secondsToDuration(s float64) time.Duration {
	ns := s * float64(time.Second)
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
