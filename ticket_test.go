package jitterretry

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"
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
		release, foreign, _, ok := l.take(ctx, 5, false)
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

// TestALateConflictKeepsAConflictRetrysCost: a retry swept and refunded
// before its answer came settles it as its release would have: a conflict
// answer gives a retry's cost back, but not a conflict's retry's (see
// lane.retryRelease).
func TestALateConflictKeepsAConflictRetrysCost(t *testing.T) {
	conflict := &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}
	for _, forConflict := range []bool{false, true} {
		r := New()
		require.NoError(t, r.Err())
		l := r.lanes.main
		release, foreign, _, ok := l.take(context.Background(), 14, forConflict)
		require.True(t, ok)
		paid := ticket{lane: l, cost: 14, foreign: foreign, release: release, forConflict: forConflict}
		paid.settleLate(conflict, paid.refund())
		want := uint(500)
		if forConflict {
			want = 486
		}
		assert.Equal(t, want, r.Remaining(), "a conflict's retry: %v", forConflict)
	}
}

// TestASweepStopsTrackingARetryAbandonedUnderALiveContext: a retry whose
// release the SDK dropped (it could not rewind the request's body) under a
// context that never ends is no longer tracked a minute after its
// backoff, or, when that is not known, after a sweep first saw it held:
// its slot held for good, the table filled and every retry slowed
// (helper-171). Its tokens stay spent, as the SDK leaves them, and a
// release that still comes is the retry's own: refunded instead, an
// outage's hung attempts refilled the budget every minute (helper-172).
func TestASweepStopsTrackingARetryAbandonedUnderALiveContext(t *testing.T) {
	for _, knownBackoff := range []bool{true, false} {
		now := t0
		r := New(func(o *Options) { o.Clock = func() time.Time { return now } })
		require.NoError(t, r.Err())
		l, tr := r.lanes.main, r.tracked
		release, foreign, _, ok := l.take(context.Background(), 5, false)
		require.True(t, ok)
		ref, releaseTracked := tr.track(context.Background(), ticket{lane: l, cost: 5, foreign: foreign, release: release}, time.Time{}, 0)
		require.NotNil(t, ref.slot)
		now = now.Add(10 * time.Millisecond)
		if knownBackoff {
			tr.backoffEnds(ref, now)
		} else {
			tr.reclaim() // first seen held
		}
		now = now.Add(abandonAfter - time.Millisecond)
		tr.reclaim()
		require.Equal(t, slotHeld, ref.slot.word.Load()&stateMask, "expect it tracked for a minute (backoff known: %v)", knownBackoff)
		now = now.Add(time.Millisecond)
		assert.False(t, tr.reclaim(), "expect nothing refunded")
		assert.Equal(t, slotRetired, ref.slot.word.Load()&stateMask, "expect its slot retired (backoff known: %v)", knownBackoff)
		assert.Equal(t, uint(495), r.Remaining())
		if knownBackoff {
			require.NoError(t, releaseTracked(nil))
			assert.Equal(t, uint(500), r.Remaining(), "expect a late success refunded as the SDK's release would")
		} else {
			require.NoError(t, releaseTracked(errors.New("sent after all, and failed")))
			assert.Equal(t, uint(495), r.Remaining(), "expect a late failure to keep the cost")
		}
	}
}

// TestARetryInALimitedLaneIsNotAbandoned: in a lane with a send-rate
// limiter a retry's attempt may wait its turn for over abandonAfter and be
// refused there, and the SDK then drops the retry's release: the slot
// stays tracked, and the sweep that sees the context end gives the tokens
// back (helper-175: untracked after a minute, they were lost).
func TestARetryInALimitedLaneIsNotAbandoned(t *testing.T) {
	now := t0
	r := New(func(o *Options) {
		o.Clock = func() time.Time { return now }
		o.SendRate = &SendRateOptions{InitialRate: 0.01, MinRate: 0.01, MaxRate: 0.01}
	})
	require.NoError(t, r.Err())
	l, tr := r.lanes.main, r.tracked
	require.NotNil(t, l.sender)
	release, foreign, _, ok := l.take(context.Background(), 14, false)
	require.True(t, ok)
	ctx, cancel := context.WithCancel(context.Background())
	ref, _ := tr.track(ctx, ticket{lane: l, cost: 14, foreign: foreign, release: release}, time.Time{}, 0)
	tr.backoffEnds(ref, now.Add(10*time.Millisecond))
	now = now.Add(2 * abandonAfter)
	tr.reclaim()
	require.Equal(t, slotHeld, ref.slot.word.Load()&stateMask, "expect the retry still tracked")
	cancel() // refused in the queue: its release never comes
	tr.reclaim()
	now = now.Add(reclaimGrace)
	tr.reclaim()
	assert.Equal(t, uint(500), r.Remaining(), "expect the unsent retry's tokens back")
}

