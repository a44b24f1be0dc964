package jitterretry

// This file owns what the retryer tells the caller as it decides: the
// RetryEvent passed to Options.OnRetry and the *GiveUpError passed to
// Options.OnGiveUp.

import (
	"context"
	"sync/atomic"
	"time"
)

// RetryEvent describes a retry about to be made.
type RetryEvent struct {
	// Attempt is the 1-based number of the attempt that failed.
	Attempt int
	// Delay is the backoff before the next attempt, after the service's
	// x-amz-retry-after hint: what the SDK's middleware (or Do) sleeps.
	Delay time.Duration
	// Class is the failed attempt's error class.
	Class ErrorClass
	// Partition is the partition key of the retry token bucket; "" when not
	// partitioned, and when the retryer cannot tell whose retry it is (see
	// Unchecked: an error value another operation was retrying at the same
	// instant).
	Partition string
	// Err is the failed attempt's error.
	Err error
	// Unchecked reports that the deadline check could not be made for this
	// retry under the SDK's middleware: the SDK gives GetRetryToken the
	// context and RetryDelay the attempt number, and the retryer pairs the
	// two calls by their error value, which another operation was retrying
	// at the same instant (a shared sentinel error, say), or whose hand-off
	// another error evicted from the retryer's fixed table of 256 slots
	// before RetryDelay came, or the table's sweep dropped, RetryDelay
	// coming two seconds or more after GetRetryToken (a goroutine
	// descheduled that long). The retry then goes ahead as retry.Standard's
	// would. Do never leaves a check unmade.
	Unchecked bool
}

// hooks calls the caller's hooks, and records the same events as metrics.
type hooks struct {
	onRetry  func(RetryEvent)
	onGiveUp func(*GiveUpError)
	meter    *meter // nil without a MeterProvider
	// loops counts the Do loops running, so that a decision looks for a
	// loop's mark in its context (a walk of the context's values), and
	// logs its refusals, only while there may be one.
	loops atomic.Int64
	// refusals is IsErrorRetryable's, for the Do loops (see refusalLog).
	refusals refusalLog
}

// reportsGiveUps reports whether something listens to give-ups.
func (h *hooks) reportsGiveUps() bool { return h.onGiveUp != nil || h.meter != nil }

// loopToTell returns the mark of this Retryer's Do loop whose fn made the
// call ctx is of, when something listens to give-ups that loop would
// otherwise report again; nil otherwise.
func (h *hooks) loopToTell(ctx context.Context) *loopMark {
	if ctx == nil || h.loops.Load() == 0 || !h.reportsGiveUps() {
		return nil
	}
	return loopMarkOf(ctx).ownedBy(h)
}

// refuse reports IsErrorRetryable's refusal of err, g, which has no
// context, and logs err for the Do loop that may be around the call.
func (h *hooks) refuse(err error, g *GiveUpError) {
	if h.loops.Load() > 0 {
		h.refusals.add(err, &h.loops)
	}
	h.giveUp(nil, g)
}

// retry reports a retry that costs cost tokens of lane l (nil when
// unknown). ctx is the operation's context, or nil where the retryer has
// none (RetryDelay without a hand-off).
func (h *hooks) retry(ctx context.Context, e RetryEvent, cost uint, l *lane, skipCounted bool) {
	if h.onRetry != nil {
		h.onRetry(e)
	}
	if h.meter != nil {
		h.meter.retry(ctx, e, skipCounted)
	}
	if span, ok := recordingSpan(ctx); ok {
		var left uint
		known := false
		if l != nil {
			left, known = l.tokens()
		}
		traceRetry(span, e, cost, left, known)
	}
}

// giveUp reports e and returns it, so that callers can write
// return nil, r.hooks.giveUp(&GiveUpError{...}).
func (h *hooks) giveUp(ctx context.Context, e *GiveUpError) *GiveUpError {
	if m := h.loopToTell(ctx); m != nil {
		m.noteGiveUp(e) // so that the Do loop around does not report it again
	}
	if h.onGiveUp != nil {
		h.onGiveUp(e)
	}
	if h.meter != nil {
		h.meter.giveUp(ctx, e)
	}
	if span, ok := recordingSpan(ctx); ok {
		traceGiveUp(span, e)
	}
	return e
}
