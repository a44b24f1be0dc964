package jitterretry

// This file owns an attempt's wait for its turn in the send-rate limiter.

import (
	"context"
	"time"
)

// waitToSend queues for a place in lane l's send queue (in the retries'
// line for a retry's attempt: one the limiter expects of ctx's operation,
// or the first of a Do loop's retry) and waits until it is due, asking
// again at least once a window and whenever the limiter wakes it (a cut, a
// rise; the first place given back in a window, when that one place may
// make it due before it would ask again). When the wait
// would end, with the attempt's time (see sendMargin), past ctx's deadline
// (unless deadline give-ups are off), it holds the place as a refusal
// holds its caller (see refusalHold: until the deadline less that time and
// refusalReserve, or for at least half the time left), and then, if the
// place is still not due, gives it back and fails; a place that comes due
// during the hold is sent while the attempt's time still fits before the
// deadline, and otherwise given back, its caller held on and refused (see
// lateTurn). It fails too when ctx ends first. A retry's refusal keeps
// the failed attempt's error and number when the limiter knows them (see
// expectedRetries.claim), as RetryDelay's refusals do.
func (r *Retryer) waitToSend(ctx context.Context, l *lane) error {
	if !l.queued.Load() {
		l.queued.Store(true)
	}
	loopRetry := r.hooks.loops.Load() > 0 && markSend(ctx, &r.hooks)
	done := ctx.Done()
	if closed(done) {
		// A context that ended as its caller asked takes no place: one
		// due at once would be spent on an attempt that fails at once,
		// and a due place given back to an idle queue is not kept for
		// the next caller (helper-251). The SDK's middleware checks the
		// context just before; a cancel in between meets this. A retry's
		// refusal still keeps its failed attempt (helper-254).
		var after failedAttempt
		if !loopRetry {
			after = l.sender.claimExpected(done)
		}
		return r.hooks.giveUp(ctx, canceledGiveUp(after.number, l.key, after.err, ctx.Err(), false))
	}
	place, wait, changed, after := l.sender.reserve(done, loopRetry)
	// settled: the place was taken for sending or given back; until then
	// an error, or a panic of a hook or of Options.Clock, gives it back,
	// once (helper-251: set before a hook ran, a turn was lost; after a
	// give-back's clock reading, given back twice).
	settled := false
	defer func() {
		if !settled {
			l.sender.cancel(place)
		}
	}()
	waited := time.Duration(0)
	var since time.Time // when the wait began
	var naps napper
	defer naps.stop()
	var refuseAt time.Time // when a turn found too late is refused (see holding)
	holding := false       // a turn was found too late: refuseAt is set
	// ended records the wait of a caller that waited: sent ("queued"), or
	// given up during it (the reason), so that the waits of an overloaded
	// queue, whose callers give up, are not missing from the histogram.
	ended := func(reason string) {
		if waited > 0 && r.hooks.meter != nil {
			r.hooks.meter.sendWait(ctx, l.key, waited, reason)
		}
	}
	for {
		if wait <= 0 && holding {
			if refusal := r.lateTurn(ctx, l, place, refuseAt, &waited, after, &settled); refusal != nil {
				ended(refusal.Reason.String())
				return r.hooks.giveUp(ctx, refusal)
			}
		}
		if wait <= 0 {
			ended("queued")
			if waited > 0 {
				markQueued(ctx, &r.hooks, since, since.Add(waited)) // for the Do loop whose fn made this call, if any
			}
			settled = true
			return nil
		}
		// Read after the limiter's own reading, which wait counts from,
		// so that the deadline check errs on the early side.
		now := r.now()
		if waited == 0 {
			since = now
		}
		nap, held := min(wait, sendWindow), false
		deadline, hasDeadline := r.deadline(ctx)
		var margin time.Duration
		if hasDeadline {
			margin = r.sendMargin(ctx, l)
			if remaining := deadline.Sub(now); exceeds(wait, margin, remaining) {
				// The turn would come too late. The caller is held, its
				// place kept (the queue may speed up, places ahead be
				// given back), as long as a refusal holds its caller
				// (see refusalHold), and only then refused, as an empty
				// budget's caller is: refused at once, callers in closed
				// loops sent again at once, and a client whose callers'
				// deadlines were shorter than the queue's wait spun on
				// refusals (an outside evaluation: 256 goroutines on 500/s
				// with deadlines of 200-500 ms got 4-19% of the capacity).
				// The hold's end is fixed when the turn is first found too
				// late: its floor is a share of the time left then.
				if !holding {
					refuseAt, holding = now.Add(refusalHold(margin, remaining)), true
				}
				left := refuseAt.Sub(now)
				if left <= 0 {
					ended(GiveUpDeadline.String())
					return r.hooks.giveUp(ctx, after.deadlineGiveUp(l.key, wait, margin, remaining, waited))
				}
				nap, held = min(nap, left), true
			}
		}
		err := naps.sleep(ctx, nap, changed)
		waited += r.now().Sub(now)
		if err == nil {
			// Due, a caller woken late, on a busy machine, may find its
			// context ended: sent, the attempt would fail at once, on a
			// turn another caller could have used (helper-164: 40 and 81
			// of 5,000 waiters). Its place gives the turn on (see
			// sendQueue.cancel).
			next, nextChanged := l.sender.delay(place)
			if err = ctx.Err(); next > 0 || err == nil {
				wait, changed = next, nextChanged
				continue
			}
		}
		if held && ctx.Err() == context.DeadlineExceeded {
			// The deadline ended a hold before its refusal, on a machine
			// too busy to wake it in time: the deadline's refusal still.
			ended(GiveUpDeadline.String())
			return r.hooks.giveUp(ctx, after.deadlineGiveUp(l.key, wait, margin, deadline.Sub(r.now()), waited))
		}
		ended(GiveUpCanceled.String())
		return r.hooks.giveUp(ctx, canceledGiveUp(after.number, l.key, after.err, err, false))
	}
}

