package jitterretry

// This file owns sleeping: a wait that a context, or a change the waiter
// must look at, cuts short.

import (
	"context"
	"time"
)

// sleep waits for d or until ctx is done, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	return sleepUntil(ctx, d, nil)
}

// sleepUntil is sleep that also ends, without error, when changed is closed.
// A nil changed never is.
func sleepUntil(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	var n napper
	defer n.stop()
	return n.sleep(ctx, d, changed)
}

// napper sleeps as sleepUntil does, nap after nap, on one timer: a caller
// waiting its turn in the send queue looks again every window, and a
// timer for each look was 70% of what 5,000 such callers allocated, and
// the collections it brought held their refusals past their deadlines.
// Stop it when done.
type napper struct{ timer *time.Timer }

func (n *napper) sleep(ctx context.Context, d time.Duration, changed <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	if n.timer == nil {
		n.timer = time.NewTimer(d)
	} else {
		// No stale tick with Go 1.23's timers; with GODEBUG
		// asynctimerchan=1 one wakes its caller early once, and it
		// asks again.
		n.timer.Reset(d)
	}
	select {
	case <-n.timer.C:
		return nil
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *napper) stop() {
	if n.timer != nil {
		n.timer.Stop()
	}
}
