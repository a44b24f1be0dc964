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
// loop's context, and by no other operation of the client. A Do loop inside
// fn carries its own mark, which passes what it hears to the outer loop's:
// the inner loop's throttles are the outer fn's too.
type throttleMark struct {
	set   atomic.Bool
	outer *throttleMark // the mark of the Do loop whose fn runs this one; nil at the top
}

type throttleMarkKey struct{}

// withThrottleMark returns ctx carrying m, under the mark ctx carries, if
// any.
func withThrottleMark(ctx context.Context, m *throttleMark) context.Context {
	m.outer, _ = ctx.Value(throttleMarkKey{}).(*throttleMark)
	return context.WithValue(ctx, throttleMarkKey{}, m)
}

// markThrottle sets the mark ctx carries, if any.
func markThrottle(ctx context.Context) {
	if m, ok := ctx.Value(throttleMarkKey{}).(*throttleMark); ok {
		m.note()
	}
}

// note sets the mark and those of the loops around its own.
func (m *throttleMark) note() {
	for ; m != nil; m = m.outer {
		m.set.Store(true)
	}
}

// take reports whether the mark was set since the last take, and clears it.
func (m *throttleMark) take() bool { return m.set.Swap(false) }
