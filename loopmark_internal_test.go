package jitterretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResetSparesTheRefusalsOfALoopThatStarted: the last Do loop to end
// empties the refusal log, unless another started meanwhile and logged a
// refusal its own report depends on.
func TestResetSparesTheRefusalsOfALoopThatStarted(t *testing.T) {
	var h hooks
	h.loops.Add(1)                   // loop A runs
	require.Zero(t, h.loops.Add(-1)) // and ends, the last...
	h.loops.Add(1)                   // ...as loop B starts
	refused := errors.New("refused inside B's fn")
	h.refusals.add(refused, &h.loops)
	h.refusals.reset(&h.loops) // A empties the log, late
	logged := h.refusals.snapshot()
	list := logged.list()
	require.Len(t, list, 1)
	assert.Equal(t, refused, list[0].err)

	require.Zero(t, h.loops.Add(-1)) // B ends, the last
	h.refusals.reset(&h.loops)
	h.refusals.add(errors.New("refused as B ended"), &h.loops) // no loop runs: not logged
	logged = h.refusals.snapshot()
	assert.Empty(t, logged.list())
}

// TestQueueWaitsCountOnceWithinTheCall: the waits fn's SDK calls make in the
// send-rate limiter's queue are the conflict span's (see attemptSpan) as
// time during which at least one of them waited: waits of calls made in
// parallel count once (a review: summed, four parallel reads made a window
// 75% too large), and a wait of a goroutine that outlived the previous call
// counts only from this call's start (the same review: it tripled the
// window). The loops around the call's own hear them too.
func TestQueueWaitsCountOnceWithinTheCall(t *testing.T) {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var outer, inner loopMark
	ctx := withLoopMark(withLoopMark(context.Background(), &outer), &inner)
	outer.startCall(ms(0))
	inner.startCall(ms(10))
	markQueued(ctx, nil, ms(-100), ms(30)) // left by the previous call: 20 ms in inner's, 30 in outer's
	markQueued(ctx, nil, ms(20), ms(80))   // four reads in parallel, noted as they end
	markQueued(ctx, nil, ms(20), ms(90))
	markQueued(ctx, nil, ms(20), ms(100))
	markQueued(ctx, nil, ms(40), ms(60))   // a late note, within what is counted
	markQueued(ctx, nil, ms(200), ms(250)) // the write, after them
	assert.Equal(t, 140*time.Millisecond, inner.queuedInCall(), "expect [10, 100] and [200, 250]")
	assert.Equal(t, 150*time.Millisecond, outer.queuedInCall(), "expect [0, 100] and [200, 250]")
	inner.startCall(ms(300))
	assert.Equal(t, time.Duration(0), inner.queuedInCall(), "expect a new call to start from nothing")
}

// TestColdAttemptsCountOnceWithinTheCall: the cold attempts of fn's SDK
// calls are left out of fn's time as time during which at least one of
// them ran, within the call, as the queue's waits are counted: a cold
// attempt of a goroutine that outlived the previous call counted whole in
// the next (helper-180: a 1 s prefetch charged to a call that began at
// 250 ms), and cold attempts in parallel added up past the call.
func TestColdAttemptsCountOnceWithinTheCall(t *testing.T) {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var m loopMark
	ctx := withLoopMark(context.Background(), &m)
	m.startCall(ms(250))
	markCold(ctx, ms(0), ms(1000))   // begun in the previous call
	markCold(ctx, ms(300), ms(1000)) // in parallel with it
	assert.Equal(t, 750*time.Millisecond, m.coldInCall(), "expect [250, 1000] once")
	m.startCall(ms(1100))
	assert.Zero(t, m.coldInCall(), "expect a new call to start from nothing")
}
