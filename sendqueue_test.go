package jitterretry

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1_000_000, 0)

// setClock makes l's clock read now until the returned restore gives l its
// own clock back: the tests drive the limiter from one goroutine at the
// times they choose, and a limiter a retryer made goes back to the
// retryer's clock.
func setClock(l *sendRate, now time.Time) (restore func()) {
	own := l.clock
	l.clock = func() time.Time { return now }
	return func() { l.clock = own }
}

// The limiter's methods at a time the test chooses; every argument is
// evaluated before the clock is set.

func reserveAt(l *sendRate, now time.Time) (sendPlace, time.Duration, <-chan struct{}) {
	defer setClock(l, now)()
	p, wait, changed, _ := l.reserve(nil, false)
	return p, wait, changed
}

func delayAt(l *sendRate, p sendPlace, now time.Time) (time.Duration, <-chan struct{}) {
	defer setClock(l, now)()
	return l.delay(p)
}

func cancelAt(l *sendRate, p sendPlace, now time.Time) {
	defer setClock(l, now)()
	l.cancel(p)
}

func observeAt(l *sendRate, now time.Time, throttled bool, rtt time.Duration) {
	defer setClock(l, now)()
	l.observe(throttled, rtt)
}

func forgettableAt(l *sendRate, now time.Time) bool {
	defer setClock(l, now)()
	return l.forgettable()
}

// reserve takes a place at now and returns its delay.
func reserve(l *sendRate, now time.Time) time.Duration {
	_, wait, _ := reserveAt(l, now)
	return wait
}

// placeAt takes a place at now and returns it.
func placeAt(l *sendRate, now time.Time) sendPlace {
	p, _, _ := reserveAt(l, now)
	return p
}

// The queue: first come, first served, places given back stepped over.

func TestSendQueueCancelMovesTheQueueUp(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100}, nil)
	first, middle, last := placeAt(l, t0), placeAt(l, t0), placeAt(l, t0)
	cancelAt(l, middle, t0)
	wait, _ := delayAt(l, last, t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the caller behind a cancelled place to move up")
	cancelAt(l, last, t0)
	again, wait, _ := reserveAt(l, t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the last place given back to be taken again")
	cancelAt(l, first, t0) // due, not sent: its turn goes to the place waiting
	wait, _ = delayAt(l, again, t0)
	assert.Zero(t, wait)
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0))
}

func TestSendQueueSpacesSends(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100}, nil)
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0))
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
	assert.Equal(t, time.Duration(0), reserve(l, t0.Add(time.Second)), "no debt carried over an idle second")
}

// retryPlaceAt takes, at now, the place of a retry the limiter expected.
func retryPlaceAt(l *sendRate, now time.Time) sendPlace {
	done := make(chan struct{})
	func() {
		defer setClock(l, now)()
		l.expectRetry(done, 0, failedAttempt{})
	}()
	defer setClock(l, now)()
	p, _, _, _ := l.reserve(done, false)
	return p
}

// The retries' line: served before the first attempts', at the same rate.

func TestSendQueueServesRetriesFirst(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	placeAt(l, t0) // due at once
	firsts := []sendPlace{placeAt(l, t0), placeAt(l, t0), placeAt(l, t0)}
	soon := t0.Add(5 * time.Millisecond)
	retry := retryPlaceAt(l, soon)
	assert.True(t, retry.retry)
	wait, _ := delayAt(l, retry, soon)
	assert.Equal(t, 5*time.Millisecond, wait, "expect the retry at the next turn, not at once: the turn in progress is the rate's")
	later := retryPlaceAt(l, soon)
	wait, _ = delayAt(l, later, soon)
	assert.Equal(t, 15*time.Millisecond, wait, "expect retries first come, first served")
	for i, p := range firsts {
		wait, _ = delayAt(l, p, soon)
		assert.Equal(t, time.Duration(i+3)*10*time.Millisecond-5*time.Millisecond, wait, "expect first attempt %d two turns later", i)
	}

	// A retry given back moves the first attempts up again, and wakes them.
	_, woken := delayAt(l, firsts[0], soon)
	cancelAt(l, retry, soon)
	assert.True(t, closed(woken))
	wait, _ = delayAt(l, firsts[0], soon)
	assert.Equal(t, 15*time.Millisecond, wait)

	// The turns come due in that order.
	at := t0.Add(15 * time.Millisecond)
	wait, _ = delayAt(l, later, at)
	assert.Equal(t, time.Duration(0), wait)
	wait, _ = delayAt(l, firsts[0], at)
	assert.Equal(t, 5*time.Millisecond, wait)
}

