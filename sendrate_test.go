package jitterretry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_000_000, 0)

// fakeService is a service with its own token bucket (capacity per second,
// burst): a request finds it empty and is throttled.
type fakeService struct {
	capacity, burst, tokens float64
	last                    time.Time
}

func (s *fakeService) admit(now time.Time) bool {
	s.tokens = math.Min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.capacity)
	s.last = now
	if s.tokens >= 1 {
		s.tokens--
		return true
	}
	return false
}

// run sends, one caller at a time, as fast as the limiter allows for d from
// start, answering every request after rtt, and returns the number of
// successes and throttles.
func run(l *sendRate, s *fakeService, start time.Time, d, rtt time.Duration) (ok, throttled int) {
	now := start
	for now.Before(start.Add(d)) {
		wait := reserve(l, now)
		if wait == 0 {
			wait = time.Millisecond // an unlimited client sends 1000/s here
		}
		now = now.Add(wait)
		admitted := s.admit(now)
		l.observe(now, now.Add(rtt), !admitted)
		if admitted {
			ok++
		} else {
			throttled++
		}
	}
	return ok, throttled
}

// reserve takes a place at now and returns its delay.
func reserve(l *sendRate, now time.Time) time.Duration {
	wait, _ := l.delay(l.reserve(now), now)
	return wait
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSendRateOneCutPerThrottleEpisode(t *testing.T) {
	l := newSendRate(SendRateOptions{})
	assert.True(t, math.IsInf(l.currentRate(), 1), "unlimited until the first throttle")
	// 64 goroutines sent at t0 and all come back throttled a round trip later.
	for i := range 64 {
		l.observe(t0, t0.Add(3*time.Millisecond+time.Duration(i)*time.Microsecond), true)
	}
	assert.Equal(t, 1, l.cutCount(), "expect one cut for one round trip's throttles, got %d", l.cutCount())
	rate := l.currentRate()
	// A request sent after the cut and throttled is a new signal.
	l.observe(t0.Add(5*time.Millisecond), t0.Add(8*time.Millisecond), true)
	assert.Equal(t, 2, l.cutCount())
	assert.LessOrEqual(t, l.currentRate(), rate)
	assert.GreaterOrEqual(t, l.currentRate(), 1.0, "never below MinRate")
}

func TestSendRateFirstThrottleBeforeAnySuccess(t *testing.T) {
	// 64 goroutines share an unlimited client and send at once. Throttles
	// are cheap to answer: the first comes back before any success.
	l := newSendRate(SendRateOptions{})
	for range 64 {
		require.Equal(t, time.Duration(0), reserve(l, t0))
	}
	l.observe(t0, t0.Add(500*time.Microsecond), true)
	// 63 sends not throttled, over at least one window (100 ms): 630/s.
	assert.InDelta(t, 0.95*630, l.currentRate(), 1e-6, "expect a cut to 95%% of the sends not throttled, got %.1f", l.currentRate())

	// 1000 goroutines on two cores: the first answer, a throttle, comes
	// back after two and a half windows. Every send still counts.
	l = newSendRate(SendRateOptions{})
	for range 1000 {
		l.reserve(t0)
	}
	l.observe(t0, t0.Add(250*time.Millisecond), true)
	assert.InDelta(t, 0.95*999/0.25, l.currentRate(), 1e-6, "expect a cut to 95%% of 999 sends in 250 ms, got %.1f", l.currentRate())
}

func TestSendRateCutReachesWaitingCallers(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100})
	places := make([]sendPlace, 10)
	for i := range places {
		places[i] = l.reserve(t0)
		wait, _ := l.delay(places[i], t0)
		require.Equal(t, time.Duration(i)*10*time.Millisecond, wait)
	}
	_, changed := l.delay(places[9], t0)
	// A throttle with no answer yet to estimate from: a cut to a quarter.
	now := t0.Add(time.Millisecond)
	l.observe(t0, now, true)
	require.Equal(t, 25.0, l.currentRate())
	assert.True(t, closed(changed), "expect the waiting callers woken by the cut")
	// 0.1 places went out in the millisecond at 100/s; the last of the ten
	// callers already waiting now waits for 8.9 places at 25/s, not at 100/s.
	wait, _ := l.delay(places[9], now)
	assert.InDelta(t, float64(356*time.Millisecond), float64(wait), float64(time.Microsecond), "got %v", wait)
	// And a new caller queues behind them.
	wait = reserve(l, now)
	assert.InDelta(t, float64(396*time.Millisecond), float64(wait), float64(time.Microsecond), "got %v", wait)
}

