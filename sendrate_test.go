package jitterretry_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
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
func run(l *jitterretry.SendRateLimiter, s *fakeService, start time.Time, d, rtt time.Duration) (ok, throttled int) {
	now := start
	for now.Before(start.Add(d)) {
		wait := reserve(l, now)
		if wait == 0 {
			wait = time.Millisecond // an unlimited client sends 1000/s here
		}
		now = now.Add(wait)
		admitted := s.admit(now)
		l.ObserveAt(now, now.Add(rtt), !admitted)
		if admitted {
			ok++
		} else {
			throttled++
		}
	}
	return ok, throttled
}

// reserve takes a place at now and returns its delay.
func reserve(l *jitterretry.SendRateLimiter, now time.Time) time.Duration {
	wait, _ := l.DelayAt(l.ReserveAt(now), now)
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
	l := jitterretry.NewSendRateLimiter()
	assert.True(t, math.IsInf(l.Rate(), 1), "unlimited until the first throttle")
	// 64 goroutines sent at t0 and all come back throttled a round trip later.
	for i := range 64 {
		l.ObserveAt(t0, t0.Add(3*time.Millisecond+time.Duration(i)*time.Microsecond), true)
	}
	assert.Equal(t, 1, l.Cuts(), "expect one cut for one round trip's throttles, got %d", l.Cuts())
	rate := l.Rate()
	// A request sent after the cut and throttled is a new signal.
	l.ObserveAt(t0.Add(5*time.Millisecond), t0.Add(8*time.Millisecond), true)
	assert.Equal(t, 2, l.Cuts())
	assert.LessOrEqual(t, l.Rate(), rate)
	assert.GreaterOrEqual(t, l.Rate(), 1.0, "never below MinRate")
}

func TestSendRateFirstThrottleBeforeAnySuccess(t *testing.T) {
	// 64 goroutines share an unlimited client and send at once. Throttles
	// are cheap to answer: the first comes back before any success.
	l := jitterretry.NewSendRateLimiter()
	for range 64 {
		require.Equal(t, time.Duration(0), reserve(l, t0))
	}
	l.ObserveAt(t0, t0.Add(500*time.Microsecond), true)
	// 63 sends not throttled, over at least one window (100 ms): 630/s.
	assert.InDelta(t, 0.95*630, l.Rate(), 1e-6, "expect a cut to 95%% of the sends not throttled, got %.1f", l.Rate())

	// 1000 goroutines on two cores: the first answer, a throttle, comes
	// back after two and a half windows. Every send still counts.
	l = jitterretry.NewSendRateLimiter()
	for range 1000 {
		l.ReserveAt(t0)
	}
	l.ObserveAt(t0, t0.Add(250*time.Millisecond), true)
	assert.InDelta(t, 0.95*999/0.25, l.Rate(), 1e-6, "expect a cut to 95%% of 999 sends in 250 ms, got %.1f", l.Rate())
}

func TestSendRateCutReachesWaitingCallers(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 100 })
	places := make([]jitterretry.SendReservation, 10)
	for i := range places {
		places[i] = l.ReserveAt(t0)
		wait, _ := l.DelayAt(places[i], t0)
		require.Equal(t, time.Duration(i)*10*time.Millisecond, wait)
	}
	_, changed := l.DelayAt(places[9], t0)
	// A throttle with no answer yet to estimate from: a cut to a quarter.
	now := t0.Add(time.Millisecond)
	l.ObserveAt(t0, now, true)
	require.Equal(t, 25.0, l.Rate())
	assert.True(t, closed(changed), "expect the waiting callers woken by the cut")
	// 0.1 places went out in the millisecond at 100/s; the last of the ten
	// callers already waiting now waits for 8.9 places at 25/s, not at 100/s.
	wait, _ := l.DelayAt(places[9], now)
	assert.InDelta(t, float64(356*time.Millisecond), float64(wait), float64(time.Microsecond), "got %v", wait)
	// And a new caller queues behind them.
	wait = reserve(l, now)
	assert.InDelta(t, float64(396*time.Millisecond), float64(wait), float64(time.Microsecond), "got %v", wait)
}

func TestSendRateCancelMovesTheQueueUp(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 100 })
	first, middle, last := l.ReserveAt(t0), l.ReserveAt(t0), l.ReserveAt(t0)
	l.CancelAt(middle, t0)
	wait, _ := l.DelayAt(last, t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the caller behind a cancelled place to move up")
	l.CancelAt(last, t0)
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0), "expect the last place given back to be taken again")
	l.CancelAt(first, t0) // already due: nothing to give back
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
}