// TestASlotsNextRetryIsHeldFromItsOwnStart: the time a sweep first saw a
// slot held is its retry's; the next retry in the slot starts over.
func TestASlotsNextRetryIsHeldFromItsOwnStart(t *testing.T) {
	now := t0
	r := New(func(o *Options) { o.Clock = func() time.Time { return now } })
	require.NoError(t, r.Err())
	l, tr := r.lanes.main, r.tracked
	hold := func() (trackRef, func(error) error) {
		release, foreign, _, ok := l.take(context.Background(), 5, false)
		require.True(t, ok)
		return tr.track(context.Background(), ticket{lane: l, cost: 5, foreign: foreign, release: release}, time.Time{}, 0)
	}
	first, release := hold()
	tr.reclaim() // first seen held at t0
	require.NoError(t, release(nil))
	now = now.Add(abandonAfter + time.Second)
	var ref trackRef
	for range trackSlots * trackShards {
		ref, release = hold()
		if ref.slot == first.slot {
			break
		}
		require.NoError(t, release(nil))
	}
	require.Same(t, first.slot, ref.slot, "expect the slot reused")
	tr.reclaim()
	assert.Equal(t, slotHeld, ref.slot.word.Load()&stateMask, "expect the next retry tracked from its own first sight, not the last one's")
	require.NoError(t, release(nil))
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

// TestASweepsRefundHoldsUpNoOtherRetry: a sweep refunds one slot at a
// time, outside the shard's lock: a refund of the caller's code that takes
// long left every other slot the sweep had found due in slotSweeping, so
// their releases spun until it returned (300 ms for a slow release,
// helper-113). B's release returns while A's refund is still blocked.
func TestASweepsRefundHoldsUpNoOtherRetry(t *testing.T) {
	tr := newTracked(time.Now)
	l := &lane{}
	inRefund, unblock := make(chan struct{}), make(chan struct{})
	var bReleased, bRefunded atomic.Int32
	a := ticket{lane: l, cost: 1, foreign: func() error { close(inRefund); <-unblock; return nil }, release: func(error) error { return nil }}
	b := ticket{lane: l, cost: 1, foreign: func() error { bRefunded.Add(1); return nil }, release: func(error) error { bReleased.Add(1); return nil }}
	refA, _ := tr.track(cancelledContext(), a, time.Time{}, 0)
	refB, releaseB := tr.track(cancelledContext(), b, time.Time{}, 0)
	require.Same(t, refA.shard, refB.shard)
	tr.backoffEnds(refA, time.Now().Add(time.Hour))
	tr.backoffEnds(refB, time.Now().Add(time.Hour))
	go tr.reclaim()
	<-inRefund
	released := make(chan struct{})
	go func() { defer close(released); _ = releaseB(nil) }()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Error("expect B's release to return while A's refund runs")
	}
	close(unblock)
	<-released
	assert.Equal(t, int32(1), bReleased.Load()+bRefunded.Load(), "expect B's tokens claimed once")
}