func TestSendRateCancelMovesTheQueueUp(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100})
	first, middle, last := l.reserve(t0), l.reserve(t0), l.reserve(t0)
	l.cancel(middle, t0)
	wait, _ := l.delay(last, t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the caller behind a cancelled place to move up")
	l.cancel(last, t0)
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0), "expect the last place given back to be taken again")
	l.cancel(first, t0) // already due: nothing to give back
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
}

func TestSendRateCutAgainWithinAWindowTakesAStep(t *testing.T) {
	l := newSendRate(SendRateOptions{})
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, time.Second, 2*time.Millisecond)
	cuts, rate := l.cutCount(), l.currentRate()
	// The capacity falls: a request sent after a cut is throttled again
	// a round trip later, while the measured rate still holds the answers
	// from before the fall.
	now := t0.Add(time.Second)
	l.observe(now, now.Add(2*time.Millisecond), true)
	first := l.currentRate()
	require.Equal(t, cuts+1, l.cutCount())
	now = now.Add(3 * time.Millisecond)
	l.observe(now, now.Add(2*time.Millisecond), true)
	// The measure alone, unchanged in 3 ms, would leave the rate as it is.
	assert.InDelta(t, 0.8*first, l.currentRate(), 1e-9, "expect the second cut to 80%% of %.0f (from %.0f)", first, rate)
}

func TestSendRateCutKeepsAQuarter(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 400})
	// A throttle with no success and no send counted yet: an estimate of zero.
	l.observe(t0, t0.Add(time.Millisecond), true)
	assert.Equal(t, 100.0, l.currentRate(), "expect a cut to a quarter at most, got %.1f", l.currentRate())
}

func TestSendRateRiseReachesWaitingCallers(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100})
	l.observe(t0, t0, true) // a throttle: from now on the limiter probes
	var last sendPlace
	for range 50 {
		last = l.reserve(t0) // 50 callers wait, the last until t0+490ms
	}
	for range 10 {
		l.observe(t0, t0.Add(150*time.Millisecond), false) // closes the throttled window
	}
	_, changed := l.delay(last, t0.Add(150*time.Millisecond))
	require.Equal(t, 100.0, l.currentRate())
	// Closing a window with no throttle and the rate in use raises it by 5%,
	// for the callers already waiting too: 25 places went out by t0+250ms,
	// and the last caller waits for the other 24 at 105/s.
	now := t0.Add(250 * time.Millisecond)
	wait, _ := l.delay(last, now)
	assert.InDelta(t, 105, l.currentRate(), 1e-9)
	assert.True(t, closed(changed), "expect the waiting callers woken by the rise")
	want := 24 * time.Second / 105
	assert.InDelta(t, float64(want), float64(wait), float64(time.Microsecond), "expect %v, got %v", want, wait)
}

func TestSendRateCutsToAcceptedRate(t *testing.T) {
	l := newSendRate(SendRateOptions{})
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	ok, throttled := run(l, s, t0, 2*time.Second, 2*time.Millisecond)
	assert.Greater(t, throttled, 0)
	// Over the last second the limiter settles near the capacity.
	ok2, throttled2 := run(l, s, t0.Add(2*time.Second), time.Second, 2*time.Millisecond)
	assert.InDelta(t, 500, ok2, 25, "expect ~500 successes a second, got %d", ok2)
	assert.Less(t, float64(throttled2)/float64(ok2), 0.10, "expect under 10%% throttled once settled, got %d/%d", throttled2, ok2)
	assert.InDelta(t, 500, l.currentRate(), 150)
	_ = ok
}