func TestSendRateCutAgainWithinAWindowTakesAStep(t *testing.T) {
	l := jitterretry.NewSendRateLimiter()
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, time.Second, 2*time.Millisecond)
	cuts, rate := l.Cuts(), l.Rate()
	// The capacity falls: a request sent after a cut is throttled again
	// a round trip later, while the measured rate still holds the answers
	// from before the fall.
	now := t0.Add(time.Second)
	l.ObserveAt(now, now.Add(2*time.Millisecond), true)
	first := l.Rate()
	require.Equal(t, cuts+1, l.Cuts())
	now = now.Add(3 * time.Millisecond)
	l.ObserveAt(now, now.Add(2*time.Millisecond), true)
	// The measure alone, unchanged in 3 ms, would leave the rate as it is.
	assert.InDelta(t, 0.8*first, l.Rate(), 1e-9, "expect the second cut to 80%% of %.0f (from %.0f)", first, rate)
}

func TestSendRateCutKeepsAQuarter(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 400 })
	// A throttle with no success and no send counted yet: an estimate of zero.
	l.ObserveAt(t0, t0.Add(time.Millisecond), true)
	assert.Equal(t, 100.0, l.Rate(), "expect a cut to a quarter at most, got %.1f", l.Rate())
}

func TestSendRateRiseReachesWaitingCallers(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate = 100, 100 })
	l.ObserveAt(t0, t0, true) // a throttle: from now on the limiter probes
	var last jitterretry.SendReservation
	for range 50 {
		last = l.ReserveAt(t0) // 50 callers wait, the last until t0+490ms
	}
	for range 10 {
		l.ObserveAt(t0, t0.Add(150*time.Millisecond), false) // closes the throttled window
	}
	_, changed := l.DelayAt(last, t0.Add(150*time.Millisecond))
	require.Equal(t, 100.0, l.Rate())
	// Closing a window with no throttle and the rate in use raises it by 5%,
	// for the callers already waiting too: 25 places went out by t0+250ms,
	// and the last caller waits for the other 24 at 105/s.
	now := t0.Add(250 * time.Millisecond)
	wait, _ := l.DelayAt(last, now)
	assert.InDelta(t, 105, l.Rate(), 1e-9)
	assert.True(t, closed(changed), "expect the waiting callers woken by the rise")
	want := 24 * time.Second / 105
	assert.InDelta(t, float64(want), float64(wait), float64(time.Microsecond), "expect %v, got %v", want, wait)
}

func TestSendRateCutsToAcceptedRate(t *testing.T) {
	l := jitterretry.NewSendRateLimiter()
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	ok, throttled := run(l, s, t0, 2*time.Second, 2*time.Millisecond)
	assert.Greater(t, throttled, 0)
	// Over the last second the limiter settles near the capacity.
	ok2, throttled2 := run(l, s, t0.Add(2*time.Second), time.Second, 2*time.Millisecond)
	assert.InDelta(t, 500, ok2, 25, "expect ~500 successes a second, got %d", ok2)
	assert.Less(t, float64(throttled2)/float64(ok2), 0.10, "expect under 10%% throttled once settled, got %d/%d", throttled2, ok2)
	assert.InDelta(t, 500, l.Rate(), 150)
	_ = ok
}

func TestSendRateRecoversWithinASecond(t *testing.T) {
	l := jitterretry.NewSendRateLimiter()
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, 2*time.Second, 2*time.Millisecond)
	s.capacity = 100 // the drop
	run(l, s, t0.Add(2*time.Second), 2*time.Second, 2*time.Millisecond)
	assert.Less(t, l.Rate(), 150.0, "expect the rate near the dropped capacity, got %.0f", l.Rate())

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
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 100 })
	s := &fakeService{capacity: 500, burst: 50, tokens: 50, last: t0}
	run(l, s, t0, time.Second, 2*time.Millisecond)
	ok, _ := run(l, s, t0.Add(time.Second), time.Second, 2*time.Millisecond)
	assert.InDelta(t, 500, ok, 25, "expect the capacity found within a second, got %d successes in the next", ok)
}

func TestSendRateDoesNotGrowWhenIdle(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate = 100, 50 })
	l.ObserveAt(t0, t0.Add(time.Millisecond), true) // learn that throttles happen
	require.Equal(t, 50.0, l.Rate())
	rate := l.Rate()
	for i := range 50 {
		now := t0.Add(time.Duration(i+1) * 100 * time.Millisecond)
		l.ObserveAt(now, now, false) // one success per window: far below the rate
	}
	assert.InDelta(t, rate, l.Rate(), 1e-9, "expect an unused rate not to grow")
}

