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
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
