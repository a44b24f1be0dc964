package jitterretry

// This file owns the mark a Do loop puts in the context it gives fn, through
// which the Retryer, deciding for the SDK calls inside fn, tells the loop
// what it met there: a throttle, and the failures whose give-up it already
// reported, so that the loop does not report them again.

import (
	"context"
	"sync"
	"sync/atomic"
)

// loopMark is what the retry decisions made under a context that carries it
// (the SDK calls of one Do loop's fn, which get the loop's context, and no
// other operation of the client) tell that loop. A Do loop inside fn carries
// its own mark, which passes what it hears to the outer loop's: the inner
// loop's throttles and give-ups are the outer fn's too.
type loopMark struct {
	throttled atomic.Bool
	outer     *loopMark // the mark of the Do loop whose fn runs this one; nil at the top

	mu sync.Mutex
	// failed is the error of the last attempt that failed inside the
	// current call of fn, as the Retryer's middleware releases it just
	// before asking IsErrorRetryable, which reports a refusal without a
	// context to say whose it is.
	failed error
	// reported is the last give-up reported under fn's context during the
	// current call: a refusal of GetRetryToken, RetryDelay or the send-rate
	// limiter, or that of a Do loop inside fn.
	reported *GiveUpError
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

// watchFailures returns release, noting in m and the marks around it the
// error of an attempt that failed.
func (m *loopMark) watchFailures(release func(error) error) func(error) error {
	return func(err error) error {
		if err != nil {
			for o := m; o != nil; o = o.outer {
				o.mu.Lock()
				o.failed = err
				o.mu.Unlock()
			}
		}
		return release(err)
	}
}

// noteGiveUp records g, reported under the context that carries m, in m and
// the marks around it.
func (m *loopMark) noteGiveUp(g *GiveUpError) {
	for o := m; o != nil; o = o.outer {
		o.mu.Lock()
		o.reported = g
		o.mu.Unlock()
	}
}

// startCall forgets what the previous call of fn left.
func (m *loopMark) startCall() {
	m.mu.Lock()
	m.failed, m.reported = nil, nil
	m.mu.Unlock()
}

// reportedAlready reports whether fn's error err is a give-up reported
// during the current call of fn: one reported under fn's context (err holds
// it, or, for a Do inside fn that returns fn's own error, is that error),
// or the failure of an attempt in err's chain that refused says the
// middleware's IsErrorRetryable refused, and so reported.
func (m *loopMark) reportedAlready(err error, refused func(error) bool) bool {
	m.mu.Lock()
	failed, reported := m.failed, m.reported
	m.mu.Unlock()
	switch {
	case reported != nil && (chainHolds(err, reported) || reported.notRetried && chainHolds(err, reported.Err)):
		return true
	case failed != nil && chainHolds(err, failed):
		return refused(failed)
	}
	return false
}
