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