func TestSendQueueRetryFindsAFreeTurn(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	placeAt(l, t0)
	wait, _ := delayAt(l, retryPlaceAt(l, t0.Add(time.Second)), t0.Add(time.Second))
	assert.Equal(t, time.Duration(0), wait, "expect a retry finding the queue empty sent at once")
	wait, _ = delayAt(l, retryPlaceAt(l, t0.Add(time.Second)), t0.Add(time.Second))
	assert.Equal(t, 10*time.Millisecond, wait, "expect the next a turn later")
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0.Add(time.Second)))
}

func TestSendQueueUnlimitedSendsRetriesAtOnce(t *testing.T) {
	l := newSendRate(SendRateOptions{}, nil)
	placeAt(l, t0)
	wait, _ := delayAt(l, retryPlaceAt(l, t0), t0)
	assert.Equal(t, time.Duration(0), wait)
	assert.Equal(t, time.Duration(0), reserve(l, t0))
}

func TestSendQueueGiveBackWakesTheCallersBehind(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	places := make([]sendPlace, 10)
	for i := range places {
		places[i] = placeAt(l, t0)
	}
	stale, woken := delayAt(l, places[9], t0)
	require.Equal(t, 90*time.Millisecond, stale)
	for range 10 {
		placeAt(l, t0)
	}
	twoBack := placeAt(l, t0)
	_, near := delayAt(l, twoBack, t0) // 200 ms: within two windows
	placeAt(l, t0)
	farPlace := placeAt(l, t0)
	_, far := delayAt(l, farPlace, t0) // 220 ms: one give-back leaves it over two windows back
	for _, p := range places[1:9] {
		cancelAt(l, p, t0)
	}
	assert.True(t, closed(woken), "expect the caller behind the places given back woken")
	assert.True(t, closed(near), "expect a caller two windows back woken: a stream of give-backs may bring its turn before it asks again")
	assert.False(t, closed(far), "expect a caller over two windows back left to ask again within a window")
	wait, again := delayAt(l, places[9], t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect it next after the first place")
	wait, _ = delayAt(l, farPlace, t0)
	assert.Equal(t, 140*time.Millisecond, wait)
	assert.Equal(t, 150*time.Millisecond, reserve(l, t0), "expect a newcomer behind them, not ahead")

	// More give-backs within giveBackWake wake nobody: a burst of n
	// give-ups must not wake the others n times.
	soon := t0.Add(giveBackWake - time.Millisecond)
	ahead := placeAt(l, soon)
	placeAt(l, soon) // a caller behind it
	cancelAt(l, ahead, soon)
	assert.False(t, closed(again), "expect one wake in giveBackWake for give-backs")

	// giveBackWake after the wake, a give-back wakes them again (once a
	// window: helper-251 found sends bunched above the rate under a
	// stream of give-backs).
	later := t0.Add(giveBackWake)
	ahead = placeAt(l, later)
	behind := placeAt(l, later)
	_, woken = delayAt(l, behind, later)
	cancelAt(l, ahead, later)
	assert.True(t, closed(woken), "expect a give-back giveBackWake later to wake the callers behind")
}

// TestSendQueueGiveBackWakesTheNextTurnAtALowRate: at 5 a second a place
// 250 ms back is one place given back from its turn: woken, not left to
// its next look (helper-170).
func TestSendQueueGiveBackWakesTheNextTurnAtALowRate(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 5, MinRate: 5, MaxRate: 5}, nil)
	placeAt(l, t0) // due at once
	ahead, behind := placeAt(l, t0), placeAt(l, t0)
	wait, woken := delayAt(l, behind, t0.Add(150*time.Millisecond))
	require.Equal(t, 250*time.Millisecond, wait)
	cancelAt(l, ahead, t0.Add(150*time.Millisecond))
	assert.True(t, closed(woken), "expect the caller behind woken")
	wait, _ = delayAt(l, behind, t0.Add(150*time.Millisecond))
	assert.Equal(t, 50*time.Millisecond, wait)
}

func TestSendQueueGiveBackTwiceChangesNothing(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	placeAt(l, t0)
	gone := placeAt(l, t0)
	cancelAt(l, gone, t0)
	mine := placeAt(l, t0)
	cancelAt(l, gone, t0) // a stale second give-back
	theirs := placeAt(l, t0)
	a, _ := delayAt(l, mine, t0)
	b, _ := delayAt(l, theirs, t0)
	assert.Equal(t, 10*time.Millisecond, a)
	assert.Equal(t, 20*time.Millisecond, b, "expect two places, not one handed out twice")
}

