package jitterretry

// This file owns an attempt's wait for its turn in the send-rate limiter.

import (
	"context"
	"time"
)

// waitToSend queues for a place in lane l's send queue and waits until it is
// due, asking again at least once a window and whenever the limiter wakes it
// (a cut, a rise, the first place given back in a window). It gives the
// place back and fails when the wait would end, with the attempt's time (see
// sendMargin), past ctx's deadline (unless deadline give-ups are off), or
// when ctx ends first.
func (r *Retryer) waitToSend(ctx context.Context, l *lane) error {
	place, wait, changed := l.sender.reserve()
	due := false
	defer func() {
		if !due { // an error, or a panicking hook
			l.sender.cancel(place)
		}
	}()
	waited := time.Duration(0)
	var since time.Time // when the wait began
	// ended records the wait of a caller that waited: sent ("queued"), or
	// given up during it (the reason), so that the waits of an overloaded
	// queue, whose callers give up, are not missing from the histogram.
	ended := func(reason string) {
		if waited > 0 && r.hooks.meter != nil {
			r.hooks.meter.sendWait(ctx, l.key, waited, reason)
		}
	}
	for {
		if wait <= 0 {
			due = true
			ended("queued")
			if waited > 0 {
				markQueued(ctx, since, since.Add(waited)) // for the Do loop whose fn made this call, if any
			}
			return nil
		}
		// Read after the limiter's own reading, which wait counts from,
		// so that the deadline check errs on the early side.
		now := r.now()
		if waited == 0 {
			since = now
		}
		if deadline, ok := r.deadline(ctx); ok {
			margin := r.sendMargin(ctx, l)
			if remaining := deadline.Sub(now); exceeds(wait, margin, remaining) {
				ended(GiveUpDeadline.String())
				return r.hooks.giveUp(ctx, &GiveUpError{Reason: GiveUpDeadline, Partition: l.key, Delay: wait, margin: margin, remaining: remaining})
			}
		}
		err := sleepUntil(ctx, min(wait, sendWindow), changed)
		waited += r.now().Sub(now)
		if err != nil {
			ended(GiveUpCanceled.String())
			return r.hooks.giveUp(ctx, &GiveUpError{Reason: GiveUpCanceled, Partition: l.key, ctxErr: err})
		}
		wait, changed = l.sender.delay(place)
	}
}
