package jitterretry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_000_000, 0)

// reserve takes a place at now and returns its delay.
func reserve(l *sendRate, now time.Time) time.Duration {
	_, wait, _ := l.reserve(now)
	return wait
}

// placeAt takes a place at now and returns it.
func placeAt(l *sendRate, now time.Time) sendPlace {
	p, _, _ := l.reserve(now)
	return p
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The queue: first come, first served, places given back stepped over.

func TestSendRateCancelMovesTheQueueUp(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100})
	first, middle, last := placeAt(l, t0), placeAt(l, t0), placeAt(l, t0)
	l.cancel(middle, t0)
	wait, _ := l.delay(last, t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the caller behind a cancelled place to move up")
	l.cancel(last, t0)
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0), "expect the last place given back to be taken again")
	l.cancel(first, t0) // already due: nothing to give back
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
}

func TestSendRateSpacesSends(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100})
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0))
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
	assert.Equal(t, time.Duration(0), reserve(l, t0.Add(time.Second)), "no debt carried over an idle second")
}

func TestSendRateGiveBackWakesTheCallersBehind(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100})
	places := make([]sendPlace, 12)
	for i := range places {
		places[i] = placeAt(l, t0)
	}
	stale, woken := l.delay(places[11], t0)
	require.Equal(t, 110*time.Millisecond, stale)
	for _, p := range places[1:11] {
		l.cancel(p, t0)
	}
	assert.True(t, closed(woken), "expect the caller behind the places given back woken")
	wait, again := l.delay(places[11], t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect it next after the first place")
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0), "expect a newcomer behind it, not ahead")

	// More give-backs within the window wake nobody: the woken callers ask
	// again within a window anyway, and a burst of n give-ups must not wake
	// the others n times.
	extra := placeAt(l, t0)
	l.cancel(extra, t0.Add(time.Millisecond)) // the last place: nobody behind
	l.cancel(placeAt(l, t0), t0.Add(2*time.Millisecond))
	placeAt(l, t0)
	l.cancel(placeAt(l, t0), t0.Add(3*time.Millisecond))
	assert.False(t, closed(again), "expect one wake per window for give-backs")
}

func TestSendRateGiveBackTwiceChangesNothing(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100})
	placeAt(l, t0)
	gone := placeAt(l, t0)
	l.cancel(gone, t0)
	mine := placeAt(l, t0)
	l.cancel(gone, t0) // a stale second give-back
	theirs := placeAt(l, t0)
	a, _ := l.delay(mine, t0)
	b, _ := l.delay(theirs, t0)
	assert.Equal(t, 10*time.Millisecond, a)
	assert.Equal(t, 20*time.Millisecond, b, "expect two places, not one handed out twice")
}

func TestSendRateClockSteppedBack(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100})
	placeAt(l, t0)
	next := placeAt(l, t0)
	back := t0.Add(-time.Hour)
	wait, _ := l.delay(next, back)
	assert.Equal(t, 10*time.Millisecond, wait)
	wait, _ = l.delay(next, back.Add(10*time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the queue to go on from the new time, not stand still for an hour")
}

// TestSendRateCrowdReadingsKeepItsClock: callers read the clock before they
// take the limiter's lock, so under a crowd of them a reading often arrives
// after a later one, behind the latest time seen by as long as the lock
// took (up to 218 ms at K = 1000 in throttlebench on 2 cores). That is no
// clock stepped back: taking each as one ran the control's time ahead by
// their sum, 5 s in 0.2 s, and a window that seemed seconds long sized a
// cut on a tenth of what was sent (a rate of 515/s cut to 18/s).
func TestSendRateCrowdReadingsKeepItsClock(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 1000})
	var last time.Time
	for i := range 1000 {
		last = t0.Add(time.Duration(i) * time.Millisecond)
		p := placeAt(l, last)
		l.observe(last.Add(-200*time.Millisecond), false, time.Millisecond) // read before the reservation above
		l.cancel(p, last.Add(-100*time.Millisecond))
	}
	assert.Equal(t, last, l.lastNow, "expect the control's time at the latest reading, not ahead of it")

	// A clock that did step back, by more than a crowd's wait, still goes
	// on from where the control was (TestSendRateClockSteppedBack).
	l.observe(last.Add(-time.Hour), false, time.Millisecond)
	l.observe(last.Add(-time.Hour+time.Second), false, time.Millisecond)
	assert.Equal(t, last.Add(time.Second), l.lastNow)
}

func TestTinyMinRateStillPaces(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 1e-11, MinRate: 1e-11})
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, time.Duration(math.MaxInt64), reserve(l, t0), "expect the longest delay, not one overflowed to zero or below")
}