func TestSendQueueClockSteppedBack(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	placeAt(l, t0)
	next := placeAt(l, t0)
	back := t0.Add(-time.Hour)
	wait, _ := delayAt(l, next, back)
	assert.Equal(t, 10*time.Millisecond, wait)
	delayAt(l, next, back.Add(stepSpan/2))
	delayAt(l, next, back.Add(stepSpan)) // the step is taken for good
	wait, _ = delayAt(l, next, back.Add(stepSpan+maxClockStall+10*time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the queue to go on from the new time once the step is taken, not stand still for an hour")
}

// TestSendQueueStartsOverAMinuteAfterItsLastPlaceCameDue: a minute with
// neither sends nor answers starts the limiter over, once no place waits;
// the last place was counted as waiting for another 1/rate after it came
// due, 500 s at 0.002 requests a second (helper-110).
func TestSendQueueStartsOverAMinuteAfterItsLastPlaceCameDue(t *testing.T) {
	l := newSendRate(SendRateOptions{MinRate: 0.001}, nil)
	func() {
		defer setClock(l, t0)()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.syncLocked()
		l.setRateLocked(0.002)
	}()
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	require.Equal(t, 500*time.Second, reserve(l, t0))
	idle := t0.Add(500*time.Second + idleReset + time.Second)
	assert.True(t, forgettableAt(l, idle), "expect an idle limiter a minute after its last place came due")
	assert.Equal(t, time.Duration(0), reserve(l, idle))
	assert.Equal(t, time.Duration(0), reserve(l, idle), "expect the limiter started over, unlimited")
}

// TestSendQueueJitteryClockKeepsItsRate: a clock whose readings jitter back
// and forth (an offset re-synced from a time server) counted every return
// forward again after going on from each step back: jittering by 20 ms,
// it ran the control five times faster than the clock, and a limiter fixed
// at 100 requests a second sent 501 in one (helper-110). Places not due at
// once are given back, so each reading asks for one send.
func TestSendQueueJitteryClockKeepsItsRate(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 100, MinRate: 100, MaxRate: 100}, nil)
	sent := 0
	for ms := range 1000 {
		reading := t0.Add(time.Duration(ms)*time.Millisecond + time.Duration(ms%2)*20*time.Millisecond)
		if p, wait, _ := reserveAt(l, reading); wait == 0 {
			sent++
		} else {
			cancelAt(l, p, reading)
		}
	}
	assert.InDelta(t, 100, sent, 3, "expect 100 sends in a second of the clock at 100/s")
}

// TestSendQueueCrowdKeepsItsClock: callers that read the clock before they
// took the limiter's lock arrived with readings out of order, behind the
// latest by as long as the lock took, and each was taken for a clock
// stepped back: the control's time ran ahead by their sum (5 s in 0.2 s
// at K = 1000 in throttlebench), a window seemed seconds long, and a cut
// sized on it took 515/s to 18/s. The limiter reads its clock under its
// lock.
func TestSendQueueCrowdKeepsItsClock(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 1e6}, nil)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				p, _, _, _ := l.reserve(nil, false)
				l.observe(i%10 == 0, time.Millisecond)
				l.cancel(p)
			}
		}()
	}
	wg.Wait()
	after := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.False(t, l.steady.latest.After(after), "expect the control's time no later than the clock, got %v ahead", l.steady.latest.Sub(after))
	assert.Zero(t, l.steady.skew, "expect no step back seen on a monotonic clock")
}

func TestTinyMinRateStillPaces(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 1e-11, MinRate: 1e-11}, nil)
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, time.Duration(math.MaxInt64), reserve(l, t0), "expect the longest delay, not one overflowed to zero or below")
}

// A caller whose context ends as its turn comes gives back a place the
// queue made due: its turn goes on to the next place waiting, not lost.

func TestSendQueueDueTurnGivenBackGoesToTheNextPlace(t *testing.T) {
	l := newSendRate(SendRateOptions{InitialRate: 10, MinRate: 10, MaxRate: 10}, nil)
	placeAt(l, t0) // due at once
	quitter, next := placeAt(l, t0), placeAt(l, t0)
	turn := t0.Add(100 * time.Millisecond)
	wait, woken := delayAt(l, next, turn) // the quitter's turn came
	require.Equal(t, 100*time.Millisecond, wait)
	cancelAt(l, quitter, turn)
	assert.True(t, closed(woken), "expect the next place's caller woken")
	wait, _ = delayAt(l, next, turn)
	assert.Zero(t, wait, "expect the quitter's turn handed to the next place")
	assert.Equal(t, 100*time.Millisecond, reserve(l, turn), "expect the newcomer at the next turn of the rate")
}