func TestSendRateRecoversWithinASecond(t *testing.T) {
	l := newSendRate(SendRateOptions{})
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, 2*time.Second, 2*time.Millisecond)
	s.capacity = 100 // the drop
	run(l, s, t0.Add(2*time.Second), 2*time.Second, 2*time.Millisecond)
	assert.Less(t, l.currentRate(), 150.0, "expect the rate near the dropped capacity, got %.0f", l.currentRate())

	s.capacity = 500 // the recovery, at 4 s
	recovered := time.Duration(-1)
	for w := range 30 {
		start := t0.Add(4*time.Second + time.Duration(w)*100*time.Millisecond)
		ok, _ := run(l, s, start, 100*time.Millisecond, 2*time.Millisecond)
		if ok >= 48 { // 95% of 50 a window
			recovered = time.Duration(w+1) * 100 * time.Millisecond
			break
		}
	}
	require.Positive(t, recovered, "expect the limiter to recover")
	assert.LessOrEqual(t, recovered, time.Second, "expect ≥95%% of capacity within 1 s of recovery, took %v", recovered)
}

func TestSendRateGrowsFromInitialRate(t *testing.T) {
	// A rate set below the capacity is probed upwards from the start,
	// without waiting for a throttle that would never come.
	l := newSendRate(SendRateOptions{InitialRate: 100})
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, time.Second, 2*time.Millisecond)
	ok, _ := run(l, s, t0.Add(time.Second), time.Second, 2*time.Millisecond)
	assert.InDelta(t, 500, ok, 25, "expect the capacity found within a second, got %d successes in the next", ok)
}

func TestSendRateDoesNotGrowWhenIdle(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 50})
	l.observe(t0, t0.Add(time.Millisecond), true) // learn that throttles happen
	require.Equal(t, 50.0, l.currentRate())
	rate := l.currentRate()
	for i := range 50 {
		now := t0.Add(time.Duration(i+1) * 100 * time.Millisecond)
		l.observe(now, now, false) // one success per window: far below the rate
	}
	assert.InDelta(t, rate, l.currentRate(), 1e-9, "expect an unused rate not to grow")
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
		places[i] = l.reserve(t0)
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
	extra := l.reserve(t0)
	l.cancel(extra, t0.Add(time.Millisecond)) // the last place: nobody behind
	l.cancel(l.reserve(t0), t0.Add(2*time.Millisecond))
	l.reserve(t0)
	l.cancel(l.reserve(t0), t0.Add(3*time.Millisecond))
	assert.False(t, closed(again), "expect one wake per window for give-backs")
}

func TestSendRateGiveBackTwiceChangesNothing(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100})
	l.reserve(t0)
	gone := l.reserve(t0)
	l.cancel(gone, t0)
	mine := l.reserve(t0)
	l.cancel(gone, t0) // a stale second give-back
	theirs := l.reserve(t0)
	a, _ := l.delay(mine, t0)
	b, _ := l.delay(theirs, t0)
	assert.Equal(t, 10*time.Millisecond, a)
	assert.Equal(t, 20*time.Millisecond, b, "expect two places, not one handed out twice")
}

func TestSendRateClockSteppedBack(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100})
	l.reserve(t0)
	next := l.reserve(t0)
	back := t0.Add(-time.Hour)
	wait, _ := l.delay(next, back)
	assert.Equal(t, 10*time.Millisecond, wait)
	wait, _ = l.delay(next, back.Add(10*time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the queue to go on from the new time, not stand still for an hour")
}

func TestSendRateZeroValueIsUnlimited(t *testing.T) {
	var l sendRate
	assert.True(t, math.IsInf(l.currentRate(), 1))
	first, second := l.reserve(t0), l.reserve(t0)
	l.observe(t0, t0.Add(time.Millisecond), true) // a cut: from now on it paces
	require.False(t, math.IsInf(l.currentRate(), 1))
	third := l.reserve(t0.Add(time.Millisecond))
	l.cancel(second, t0.Add(time.Millisecond))
	l.cancel(first, t0.Add(time.Millisecond))
	wait, _ := l.delay(third, t0.Add(time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the first place after the cut due at once")
}

func TestTinyMinRateStillPaces(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 1e-11, MinRate: 1e-11})
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, time.Duration(math.MaxInt64), reserve(l, t0), "expect the longest delay, not one overflowed to zero or below")
}