// TestASweepLeavesASlotAnotherSweepRefunds: two sweeps find the same two
// slots due; while the first refunds U (the caller's slow code), the
// second claims W and refunds it slowly. The first waited for W's refund,
// spinning, when it came to W (helper-114); it now leaves W to the other.
func TestASweepLeavesASlotAnotherSweepRefunds(t *testing.T) {
	tr := newTracked(time.Now)
	l := &lane{}
	inU, unblockU := make(chan struct{}), make(chan struct{})
	inW, unblockW := make(chan struct{}), make(chan struct{})
	var claimsU, claimsW atomic.Int32
	u := ticket{lane: l, cost: 1, foreign: func() error { claimsU.Add(1); close(inU); <-unblockU; return nil }, release: func(error) error { claimsU.Add(1); return nil }}
	w := ticket{lane: l, cost: 1, foreign: func() error { claimsW.Add(1); close(inW); <-unblockW; return nil }, release: func(error) error { claimsW.Add(1); return nil }}
	refU, _ := tr.track(cancelledContext(), u, time.Time{}, 0)
	refW, _ := tr.track(cancelledContext(), w, time.Time{}, 0)
	require.Same(t, refU.shard, refW.shard)
	tr.backoffEnds(refU, time.Now().Add(time.Hour))
	tr.backoffEnds(refW, time.Now().Add(time.Hour))
	first, second := make(chan struct{}), make(chan struct{})
	go func() { defer close(first); tr.reclaim() }()
	<-inU
	go func() { defer close(second); tr.reclaim() }()
	<-inW
	close(unblockU)
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Error("expect the first sweep to return while the second refunds W")
	}
	close(unblockW)
	<-first
	<-second
	assert.Equal(t, []int32{1, 1}, []int32{claimsU.Load(), claimsW.Load()}, "expect each retry's tokens claimed once")
}

// TestASweepRefundsNoRetryNoLongerDue: between the sweep's look and its
// refund, the retry it found due was released and its slot taken 2^13
// times, back to the same generation, by a retry that is not due: one
// whose context lives (refunded, helper-114), or one sent after the
// sweep's reading whose context ended since (judged at that reading, it
// looked cut short and was refunded, helper-116). The refund asks again,
// at a reading of its own; a retry not due keeps its first sight of the
// ended context from that reading, not from the sweep's.
func TestASweepRefundsNoRetryNoLongerDue(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ctx          context.Context
		backoffEnded bool
	}{
		{"its context lives", context.Background(), false},
		{"sent, its context ended since", cancelledContext(), true},
		{"its backoff's end not known, its context ended", cancelledContext(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			now := time.Now()
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
			tr := newTracked(clock)
			l := &lane{}
			var refundedAgain atomic.Int32
			first := ticket{lane: l, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
			ref, release := tr.track(cancelledContext(), first, time.Time{}, 0)
			tr.backoffEnds(ref, clock().Add(time.Hour))
			due := ref.shard.sweepLocked(tr.read(clock()))
			require.Len(t, due, 1)
			again := ticket{lane: l, cost: 1, foreign: func() error { refundedAgain.Add(1); return nil }, release: func(error) error { return nil }}
			var next trackRef
			for i := range 1 << genBits {
				_ = release(nil)
				ref.shard.cursor.Store(uint32(due[0].index - 1)) // the cursor comes round to the slot
				ctx := context.Background()
				if i == 1<<genBits-1 {
					ctx = tc.ctx
				}
				next, release = tr.track(ctx, again, time.Time{}, 0)
				require.Same(t, ref.slot, next.slot)
			}
			require.Equal(t, due[0].gen, next.gen)
			advance(10 * time.Millisecond)
			if tc.backoffEnded {
				tr.backoffEnds(next, clock())
			}
			advance(time.Second)
			assert.False(t, ref.shard.retire(due[0], tr))
			assert.Zero(t, refundedAgain.Load(), "expect the retry's tokens left alone")
			assert.Equal(t, slotHeld, ref.slot.word.Load()&stateMask, "expect the slot given back to its retry")
			advance(reclaimGrace / 2)
			assert.Empty(t, ref.shard.sweepLocked(tr.read(clock())), "expect the grace counted from the refund's reading")
		})
	}
}

// TestARefundReadsItsClockAfterItsClaim: the refund's reading must come
// after its claim of the slot: read before, the slot could be released
// and come round to the same generation in between, and a sent retry
// judged at the older reading was refunded (helper-117). Every reading
// the refund takes sees the slot claimed.
func TestARefundReadsItsClockAfterItsClaim(t *testing.T) {
	var (
		inRetire atomic.Bool
		slot     atomic.Pointer[trackSlot]
		seenHeld atomic.Int32
		readings atomic.Int32
	)
	tr := newTracked(func() time.Time {
		if s := slot.Load(); inRetire.Load() && s != nil {
			readings.Add(1)
			if s.word.Load()&stateMask == slotHeld {
				seenHeld.Add(1)
			}
		}
		return time.Now()
	})
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
	ref, _ := tr.track(cancelledContext(), tk, time.Time{}, 0)
	tr.backoffEnds(ref, time.Now().Add(time.Hour))
	slot.Store(ref.slot)
	due := ref.shard.sweepLocked(tr.read(time.Now()))
	require.Len(t, due, 1)
	inRetire.Store(true)
	assert.True(t, ref.shard.retire(due[0], tr))
	assert.Positive(t, readings.Load())
	assert.Zero(t, seenHeld.Load(), "expect no reading taken while the slot was its retry's")
}

