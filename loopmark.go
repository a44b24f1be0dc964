package jitterretry

// This file owns the mark a Do loop puts in the context it gives fn, through
// which the Retryer, deciding for the SDK calls inside fn, tells the loop
// what it met there: a throttle, and the give-ups it already reported, so
// that the loop does not report them again.

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
)

// markMemory is how many failed attempts, and how many give-ups, one call of
// fn remembers (the latest), and how many refusals the refusal log keeps:
// enough for the SDK calls one fn makes, in a row or at once. Beyond it a
// give-up may be reported twice.
const markMemory = 16

// loopMark is what the retry decisions made under a context that carries it
// (the SDK calls of one Do loop's fn, which get the loop's context, and no
// other operation of the client) tell that loop. A Do loop inside fn carries
// its own mark, which passes what it hears to the outer loop's: the inner
// loop's throttles and give-ups are the outer fn's too.
type loopMark struct {
	// owner is the hooks of the Retryer whose loop this is: only that
	// Retryer's give-ups are the loop's to leave unreported. (Throttles
	// are the table's, whichever Retryer met them.)
	owner     *hooks
	throttled atomic.Bool
	outer     *loopMark // the mark of the Do loop whose fn runs this one; nil at the top

	mu sync.Mutex
	// failed holds the errors of the latest attempts that failed inside
	// the current call of fn, as the owner's middleware released them,
	// right before asking IsErrorRetryable, which reports a refusal with
	// no context to say whose it is (see refusalLog).
	failed recentErrors
	// reported holds the latest give-ups the owner reported under fn's
	// context during the current call: refusals of GetRetryToken,
	// RetryDelay or the send-rate limiter, those of a Do loop inside fn.
	reported  [markMemory]*GiveUpError
	nReported int
}

type loopMarkKey struct{}

// withLoopMark returns ctx carrying m, under the mark ctx carries, if any.
func withLoopMark(ctx context.Context, m *loopMark) context.Context {
	m.outer = loopMarkOf(ctx)
	return context.WithValue(ctx, loopMarkKey{}, m)
}

// loopMarkOf returns the mark ctx carries, or nil.
func loopMarkOf(ctx context.Context) *loopMark {
	m, _ := ctx.Value(loopMarkKey{}).(*loopMark)
	return m
}

// markThrottle sets the throttle mark ctx carries, if any.
func markThrottle(ctx context.Context) {
	if m := loopMarkOf(ctx); m != nil {
		m.noteThrottle()
	}
}

// noteThrottle sets the throttle mark, and those of the loops around its
// own.
func (m *loopMark) noteThrottle() {
	for ; m != nil; m = m.outer {
		m.throttled.Store(true)
	}
}

// takeThrottle reports whether a throttle was noted since the last take,
// and clears the mark.
func (m *loopMark) takeThrottle() bool { return m.throttled.Swap(false) }

// ownedBy returns m, or the nearest mark around it, of owner's loops; nil
// if none.
func (m *loopMark) ownedBy(owner *hooks) *loopMark {
	for ; m != nil && m.owner != owner; m = m.outer {
	}
	return m
}

// each calls fn on m and on the marks around it of the same owner.
func (m *loopMark) each(fn func(*loopMark)) {
	for o := m; o != nil; o = o.outer {
		if o.owner == m.owner {
			o.mu.Lock()
			fn(o)
			o.mu.Unlock()
		}
	}
}

// watchFailures returns release, noting in m and the marks of its owner
// around it the error of an attempt that failed.
func (m *loopMark) watchFailures(release func(error) error) func(error) error {
	return func(err error) error {
		if err != nil {
			e := m.owner.refusals.stamp(err)
			m.each(func(o *loopMark) { o.failed.add(e) })
		}
		return release(err)
	}
}

// noteGiveUp records g, reported under the context that carries m, in m and
// the marks of its owner around it.
func (m *loopMark) noteGiveUp(g *GiveUpError) {
	m.each(func(o *loopMark) {
		o.reported[o.nReported%markMemory] = g
		o.nReported++
	})
}

