package jitterretry

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTrackedStaleReferenceLeavesTheNextRetryAlone: a hand-off that no
// RetryDelay took (a wrapper replaced it) keeps its retry's reference after
// the retry was released and its slot went to another retry. A refund or a
// backoff's end through that stale reference must not touch the other
// retry's tokens.
func TestTrackedStaleReferenceLeavesTheNextRetryAlone(t *testing.T) {
	r := New()
	require.NoError(t, r.Err())
	l, tr := r.lanes.main, r.tracked
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paid := func() ticket {
		release, foreign, _, ok := l.take(ctx, 5)
		require.True(t, ok)
		return ticket{lane: l, cost: 5, foreign: foreign, release: release}
	}

	stale, release := tr.track(ctx, paid(), time.Time{}, 0)
	require.NotNil(t, stale.slot)
	require.NoError(t, release(nil)) // sent and succeeded: the slot is free again

	// The retries that follow take slot after slot until one reuses it.
	var ref trackRef
	for range trackSlots * trackShards {
		ref, release = tr.track(ctx, paid(), time.Time{}, 0)
		if ref.slot == stale.slot {
			break
		}
		require.NoError(t, release(nil))
	}
	require.Same(t, stale.slot, ref.slot, "expect the slot reused")
	held := r.Remaining()

	tr.backoffEnds(stale, r.now().Add(-time.Hour))
	tr.refund(stale)
	assert.Equal(t, held, r.Remaining(), "expect no refund through a stale reference")

	// The retry that holds the slot now is untouched: its context ends
	// before its backoff does, so a sweep gives its tokens back.
	tr.backoffEnds(ref, r.now().Add(time.Hour))
	cancel()
	require.True(t, tr.reclaim(), "expect the held retry's tokens reclaimed")
	assert.Equal(t, held+5, r.Remaining())
}

// TestLateReadingDoesNotSweepAgain: a caller that read the clock just before
// another caller's sweep is no clock stepped back: it neither sweeps the
// table again nor moves the last sweep back. A step back of reclaimGrace or
// more still sweeps.
func TestLateReadingDoesNotSweepAgain(t *testing.T) {
	tr := newTracked(func() time.Time { return t0 })
	tr.reclaimEvery(time.Millisecond, t0.Add(time.Second))
	swept := tr.lastSweep.Load()
	require.Equal(t, int64(time.Second), swept)
	tr.reclaimEvery(time.Millisecond, t0.Add(time.Second-time.Microsecond))
	assert.Equal(t, swept, tr.lastSweep.Load(), "expect a late reading to leave the last sweep alone")
	tr.reclaimEvery(time.Millisecond, t0.Add(time.Second-reclaimGrace))
	assert.Equal(t, int64(time.Second-reclaimGrace), tr.lastSweep.Load(), "expect a clock stepped back to sweep")
}

// TestLateReadingKeepsTheGrace: a sweep whose reading was taken before an
// earlier sweep's does not start the grace of a retry whose context was
// seen done over from that earlier time; a clock stepped back by
// reclaimGrace or more still does.
func TestLateReadingKeepsTheGrace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &trackSlot{ctx: ctx}
	require.False(t, s.due(100*time.Millisecond, 0), "expect the grace to start when first seen done")
	assert.False(t, s.due(60*time.Millisecond, 0), "expect a late reading not to refund")
	assert.False(t, s.due(111*time.Millisecond, 0), "expect the grace to count from 100 ms, not from the late 60 ms")
	assert.True(t, s.due(150*time.Millisecond, 0), "expect a refund once the grace is over")

	s = &trackSlot{ctx: ctx}
	s.due(time.Second, 0)
	assert.False(t, s.due(time.Second-reclaimGrace, 0), "expect a clock stepped back to start the grace over")
	assert.True(t, s.due(time.Second, 0))
}
