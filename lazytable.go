package jitterretry

// This file owns the tables a Retryer makes on first use rather than in New:
// most retryers retry seldom, and the hand-off table and the tracked
// retries' slots were 200 of New's 225 KB.

import "sync/atomic"

// tableOf returns the table p points to, making a zero one on the first
// call (one CAS: concurrent first calls all get the table that won; a
// reader that loads p first finds nil, as it would find an empty table).
func tableOf[T any](p *atomic.Pointer[T]) *T {
	if t := p.Load(); t != nil {
		return t
	}
	p.CompareAndSwap(nil, new(T))
	return p.Load()
}