// TestASweepWaitsOutAnotherSweepsLook: sweep A found a retry due; sweep
// B, whose clock reading came before A's, looks at the same slot as A
// claims it, and finds it not due yet at its own reading. A took the slot
// in B's hands for B's to refund and passed it by; B gave it back: a
// refund due was made by neither, and A reported none, so a retry that
// needed those tokens was refused (helper-115). A now waits out B's look.
func TestASweepWaitsOutAnotherSweepsLook(t *testing.T) {
	start := time.Now()
	var clockAt atomic.Int64 // since start; the refund reads it
	tr := newTracked(func() time.Time { return start.Add(time.Duration(clockAt.Load())) })
	var refunds atomic.Int32
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { refunds.Add(1); return nil }, release: func(error) error { return nil }}
	ctx := &gatedContext{Context: cancelledContext(), blockAt: 3, in: make(chan struct{}), out: make(chan struct{})}
	ref, _ := tr.track(ctx, tk, time.Time{}, 0)
	sh := ref.shard
	require.Empty(t, sh.sweepLocked(tr.read(start.Add(10*time.Millisecond))), "first seen done: not due yet")
	dueA := sh.sweepLocked(tr.read(start.Add(10*time.Millisecond + reclaimGrace + 10*time.Millisecond)))
	require.Len(t, dueA, 1)
	dueB := make(chan []sweptSlot)
	go func() { dueB <- sh.sweepLocked(tr.read(start.Add(40 * time.Millisecond))) }()
	<-ctx.in // B looks
	retired := make(chan bool)
	clockAt.Store(int64(70 * time.Millisecond))
	go func() { retired <- sh.retire(dueA[0], tr) }()
	time.Sleep(50 * time.Millisecond) // let A come to the slot while B looks
	close(ctx.out)
	assert.Empty(t, <-dueB, "B: not due at its earlier reading")
	assert.True(t, <-retired, "expect A to refund the retry it found due")
	assert.Equal(t, int32(1), refunds.Load())
}

// gatedContext is a context whose blockAt-th Err blocks until out closes,
// having closed in.
type gatedContext struct {
	context.Context
	calls   atomic.Int32
	blockAt int32
	in, out chan struct{}
}

func (c *gatedContext) Err() error {
	if c.calls.Add(1) == c.blockAt {
		close(c.in)
		<-c.out
	}
	return c.Context.Err()
}

// TestAPanicAskingAContextStrandsNoSlot: the sweep asks each held retry's
// context whether it ended; a context whose Err panics (the caller's)
// left the slots the sweep had found due in slotSweeping, their releases
// spinning for good (helper-113). Every slot is given back first.
func TestAPanicAskingAContextStrandsNoSlot(t *testing.T) {
	tr := newTracked(time.Now)
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
	refA, releaseA := tr.track(cancelledContext(), tk, time.Time{}, 0)
	refB, _ := tr.track(panickyContext{context.Background()}, tk, time.Time{}, 0)
	require.Same(t, refA.shard, refB.shard)
	tr.backoffEnds(refA, time.Now().Add(time.Hour))
	assert.PanicsWithValue(t, "a context's bug", func() { tr.reclaim() })
	for name, fn := range map[string]func(){
		"A's release":  func() { _ = releaseA(nil) },
		"a next sweep": func() { defer func() { _ = recover() }(); tr.reclaim() },
	} {
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: still waiting after 10 s", name)
		}
	}
}

// TestASweepWithNothingDueAllocatesNothing: the sweep collects the slots
// due for a refund only when there are some.
func TestASweepWithNothingDueAllocatesNothing(t *testing.T) {
	tr := newTracked(time.Now)
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
	for i := range 100 {
		tr.track(context.Background(), tk, time.Time{}, uintptr(i))
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { tr.reclaim() }))
}