// passOn tells the loops of m's owner around m's that g, which m's loop
// found reported already and did not report, was: they will not either.
func (m *loopMark) passOn(g *GiveUpError) {
	if o := m.outer.ownedBy(m.owner); o != nil {
		o.noteGiveUp(g)
	}
}

// startCall forgets what the previous call of fn left.
func (m *loopMark) startCall() {
	m.mu.Lock()
	m.failed, m.reported, m.nReported = recentErrors{}, [markMemory]*GiveUpError{}, 0
	m.mu.Unlock()
}

// reportedAlready reports whether fn's error err is a give-up the owner
// reported during the current call of fn: one reported under fn's context
// (err holds it, or, for a Do inside fn that returns fn's own error, is
// that error), or a refusal of IsErrorRetryable of an attempt that failed
// inside fn (see refusalLog.claim).
func (m *loopMark) reportedAlready(err error) bool {
	m.mu.Lock()
	failed, reported := m.failed, m.reported
	m.mu.Unlock()
	for _, g := range reported {
		if g != nil && (chainHolds(err, g) || g.notRetried && chainHolds(err, g.Err)) {
			return true
		}
	}
	return m.owner.refusals.claim(err, failed.list())
}

// stampedError is an error and when, in the order of a Retryer's refusal
// log, it was seen.
type stampedError struct {
	err error
	seq uint64
}

// recentErrors holds the latest markMemory errors added.
type recentErrors struct {
	errs [markMemory]stampedError
	n    int
}

func (r *recentErrors) add(e stampedError) {
	r.errs[r.n%markMemory] = e
	r.n++
}

// list returns the errors held, in no order.
func (r *recentErrors) list() []stampedError {
	return r.errs[:min(r.n, markMemory)]
}

// refusalLog holds the latest errors IsErrorRetryable reported refusing
// while a Do loop ran, so that the loop can tell, among the attempts that
// failed inside its fn, those the middleware refused (and so reported) from
// those a wrapper of the Retryer answered for it (retry.AddWithErrorCodes)
// or the SDK rewrapped (a clock skew): the class of the error does not say.
// Its order stamps those refusals and the failures the loops note, so that
// a refusal counts only for a failure released before it.
type refusalLog struct {
	seq     atomic.Uint64
	mu      sync.Mutex
	refused recentErrors
}

// stamp returns err stamped with the next place in the log's order.
func (l *refusalLog) stamp(err error) stampedError {
	return stampedError{err: err, seq: l.seq.Add(1)}
}

func (l *refusalLog) add(err error) {
	e := l.stamp(err)
	l.mu.Lock()
	l.refused.add(e)
	l.mu.Unlock()
}

// claim reports whether err holds a refusal of the log, not claimed yet,
// that was made after one of failed was released and is, or holds, that
// failure; and claims it, so that it excuses one loop's report only. Errors
// are matched by identity (see chainHolds): an error that is a shared
// pointer (a package-level sentinel), refused in another operation while a
// wrapper answered for this one, can still be taken for this one's.
func (l *refusalLog) claim(err error, failed []stampedError) bool {
	if len(failed) == 0 {
		return false
	}
	l.mu.Lock()
	refused := l.refused
	l.mu.Unlock()
	for _, q := range refused.list() {
		if q.err == nil || !chainHolds(err, q.err) {
			continue
		}
		for _, f := range failed {
			if q.seq > f.seq && chainHolds(q.err, f.err) && l.take(q) {
				return true
			}
		}
	}
	return false
}

// take removes q from the log, and reports whether it was still there.
func (l *refusalLog) take(q stampedError) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.refused.list() {
		if e.seq == q.seq && e.err != nil {
			l.refused.errs[i].err = nil
			return true
		}
	}
	return false
}

// chainHolds reports whether target itself is err or in err's chain (see
// inChain), by identity: only a pointer is found. Two values can be equal
// without being the same error (a value refused in one operation, and an
// equal one another returns), and comparing some panics (a struct holding a
// slice-based error).
func chainHolds(err, target error) bool {
	if target == nil || reflect.ValueOf(target).Kind() != reflect.Pointer {
		return false
	}
	return inChain(err, func(e error) bool { return e == target })
}