func TestSendRateSpacesSends(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 100 })
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, 10*time.Millisecond, reserve(l, t0))
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0))
	assert.Equal(t, time.Duration(0), reserve(l, t0.Add(time.Second)), "no debt carried over an idle second")
}

func TestSendRateDeadlineAndCancel(t *testing.T) {
	var waits []jitterretry.SendWaitEvent
	var gaveUp []jitterretry.GiveUpReason
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 1, MinRate: 1} // one send a second
		o.OnSendWait = func(e jitterretry.SendWaitEvent) { waits = append(waits, e) }
		o.OnGiveUp = func(e jitterretry.GiveUpEvent) { gaveUp = append(gaveUp, e.Reason) }
	})
	_, err := r.GetAttemptToken(context.Background())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.GetAttemptToken(ctx)
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason)
	assert.NoError(t, ctx.Err(), "expect to give up before the deadline, not at it")

	// The caller that gave up gave its place back: the next one waits about
	// a second for its turn, not two.
	for range 2 {
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() { time.Sleep(10 * time.Millisecond); cancel2() }()
		_, err = r.GetAttemptToken(ctx2)
		require.ErrorAs(t, err, &gu)
		assert.Equal(t, jitterretry.GiveUpCanceled, gu.Reason)
	}
	require.Len(t, waits, 2, "expect each wait visible to the hook")
	assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpDeadline, jitterretry.GiveUpCanceled, jitterretry.GiveUpCanceled}, gaveUp,
		"expect every give-up visible to OnGiveUp")
	for i, w := range waits {
		assert.Greater(t, w.Wait, 500*time.Millisecond)
		assert.Less(t, w.Wait, 1500*time.Millisecond, "wait %d: expect the places given back skipped, got %v", i, w.Wait)
	}
}

func TestSendRateGiveBackWakesTheCallersBehind(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate, o.MaxRate = 100, 100, 100 })
	places := make([]jitterretry.SendReservation, 12)
	for i := range places {
		places[i] = l.ReserveAt(t0)
	}
	stale, woken := l.DelayAt(places[11], t0)
	require.Equal(t, 110*time.Millisecond, stale)
	for _, p := range places[1:11] {
		l.CancelAt(p, t0)
	}
	assert.True(t, closed(woken), "expect the caller behind the places given back woken")
	wait, again := l.DelayAt(places[11], t0)
	assert.Equal(t, 10*time.Millisecond, wait, "expect it next after the first place")
	assert.Equal(t, 20*time.Millisecond, reserve(l, t0), "expect a newcomer behind it, not ahead")

	// More give-backs within the window wake nobody: the woken callers ask
	// again within a window anyway, and a burst of n give-ups must not wake
	// the others n times.
	extra := l.ReserveAt(t0)
	l.CancelAt(extra, t0.Add(time.Millisecond)) // the last place: nobody behind
	l.CancelAt(l.ReserveAt(t0), t0.Add(2*time.Millisecond))
	l.ReserveAt(t0)
	l.CancelAt(l.ReserveAt(t0), t0.Add(3*time.Millisecond))
	assert.False(t, closed(again), "expect one wake per window for give-backs")
}

func TestSendRateGiveBackTwiceChangesNothing(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate, o.MaxRate = 100, 100, 100 })
	l.ReserveAt(t0)
	gone := l.ReserveAt(t0)
	l.CancelAt(gone, t0)
	mine := l.ReserveAt(t0)
	l.CancelAt(gone, t0) // a stale second give-back
	theirs := l.ReserveAt(t0)
	a, _ := l.DelayAt(mine, t0)
	b, _ := l.DelayAt(theirs, t0)
	assert.Equal(t, 10*time.Millisecond, a)
	assert.Equal(t, 20*time.Millisecond, b, "expect two places, not one handed out twice")
}

func TestSendRateClockSteppedBack(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate, o.MaxRate = 100, 100, 100 })
	l.ReserveAt(t0)
	next := l.ReserveAt(t0)
	back := t0.Add(-time.Hour)
	wait, _ := l.DelayAt(next, back)
	assert.Equal(t, 10*time.Millisecond, wait)
	wait, _ = l.DelayAt(next, back.Add(10*time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the queue to go on from the new time, not stand still for an hour")
}

func TestSendRatePerPartition(t *testing.T) {
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{}
		o.PartitionKey = jitterretry.PartitionFromContext
	})
	hot := newScriptServer(t, throttle, ok)
	cold := newScriptServer(t, ok)
	require.NoError(t, putItem(jitterretry.WithPartition(context.Background(), "hot"), newClient(hot.URL, r)))
	require.NoError(t, putItem(jitterretry.WithPartition(context.Background(), "cold"), newClient(cold.URL, r)))
	hotRate, ok1 := r.SendRateIn("hot")
	coldRate, ok2 := r.SendRateIn("cold")
	require.True(t, ok1)
	require.True(t, ok2)
	assert.False(t, math.IsInf(hotRate, 1), "expect the throttled partition to be limited")
	assert.True(t, math.IsInf(coldRate, 1), "expect the other partition untouched")
}