// TestSlotsAreMadeForTheRetriesHeldAtOnce: a slot of the table of held
// retries is made when more retries are held at once than its shard has
// free, as the README says, not when a shard's cursor first comes to it:
// one retry at a time, released before the next, made every slot of a
// shard its error values landed on (0.8 MB a retryer once 64 error values
// had spread over the eight shards, where the SDK's retryer keeps none).
func TestSlotsAreMadeForTheRetriesHeldAtOnce(t *testing.T) {
	tr := newTracked(time.Now)
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	made := func() (n int) {
		for i := range tr.shards {
			if slots := tr.shards[i].slots.Load(); slots != nil {
				for j := range slots {
					if slots[j].Load() != nil {
						n++
					}
				}
			}
		}
		return n
	}
	for i := range 10_000 {
		ref, release := tr.track(ctx, tk, time.Time{}, uintptr(i))
		require.NotNil(t, ref.slot, "expect a retry tracked")
		_ = release(nil)
	}
	assert.LessOrEqual(t, made(), trackShards, "expect one slot a shard for retries held one at a time")

	const atOnce = 300
	releases := make([]func(error) error, 0, atOnce)
	for i := range atOnce {
		ref, release := tr.track(ctx, tk, time.Time{}, uintptr(i*7))
		require.NotNil(t, ref.slot, "expect every retry tracked")
		releases = append(releases, release)
	}
	assert.GreaterOrEqual(t, made(), atOnce)
	assert.LessOrEqual(t, made(), atOnce+trackShards, "expect slots made for the retries held at once, and those made before")
	for _, release := range releases {
		_ = release(nil)
	}
	for i := range 10_000 {
		_, release := tr.track(ctx, tk, time.Time{}, uintptr(i))
		_ = release(nil)
	}
	assert.LessOrEqual(t, made(), atOnce+trackShards, "expect the slots made reused")
}

// TestATakeLooksAtFewSlots: with retries held in a shard that stay (long
// backoffs), a retry made and released one at a time beside them finds a
// free slot in a few looks, whatever the number held: the cursor, just
// past the slot freed last, went round every slot made (helper-248: 128
// looks a decision with 1,000 held, 502 with 4,000, the decision six
// times as long). Looks are the cursors' moves, which a slow machine does
// not change.
func TestATakeLooksAtFewSlots(t *testing.T) {
	for _, held := range []int{1000, 4000, 4090} {
		tr := newTracked(time.Now)
		tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
		ctx, cancel := context.WithCancel(context.Background())
		for i := range held {
			ref, _ := tr.track(ctx, tk, time.Time{}, uintptr(i))
			require.NotNil(t, ref.slot, "expect retry %d of %d tracked", i, held)
		}
		moved := func() (n uint32) {
			for i := range tr.shards {
				n += tr.shards[i].cursor.Load()
			}
			return n
		}
		before := moved()
		const decisions = 2000
		for range decisions {
			ref, release := tr.track(ctx, tk, time.Time{}, 12345)
			require.NotNil(t, ref.slot)
			_ = release(nil)
		}
		looks := float64(moved()-before) / decisions
		assert.LessOrEqual(t, looks, 2.0, "expect a free slot found in few looks with %d retries held, got %.1f a decision", held, looks)
		cancel()
	}
}

// TestStressEveryTrackedRetryIsClaimedOnce: owners that cancel, refund and
// release while two sweepers run, some refunds slow and some panicking:
// every retry's tokens are claimed once, by its release or by one refund
// (helper-113's check of the refunds moved out of the lock).
func TestStressEveryTrackedRetryIsClaimedOnce(t *testing.T) {
	tr := newTracked(time.Now)
	l := &lane{}
	const n = 20000
	var claims [n]atomic.Int32
	stop := make(chan struct{})
	var sweepers, owners sync.WaitGroup
	for range 2 {
		sweepers.Add(1)
		go func() {
			defer sweepers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					func() { defer func() { _ = recover() }(); tr.reclaim() }()
				}
			}
		}()
	}
	for g := range 8 {
		owners.Add(1)
		go func() {
			defer owners.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for i := g; i < n; i += 8 {
				tk := ticket{lane: l, cost: 1,
					foreign: func() error {
						claims[i].Add(1)
						if i%97 == 0 {
							panic("a refund's bug")
						}
						return nil
					},
					release: func(error) error { claims[i].Add(1); return nil }}
				ctx, cancel := context.WithCancel(context.Background())
				ref, release := tr.track(ctx, tk, time.Time{}, uintptr(rng.Uint64()))
				if ref.slot == nil {
					claims[i].Add(1)
					cancel()
					continue
				}
				tr.backoffEnds(ref, time.Now().Add(time.Duration(rng.IntN(3))*time.Millisecond))
				if rng.IntN(2) == 0 {
					cancel()
				}
				if rng.IntN(3) == 0 {
					func() { defer func() { _ = recover() }(); tr.refund(ref) }()
				}
				_ = release(nil)
				cancel()
			}
		}()
	}
	owners.Wait()
	close(stop)
	sweepers.Wait()
	for i := range claims {
		require.Equal(t, int32(1), claims[i].Load(), "retry %d", i)
	}
}

