package jitterretry

// This file owns the retries a send-rate limiter expects: how a retry's
// attempt is told from a first attempt, so that it waits in the retries'
// line (see sendQueue), and which failed attempt it follows, so that its
// refusal in the queue keeps that attempt's error.

import (
	"slices"
	"sort"
	"time"
)

const (
	// expectedGrace is how long after its backoff a retry is still
	// expected: the SDK's middleware asks for the attempt as it wakes, a
	// Do loop's fn after its own work first.
	expectedGrace = time.Second
	// maxExpected bounds the retries a limiter expects at once; the
	// others wait in the first attempts' line.
	maxExpected = 256
	// sweepEvery spaces the sweeps for lapsed entries of a full set: each
	// reads every entry under the limiter's lock (4 us at 256, against
	// 81 ns for an entry with room: helper-157).
	sweepEvery = sendWindow
)

// expectedRetries are the retries RetryDelay scheduled, by the Done channel
// of their operation's context (nil for one without, as
// context.Background), each with the time its backoff ends. The SDK hands
// GetAttemptToken a new context for every attempt, with the attempt's
// number where only its own package can read it; each is made from the
// operation's context, and shares its Done channel. Operations may share
// that channel too (a server's root context, context.Background, an
// errgroup's), and their first attempts ask with it while a retry of one
// of them backs off. The SDK's middleware sleeps the whole backoff before
// it asks for the retry's attempt, so an attempt asking before the
// earliest backoff of its channel has ended is another operation's first
// attempt, and waits with the first attempts. Taken by the first attempt
// to ask, the retry's place in the line went to another operation on a
// shared context, and the retry waited the queue twice: at 64 callers on
// one cancellable context, a p99 of 250 to 280 ms where the median wait
// was 126 ms. Only a first attempt asking between the end of the backoff
// and the retry's own attempt, a timer's lateness, still takes its place.
// (A Do loop's retry is told by the loop's mark instead: see
// loopMark.retryNext.)
//
// Its methods are called under the limiter's lock. The zero value is
// empty.
type expectedRetries struct {
	ops     map[<-chan struct{}][]expectedRetry // by due, ascending
	count   int                                 // entries in ops, at most maxExpected
	latest  time.Time                           // the latest due in ops, or later: reset only once ops is empty
	sweptAt time.Time                           // the last sweep of a full set for lapsed entries
}

// expectedRetry is one retry expected: its backoff ends at due, and it is
// no longer expected expectedGrace after.
type expectedRetry struct {
	due   time.Time
	after failedAttempt // the attempt it follows
}

// failedAttempt is the attempt a retry follows: its error and its 1-based
// number, as RetryDelay got them. The zero value is none known.
type failedAttempt struct {
	err    error
	number int
}

// expect records, at now, a retry of an operation of done, which asks for
// its turn once its backoff ends at due, after the failed attempt after.
func (e *expectedRetries) expect(done <-chan struct{}, now, due time.Time, after failedAttempt) {
	if e.count >= maxExpected {
		if now.Sub(e.sweptAt) < sweepEvery {
			return
		}
		e.sweptAt = now
		e.forgetLapsed(now)
		if e.count >= maxExpected {
			return
		}
	}
	if e.ops == nil {
		e.ops = make(map[<-chan struct{}][]expectedRetry)
	}
	xs := e.ops[done]
	i := sort.Search(len(xs), func(i int) bool { return xs[i].due.After(due) })
	e.ops[done] = slices.Insert(xs, i, expectedRetry{due: due, after: after})
	e.count++
	if due.After(e.latest) {
		e.latest = due
	}
}

// pending reports whether a retry is expected at now, and forgets them all
// once every one has lapsed: the retry of an operation that ended during
// its backoff never comes to claim its entry, and kept the limiter from
// counting its sends without its lock (see sendRate.openQuietLocked).
func (e *expectedRetries) pending(now time.Time) bool {
	if e.count == 0 {
		return false
	}
	if now.After(e.latest.Add(expectedGrace)) {
		clear(e.ops)
		e.count, e.latest = 0, time.Time{}
		return false
	}
	return true
}

// claim reports whether an attempt of an operation of done, asking at now,
// is an expected retry, which it then no longer is, and the failed attempt
// it follows, when that is known: the earliest retry of done whose backoff
// has ended, when it is the only one whose has. (Two retries due at once
// ask in either order: whose cause is whose is not known.)
func (e *expectedRetries) claim(done <-chan struct{}, now time.Time) (bool, failedAttempt) {
	if e.count == 0 {
		return false, failedAttempt{}
	}
	xs, ok := e.ops[done]
	if !ok {
		return false, failedAttempt{}
	}
	xs = e.drop(done, xs, lapsed(xs, now))
	if len(xs) == 0 || now.Before(xs[0].due) {
		return false, failedAttempt{}
	}
	if len(xs) > 1 && !now.Before(xs[1].due) {
		// Two retries are due: whose attempt asks first is not known,
		// for this claim or the next.
		for i := 0; i < len(xs) && !now.Before(xs[i].due); i++ {
			xs[i].after = failedAttempt{}
		}
	}
	after := xs[0].after
	e.drop(done, xs, 1)
	return true, after
}

// drop removes the first n of done's retries, xs, and returns the rest.
func (e *expectedRetries) drop(done <-chan struct{}, xs []expectedRetry, n int) []expectedRetry {
	if n == 0 {
		return xs
	}
	if e.count -= n; e.count == 0 {
		e.latest = time.Time{}
	}
	if n == len(xs) {
		delete(e.ops, done)
		return nil
	}
	// Off the front, without moving the rest (a shared context's retries
	// are many, most of them due later), nor keeping the errors dropped.
	clear(xs[:n])
	xs = xs[n:]
	e.ops[done] = xs
	return xs
}

// forgetLapsed forgets, in a full set, the retries no longer expected at
// now, and those of operations whose context ended: their retries never
// come, and 256 of them, cancelled during backoffs of seconds (an
// errgroup's context), kept every retry from being expected until they
// lapsed (helper-235). A context's end is seen only here, where the set
// is full, and not by each claim: a channel's receive costs, and a set
// with room loses nothing by such entries.
func (e *expectedRetries) forgetLapsed(now time.Time) {
	for done, xs := range e.ops {
		n := lapsed(xs, now)
		if closed(done) {
			n = len(xs)
		}
		e.drop(done, xs, n)
	}
}

// closed reports whether done is closed; nil, the channel of a context
// that never ends, never is.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// lapsed counts the retries of xs, by due, no longer expected at now.
func lapsed(xs []expectedRetry, now time.Time) int {
	n := 0
	for n < len(xs) && now.After(xs[n].due.Add(expectedGrace)) {
		n++
	}
	return n
}