func TestSendRateZeroValueIsUnlimited(t *testing.T) {
	var l jitterretry.SendRateLimiter
	assert.True(t, math.IsInf(l.Rate(), 1))
	first, second := l.ReserveAt(t0), l.ReserveAt(t0)
	l.ObserveAt(t0, t0.Add(time.Millisecond), true) // a cut: from now on it paces
	require.False(t, math.IsInf(l.Rate(), 1))
	third := l.ReserveAt(t0.Add(time.Millisecond))
	l.CancelAt(second, t0.Add(time.Millisecond))
	l.CancelAt(first, t0.Add(time.Millisecond))
	wait, _ := l.DelayAt(third, t0.Add(time.Millisecond))
	assert.Equal(t, time.Duration(0), wait, "expect the first place after the cut due at once")
}

func TestSendRateSlowCeilingWithSlowerFloor(t *testing.T) {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{MinRate: 0.1, MaxRate: 0.5}
	})
	assert.NoError(t, r.Err(), "expect a ceiling below 1/s valid with a floor below it")
}

func TestSendRateOptionsValidated(t *testing.T) {
	for name, sr := range map[string]jitterretry.SendRateOptions{
		"negative initial":      {InitialRate: -1},
		"NaN min":               {MinRate: math.NaN()},
		"max below min":         {MinRate: 10, MaxRate: 5},
		"max below default min": {MaxRate: 0.5},
		"cut above one":         {CutTo: 1.5},
		"negative window":       {Window: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(func(o *jitterretry.Options) { o.SendRate = &sr })
			var oe *jitterretry.OptionsError
			assert.ErrorAs(t, r.Err(), &oe)
		})
	}
}

func TestEmptyBudgetBacksOffBeforeFailing(t *testing.T) {
	for name, failFast := range map[string]bool{"default backs off": false, "fail fast": true} {
		t.Run(name, func(t *testing.T) {
			var backoffs atomic.Int32
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Bucket.Capacity = 10 // a 14-token retry is refused at once
				o.FailFastOnEmptyBudget = failFast
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
					backoffs.Add(1)
					return time.Millisecond, nil
				})
			})
			srv := newScriptServer(t, serverErr)
			err := putItem(context.Background(), newClient(srv.URL, r))
			assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
			assert.Equal(t, 1, srv.Calls())
			// The refused retry never asks for a delay: only the wait before
			// the budget error does.
			want := int32(1)
			if failFast {
				want = 0
			}
			assert.Equal(t, want, backoffs.Load(), "expect backoff=%v before the budget error", !failFast)
		})
	}
}

func TestTinyMinRateStillPaces(t *testing.T) {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate, o.MinRate = 1e-11, 1e-11 })
	assert.Equal(t, time.Duration(0), reserve(l, t0))
	assert.Equal(t, time.Duration(math.MaxInt64), reserve(l, t0), "expect the longest delay, not one overflowed to zero or below")
}

// Many goroutines queue on one limiter while throttles cut its rate and quiet
// windows raise it: every attempt gets its turn, none is lost or stuck, and
// the race detector sees the queue's state under its lock.
func TestSendRateManyWaitersUnderCuts(t *testing.T) {
	var waits atomic.Int64
	r := jitterretry.New(func(o *jitterretry.Options) {
		// Between 1000/s and 4000/s: the 800 attempts take under a second.
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 4000, MinRate: 1000, MaxRate: 4000}
		o.OnSendWait = func(jitterretry.SendWaitEvent) { waits.Add(1) }
	})
	throttle := &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sent atomic.Int64
	var wg sync.WaitGroup
	for g := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				release, err := r.GetAttemptToken(ctx)
				if !assert.NoError(t, err) {
					return
				}
				sent.Add(1)
				var outcome error
				if (g+i)%7 == 0 {
					outcome = throttle
				}
				_ = release(outcome)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(800), sent.Load())
	assert.Positive(t, waits.Load(), "expect callers to have queued")
	rate, ok := r.SendRateIn("")
	require.True(t, ok)
	assert.GreaterOrEqual(t, rate, 1000.0)
	assert.LessOrEqual(t, rate, 4000.0)
}
