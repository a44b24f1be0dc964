package jitterretry

// This file owns the send queue: callers waiting for their turn to send,
// first come, first served, at a rate the send-rate limiter sets.

import (
	"math"
	"slices"
	"sort"
	"time"
)

// sendQueue paces places at rate per second. A place is due once the places
// ahead of it have been sent at the current rate, so a change of rate
// reaches every caller already waiting at once: a cut cannot be followed by
// sends promised at the old rate, nor a rise by new callers sent alongside
// them. A place given back costs no time: the queue steps over it.
//
// Its methods are called under the limiter's lock. The zero value is an
// unlimited queue; init makes its wake channel.
type sendQueue struct {
	rate     float64 // places per second; +Inf while unlimited
	issued   uint64  // places handed out; the next one is number issued
	served   float64 // places due by servedAt: place n is due once served >= n
	servedAt time.Time
	holes    []uint64      // places given back, after served and before issued, ascending
	changed  chan struct{} // closed, and replaced, to wake the waiting callers
	watched  bool          // changed was handed to a waiting caller
	wokenAt  time.Time     // when a give-back last woke the waiting callers
}

// sendPlace is a caller's place in a queue, valid only with the queue that
// handed it out. A place given back keeps reporting a delay; it is not sent.
type sendPlace struct{ place uint64 }

func (q *sendQueue) init(rate float64) {
	q.rate, q.changed = rate, make(chan struct{})
}

// advance brings the queue up to now, which never goes back (the limiter
// goes on from where it was after a clock stepped back), and returns how
// many places came due since the last call.
func (q *sendQueue) advance(now time.Time) float64 {
	dt := now.Sub(q.servedAt)
	switch {
	case math.IsInf(q.rate, 1):
		// Counted when reserved.
		q.served, q.holes, q.servedAt = float64(q.issued), nil, now
		return 0
	case dt <= 0:
		return 0
	}
	q.servedAt = now
	return q.serve(q.rate * dt.Seconds())
}

// serve makes up to n more places due, stepping over the places given back
// and going no further than the last place issued (the queue ran dry: no
// unused rate is kept), and returns how many it made due.
func (q *sendQueue) serve(n float64) float64 {
	target := q.served + n
	skipped := 0
	for skipped < len(q.holes) && float64(q.holes[skipped]) <= target {
		skipped++
		target++
	}
	q.holes = q.holes[skipped:]
	if limit := float64(q.issued); target > limit {
		n -= target - limit
		target = limit
	}
	q.served = target
	return max(n, 0)
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

// reserve takes the next place; it reports whether the place is due at once
// because the queue is unlimited.
func (q *sendQueue) reserve() (sendPlace, bool) {
	p := sendPlace{place: q.issued}
	q.issued++
	if math.IsInf(q.rate, 1) {
		q.served = float64(q.issued)
		return p, true
	}
	return p, false
}

// delay returns how long p waits before it is due at the current rate, and
// the channel closed when that may change.
func (q *sendQueue) delay(p sendPlace) (time.Duration, <-chan struct{}) {
	ahead := float64(p.place) - q.served
	if ahead <= 0 || math.IsInf(q.rate, 1) {
		return 0, q.changed
	}
	ahead -= float64(q.holesBefore(p.place))
	q.watched = true
	return secondsToDuration(ahead / q.rate), q.changed
}

// cancel gives p back at time now. A place already due, or given back
// already, changes nothing. The first give-back in a window wakes the
// callers behind it, so that a burst of give-ups wakes them once.
func (q *sendQueue) cancel(p sendPlace, now time.Time) {
	if float64(p.place) <= q.served || p.place >= q.issued {
		return
	}
	i := q.holesBefore(p.place)
	if i < len(q.holes) && q.holes[i] == p.place {
		return
	}
	q.holes = slices.Insert(q.holes, i, p.place)
	if p.place+1 < q.issued && (q.wokenAt.IsZero() || now.Sub(q.wokenAt) >= sendWindow) {
		q.wokenAt = now
		q.wake()
	}
}

// waiting reports whether places are waiting to come due: those after
// served (place n is due once served >= n) and before issued, less the
// ones given back. Counting place served+1 as waiting until served
// reached issued kept an idle limiter from starting over for 1/rate after
// its last place came due: 1000 s at MinRate 0.001 (helper-110).
func (q *sendQueue) waiting() bool {
	return float64(q.issued)-1-float64(len(q.holes)) > math.Floor(q.served)
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

func (q *sendQueue) holesBefore(place uint64) int {
	return sort.Search(len(q.holes), func(i int) bool { return q.holes[i] >= place })
}

func (q *sendQueue) wake() {
	if !q.watched {
		return
	}
	close(q.changed)
	q.changed = make(chan struct{})
	q.watched = false
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
