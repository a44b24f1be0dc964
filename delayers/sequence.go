package delayers

import "time"

// Sequence yields the delays of one retry loop, one per call to Next. For
// decorrelated jitter it keeps the loop's real previous delay, as the blog's
// formula does for one client; for the other strategies it counts attempts.
//
// A Sequence is for one loop and is not safe for concurrent use; create one
// per loop with a delayer's NewSequence.
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
// is not a throttle). When the error switches between throttle and
// non-throttle, decorrelated jitter restarts its chain from the new base.
func (q *Sequence) Next(err error) time.Duration {
	base := q.settings.baseFor(err)
	if base != q.prevBase {
		q.prev, q.prevBase = base, base
	}
	if q.attempt < maxAttempt {
		q.attempt++
	}
	q.prev = q.stepper.step(q.settings, base, q.attempt, q.prev, q.settings.source.Uint64())
	return q.prev
}

// Attempt returns how many delays Next has returned since the last Reset.
func (q *Sequence) Attempt() int { return q.attempt }

// Reset starts the sequence over, as after a success.
func (q *Sequence) Reset() { q.attempt, q.prev, q.prevBase = 0, 0, 0 }

const maxAttempt = int(^uint(0) >> 1)
