package jitterretry

// This file owns the mark a Do loop puts in the context it gives fn, through
// which the retry decisions of the SDK calls inside fn tell the loop that
// they met a throttle.

import (
	"context"
	"sync/atomic"
)

// throttleMark is set when a throttle's retry is decided under a context
// that carries it: by the SDK calls of one Do loop's fn, which get the
// loop's context, and by no other operation of the client. (A Do loop inside
// fn carries its own mark, which hides the outer one from its calls.)
type throttleMark struct{ set atomic.Bool }

type throttleMarkKey struct{}

// withThrottleMark returns ctx carrying m.
func withThrottleMark(ctx context.Context, m *throttleMark) context.Context {
	return context.WithValue(ctx, throttleMarkKey{}, m)
}

// markThrottle sets the mark ctx carries, if any.
func markThrottle(ctx context.Context) {
	if m, ok := ctx.Value(throttleMarkKey{}).(*throttleMark); ok {
		m.note()
	}
}

// note sets the mark.
func (m *throttleMark) note() { m.set.Store(true) }

// take reports whether the mark was set since the last take, and clears it.
func (m *throttleMark) take() bool { return m.set.Swap(false) }