// lateTurn judges a turn that came due while its caller was held for a
// refusal (see waitToSend), to be refused at refuseAt: when the deadline
// leaves the attempt less than its time (see sendMargin), the turn would
// send an attempt that ends past the deadline, so the place is given back,
// for a caller with time left, and the caller is held without it until
// refuseAt and then refused (GiveUpDeadline; GiveUpCanceled when ctx was
// cancelled during the hold); it returns nil when the attempt still fits,
// and the turn is the caller's. Sent, such turns spent the limiter's rate
// on attempts that could not finish: 32 closed loops behind a limiter at
// 20/s, a service answering in 150 ms and deadlines of 50-300 ms, made
// 20-29 successes in 5 s and 74-83 sends that ended past their deadline,
// against 101 and 1-2 before the hold's floor (helper-206). waited grows
// by the hold; the refusal follows the failed attempt after, if known.
// *given is set as the place is given back.
func (r *Retryer) lateTurn(ctx context.Context, l *lane, place sendPlace, refuseAt time.Time, waited *time.Duration, after failedAttempt, given *bool) *GiveUpError {
	deadline, ok := r.deadline(ctx)
	if !ok {
		return nil
	}
	now := r.now()
	margin, remaining := r.sendMargin(ctx, l), deadline.Sub(now)
	if !exceeds(0, margin, remaining) {
		return nil
	}
	*given = true // before: a clock that panics as the place is given back still has it given back (see sendRate.cancel)
	l.sender.cancel(place)
	err := sleep(ctx, refuseAt.Sub(now))
	*waited += r.now().Sub(now)
	if err != nil && ctx.Err() != context.DeadlineExceeded {
		return canceledGiveUp(after.number, l.key, after.err, err, false)
	}
	return after.deadlineGiveUp(l.key, 0, margin, remaining, *waited)
}

// deadlineGiveUp returns the refusal, for its deadline, of an attempt's
// wait of wait in partition key's send queue, after it waited waited, with
// remaining left and margin kept for the attempt; following a (when known:
// its error and number) as RetryDelay's refusal of a retry would.
func (a failedAttempt) deadlineGiveUp(key string, wait, margin, remaining, waited time.Duration) *GiveUpError {
	return &GiveUpError{Reason: GiveUpDeadline, Partition: key, Attempt: a.number, Err: a.err, Delay: wait,
		sendWait: true, margin: margin, remaining: remaining, waited: waited}
}
