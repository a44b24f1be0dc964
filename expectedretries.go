package jitterretry

// This file owns the retries a send-rate limiter expects: how a retry's
// attempt is told from a first attempt, so that it waits in the retries'
// line (see sendQueue), and which failed attempt it follows, so that its
// refusal in the queue keeps that attempt's error.

import "time"

const (
	// expectedGrace is how long after its backoff a retry is still
	// expected: the SDK's middleware asks for the attempt as it wakes, a
	// Do loop's fn after its own work first.
	expectedGrace = time.Second
	// maxExpected bounds the operations a limiter expects a retry of at
	// once; the retries of others wait in the first attempts' line.
	maxExpected = 256
	// sweepEvery spaces the sweeps for lapsed entries of a full set: each
	// reads every entry under the limiter's lock (4 us at 256, against
	// 81 ns for an entry with room: helper-157).
	sweepEvery = sendWindow
)

// expectedRetries are the operations whose retry, which RetryDelay
// scheduled, is due to ask for its turn, by the Done channel of their
// context. The SDK hands GetAttemptToken a new context for every attempt,
// with the attempt's number where only its own package can read it; each
// is made from the operation's context, and shares its Done channel. A
// context without one (context.Background) is not told apart: its retries
// wait in the first attempts' line. Operations that share a context share
// their entry: a retry's turn in the retries' line may go to another's
// attempt, whose retry, if any, then waits with the first attempts. (A Do
// loop's retry is told by the loop's mark instead: see
// loopMark.retryNext.)
//
// Its methods are called under the limiter's lock. The zero value is
// empty.
type expectedRetries struct {
	ops     map[<-chan struct{}]expectedRetry
	sweptAt time.Time // the last sweep of a full set for lapsed entries
}

type expectedRetry struct {
	count int       // retries expected
	until time.Time // when the last of them stops being expected
	// after is what the one retry expected follows (see claim), whose
	// backoff ends expectedGrace before until; the zero value once a
	// second retry of the same Done channel is expected.
	after failedAttempt
}

// failedAttempt is the attempt a retry follows: its error and its 1-based
// number, as RetryDelay got them. The zero value is none known.
type failedAttempt struct {
	err    error
	number int
}

// expect records, at now, a retry of the operation of done, which asks for
// its turn by until (less expectedGrace), after the failed attempt after.
func (e *expectedRetries) expect(done <-chan struct{}, now, until time.Time, after failedAttempt) {
	if done == nil {
		return
	}
	if e.ops == nil {
		e.ops = make(map[<-chan struct{}]expectedRetry)
	}
	x, ok := e.ops[done]
	if !ok && len(e.ops) >= maxExpected {
		if now.Sub(e.sweptAt) < sweepEvery {
			return
		}
		e.sweptAt = now
		e.forgetLapsed(now)
		if len(e.ops) >= maxExpected {
			return
		}
	}
	if x.count++; x.count == 1 {
		x.after = after
	} else {
		x.after = failedAttempt{} // whose is whose is not known
	}
	if until = until.Add(expectedGrace); until.After(x.until) {
		x.until = until
	}
	e.ops[done] = x
}

// claim reports whether an attempt of the operation of done, asking at
// now, is an expected retry, which it then no longer is, and the failed
// attempt it follows, when that is known: one retry of done was expected,
// and its backoff has ended. Operations may share a context, and its Done
// channel (an errgroup's): another's first attempt, asking during the
// backoff, takes the retry's place in the line, but not its cause, which
// would have named a failure that operation never had.
func (e *expectedRetries) claim(done <-chan struct{}, now time.Time) (bool, failedAttempt) {
	if done == nil || len(e.ops) == 0 {
		return false, failedAttempt{}
	}
	x, ok := e.ops[done]
	if !ok {
		return false, failedAttempt{}
	}
	after := x.after
	if now.Before(x.until.Add(-expectedGrace)) {
		after = failedAttempt{} // the one retry expected is still in its backoff
	}
	if x.count--; x.count == 0 || now.After(x.until) {
		delete(e.ops, done)
	} else {
		e.ops[done] = x
	}
	if now.After(x.until) {
		return false, failedAttempt{}
	}
	return true, after
}

func (e *expectedRetries) forgetLapsed(now time.Time) {
	for done, x := range e.ops {
		if now.After(x.until) {
			delete(e.ops, done)
		}
	}
}