// cancelledContext returns a context that has ended.
func cancelledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// panickyContext is a context whose Err panics.
type panickyContext struct{ context.Context }

func (panickyContext) Err() error { panic("a context's bug") }

// cursorsMoved sums how far tr's shards' cursors have moved: each slot a
// retry looks at moves one.
func cursorsMoved(tr *tracked) (n uint64) {
	for i := range tr.shards {
		n += uint64(tr.shards[i].cursor.Load())
	}
	return n
}

// TestAFullTableIsNotScannedForEveryRetry: with every slot held by a live
// retry in its backoff, each further retry scanned all 4,096 slots twice
// and a sweep ran every millisecond: some 96 µs a retry decision against
// 0.95 µs with 4,000 held (helper-200). A retry that finds the table full
// marks it, and the retries of the next fullRecheck are not tracked
// without looking, nor sweep, but for the slot that last came free in each
// shard, taken without a scan (a mark cleared on every release made the
// retry after it scan the table twice again: 40 µs a decision where slots
// came free one at a time, helper-207); once more slots came free than
// there are shards, the next retry scans (a mass release left 92 of the
// next 100 retries untracked, helper-208), as one does after fullRecheck.
func TestAFullTableIsNotScannedForEveryRetry(t *testing.T) {
	var at atomic.Int64
	clock := func() time.Time { return t0.Add(time.Duration(at.Load())) }
	tr := newTracked(clock)
	ctx, cancel := context.WithCancel(context.Background()) // can end, never does here
	defer cancel()
	tk := ticket{lane: &lane{}, cost: 1, foreign: func() error { return nil }, release: func(error) error { return nil }}
	var releases []func(error) error
	for i := 0; ; i++ {
		ref, release := tr.track(ctx, tk, clock(), uintptr(i))
		if ref.slot == nil {
			break
		}
		tr.backoffEnds(ref, clock().Add(time.Hour))
		releases = append(releases, release)
	}
	require.Len(t, releases, trackShards*trackSlots)
	require.NotZero(t, tr.fullAt.Load(), "expect the table marked full")
	looked, swept := cursorsMoved(tr), tr.lastSweep.Load()
	for i := range 1000 {
		at.Add(int64(fullRecheck) / 4000)
		ref, _ := tr.track(ctx, tk, clock(), uintptr(i))
		assert.Nil(t, ref.slot)
	}
	assert.Equal(t, looked, cursorsMoved(tr), "expect no slot looked at within fullRecheck of finding the table full")
	assert.Equal(t, swept, tr.lastSweep.Load(), "expect no sweep within fullRecheck of finding the table full")

	require.NoError(t, releases[0](nil)) // a slot comes free
	ref, _ := tr.track(ctx, tk, clock(), 1)
	assert.NotNil(t, ref.slot, "expect the freed slot taken at once")
	ref, _ = tr.track(ctx, tk, clock(), 2)
	assert.Nil(t, ref.slot, "expect the table full again")
	assert.Equal(t, looked, cursorsMoved(tr), "expect the freed slot taken without a scan")
	assert.NotZero(t, tr.fullAt.Load(), "expect the table still marked full")

	for _, release := range releases[1:] {
		require.NoError(t, release(nil))
	}
	for i := range 100 {
		ref, _ := tr.track(ctx, tk, clock(), uintptr(i))
		assert.NotNil(t, ref.slot, "expect retry %d tracked, within fullRecheck, once many slots came free", i)
	}
	assert.Zero(t, tr.fullAt.Load(), "expect the mark gone once a scan found a slot")
}
