package delayers

import "time"

// Sequence yields the delays of one retry loop, one per call to Next. For
// decorrelated jitter it keeps the loop's real previous delay, as the blog's
// formula does for one client; for the other strategies it counts attempts.
//
// A Sequence is for one loop and is not safe for concurrent use; create one
// per loop with a delayer's NewSequence. The zero value is the Sequence of
// NewFull() with no options. A nil *Sequence has nowhere to count: each
// Next answers as a fresh zero Sequence's first does, Attempt is 0 and Reset
// does nothing, where a method would otherwise panic.
// Sequences of one delayer share its settings and Source but nothing else,
// so many loops may run concurrently, each with its own Sequence.
type Sequence struct {
	settings *settings
	stepper  stepper
	attempt  int
	prev     time.Duration
	prevBase time.Duration
}

func newSequence(s *settings, st stepper) *Sequence {
	return &Sequence{settings: s, stepper: st}
}

// Next returns the delay before the next retry, after a failure with err (nil
// is not a throttle), within [0, Cap()]. The k-th call since the Sequence was
// made or Reset counts as failed attempt k: the windowed strategies return
// what BackoffDelay(k, err) would, and decorrelated jitter returns
// min(Cap(), uniform[base, 3*prev)), prev being its previous result, or base
// on the first call. When the error switches between throttle and
// non-throttle, and the two bases differ, decorrelated jitter restarts its
// chain from the new base. It draws one value from the Source per call.
func (q *Sequence) Next(err error) time.Duration {
	if q == nil {
		q = new(Sequence)
	}
	q.init()
	return q.NextFor(q.settings.isThrottle(err))
}

// NextFor is Next for a failure its caller already classified: throttle
// picks ThrottleBase over Base, as Delayer.Delay's throttle does, whatever
// Options.Throttle would say of the error.
func (q *Sequence) NextFor(throttle bool) time.Duration {
	if q == nil {
		q = new(Sequence)
	}
	q.init()
	base := q.settings.baseOf(throttle)
	if base != q.prevBase {
		q.prev, q.prevBase = base, base
	}
	if q.attempt < maxAttempt {
		q.attempt++
	}
	q.prev = q.stepper.step(q.settings, base, q.attempt, q.prev, q.settings.source.Uint64())
	return q.prev
}

// init makes the zero Sequence NewFull()'s.
func (q *Sequence) init() {
	if q.settings == nil {
		q.settings, q.stepper = use[Full](nil), windowStepper(fullJitter)
	}
}

// Attempt returns how many delays Next has returned since the Sequence was
// made or last Reset: 0 before the first Next, saturating at math.MaxInt.
func (q *Sequence) Attempt() int {
	if q == nil {
		return 0
	}
	return q.attempt
}

// Reset starts the sequence over, as after a success: Attempt returns 0, the
// next delay is a first retry's again, and decorrelated jitter's prev
// returns to base.
func (q *Sequence) Reset() {
	if q != nil {
		q.attempt, q.prev, q.prevBase = 0, 0, 0
	}
}

const maxAttempt = int(^uint(0) >> 1)
