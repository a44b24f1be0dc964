package jitterretry_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

func TestTokenBucketBounds(t *testing.T) {
	b := jitterretry.NewTokenBucket(500, 0)
	assert.Equal(t, uint(500), b.Remaining())
	require.NoError(t, b.AddTokens(math.MaxUint))
	assert.Equal(t, uint(500), b.Remaining(), "expect never more than the capacity")

	release, err := b.GetToken(context.Background(), 500)
	require.NoError(t, err)
	assert.Equal(t, uint(0), b.Remaining())
	_, err = b.GetToken(context.Background(), 1)
	var q ratelimit.QuotaExceededError
	require.ErrorAs(t, err, &q)
	assert.Equal(t, ratelimit.QuotaExceededError{Available: 0, Requested: 1}, q)
	assert.Contains(t, err.Error(), "retry quota exceeded", "expect the SDK's wording")
	require.NoError(t, release())
	assert.Equal(t, uint(500), b.Remaining())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.GetToken(ctx, 1)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, uint(500), b.Remaining(), "expect a cancelled caller to take nothing")

	empty := jitterretry.NewTokenBucket(0, math.NaN())
	_, err = empty.GetToken(context.Background(), 0)
	assert.NoError(t, err, "expect a free retry from an empty bucket, as the SDK's")
	_, err = empty.GetToken(context.Background(), 1)
	assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
}

// TestBucketRefillOnTheRetryersClock: the refill reads Options.Clock.
func TestBucketRefillOnTheRetryersClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.BucketRefill, o.RetryCost = 100, 10, 50
		o.Clock = clock
	})
	for range 2 {
		_, err := r.GetRetryToken(context.Background(), serverErr())
		require.NoError(t, err)
	}
	assert.Equal(t, uint(0), r.Remaining())
	advance(250 * time.Millisecond)
	assert.Equal(t, uint(2), r.Remaining(), "expect 2.5 tokens refilled, 2 whole")
	advance(250 * time.Millisecond)
	assert.Equal(t, uint(5), r.Remaining(), "expect the fraction carried over")
	advance(time.Hour)
	assert.Equal(t, uint(100), r.Remaining(), "expect the refill to stop at the capacity")
	advance(-2 * time.Hour)
	assert.Equal(t, uint(100), r.Remaining(), "expect a clock stepped back to refill nothing and break nothing")
}

// TestBucketRefillFollowsAJitteryClock: a clock whose readings jitter
// back and forth by 20 ms refilled at every return forward as if that
// much time had passed again: the whole bucket of 100 tokens in a second
// that refills 10 (helper-110's finding for the limiter, which shares the
// clock handling).
func TestBucketRefillFollowsAJitteryClock(t *testing.T) {
	var mu sync.Mutex
	ms := 0
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Unix(1_000_000, 0).Add(time.Duration(ms)*time.Millisecond + time.Duration(ms%2)*20*time.Millisecond)
	}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.BucketRefill, o.RetryCost = 100, 10, 100
		o.Clock = clock
	})
	_, err := r.GetRetryToken(context.Background(), serverErr())
	require.NoError(t, err)
	require.Equal(t, uint(0), r.Remaining())
	for range 1000 { // a second of the clock, read every millisecond
		mu.Lock()
		ms++
		mu.Unlock()
		r.Remaining()
	}
	assert.InDelta(t, 10, r.Remaining(), 1, "expect a second's refill at 10 tokens a second")

	// One reading an hour back, then the clock's time again: refilled
	// the whole bucket when the step was taken at once (helper-111).
	glitch := false
	r = jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.BucketRefill, o.RetryCost = 100, 10, 100
		o.Clock = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			if glitch {
				return time.Unix(1_000_000, 0).Add(-time.Hour)
			}
			return time.Unix(1_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
		}
	})
	_, err = r.GetRetryToken(context.Background(), serverErr())
	require.NoError(t, err)
	mu.Lock()
	glitch = true
	mu.Unlock()
	r.Remaining()
	mu.Lock()
	glitch, ms = false, ms+1
	mu.Unlock()
	assert.Equal(t, uint(0), r.Remaining(), "expect a millisecond's refill after one reading an hour back")
}

// TestInfiniteRefillKeepsTheBucketFullOnAStillClock: a refill of +Inf
// keeps the bucket full, as Options.BucketRefill says, also when the clock
// reads the same time for every retry (a test's fixed Clock, a coarse
// clock's tick): the refill waited for the clock to move, and the third
// retry of a bucket of two was refused for the budget (helper-138).
func TestInfiniteRefillKeepsTheBucketFullOnAStillClock(t *testing.T) {
	still := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.RetryCost, o.ThrottlingRetryCost = 10, 5, 5
		o.BucketRefill = math.Inf(1)
		o.FailFastOnEmptyBudget = true
		o.Clock = func() time.Time { return still }
	})
	require.NoError(t, r.Err())
	for i := range 4 {
		_, err := r.GetRetryToken(context.Background(), throttleErr())
		require.NoError(t, err, "retry %d: expect the bucket full", i+1)
	}
	assert.Equal(t, uint(10), r.Remaining(), "expect the bucket full")
}

// TestBucketRefillKeepsItsFractionOnACoarseClock: a clock that ticks in
// 1 ms steps, read twice a tick: the second reading, with nothing elapsed,
// threw the fraction away, and a second at 100/s refilled nothing
// (helper-59).
func TestBucketRefillKeepsItsFractionOnACoarseClock(t *testing.T) {
	for _, reads := range []int{1, 2} {
		var mu sync.Mutex
		now := time.Unix(1_000_000, 0)
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.BucketCapacity, o.BucketRefill, o.RetryCost = 100, 100, 100
			o.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		})
		_, err := r.GetRetryToken(context.Background(), serverErr())
		require.NoError(t, err)
		require.Equal(t, uint(0), r.Remaining())
		for range 500 {
			mu.Lock()
			now = now.Add(time.Millisecond)
			mu.Unlock()
			for range reads {
				_ = r.Remaining()
			}
		}
		assert.InDelta(t, 50, int(r.Remaining()), 1, "%d read(s) a tick: expect half a second at 100/s", reads)
	}
}

// TestTokenBucketConservesTokensUnderContention: no lost refund and no
// double one: what is left is the capacity less what was taken and kept.
func TestTokenBucketConservesTokensUnderContention(t *testing.T) {
	for name, refill := range map[string]float64{"no refill": 0, "with refill": 1e-9} {
		t.Run(name, func(t *testing.T) {
			const capacity = 100_000
			b := jitterretry.NewTokenBucket(capacity, refill)
			var kept, refused atomic.Int64
			var wg sync.WaitGroup
			for g := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 500 {
						cost := uint(1 + (g+i)%7)
						release, err := b.GetToken(context.Background(), cost)
						if err != nil {
							refused.Add(1)
							continue
						}
						if i%3 == 0 {
							kept.Add(int64(cost))
							continue
						}
						assert.NoError(t, release())
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, uint(capacity-kept.Load()), b.Remaining())
			assert.Zero(t, refused.Load(), "expect a bucket large enough to refuse nothing")
		})
	}
}

// TestTokenBucketPlugsIntoStandard: the bucket is a retry.RateLimiter for
// the SDK's own retryer.
func TestTokenBucketPlugsIntoStandard(t *testing.T) {
	b := jitterretry.NewTokenBucket(20, 0)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = b
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
	attempts, err := operation(context.Background(), sdk, script(serverErr))
	assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	assert.Contains(t, err.Error(), "retry quota exceeded")
	requireAttempts(t, 2, attempts, err)
	assert.Equal(t, uint(6), b.Remaining())
}

// TestBucketInvariantsUnderLoad runs many operations at once through the
// SDK's middleware against answers that throttle every other request, and
// checks that the bucket ends where the SDK's accounting says: each failed
// retry loses its cost, each first-attempt success earns one token, each
// successful retry gets its cost back.
func TestBucketInvariantsUnderLoad(t *testing.T) {
	const capacity, start = 100_000, 50_000 // room both ways: nothing saturates
	bucket := jitterretry.NewTokenBucket(capacity, 0)
	_, err := bucket.GetToken(context.Background(), capacity-start)
	require.NoError(t, err)
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.MaxAttempts = jitterretry.UnlimitedAttempts
		o.RateLimiter = bucket
	})
	var requests, firstAttemptOK, retryFailed atomic.Int64
	answer := func(attempt int) error {
		if requests.Add(1)%2 == 1 {
			if attempt > 1 {
				retryFailed.Add(1)
			}
			return throttleErr()
		}
		if attempt == 1 {
			firstAttemptOK.Add(1)
		}
		return nil
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				ctx := context.Background()
				if (g+i)%2 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
					defer cancel()
				}
				_, err := operation(ctx, r, answer)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, retryFailed.Load(), "expect contention to make some retries fail")
	want := start - 5*retryFailed.Load() + firstAttemptOK.Load()
	assert.Equal(t, uint(want), r.Remaining(), "expect %d tokens: %d failed retries, %d first-attempt successes",
		want, retryFailed.Load(), firstAttemptOK.Load())
}

// countingLimiter is a custom retry.RateLimiter that counts its calls.
type countingLimiter struct {
	retry.RateLimiter
	gets atomic.Int32
}

func (c *countingLimiter) GetToken(ctx context.Context, cost uint) (func() error, error) {
	c.gets.Add(1)
	return c.RateLimiter.GetToken(ctx, cost)
}

// TestCustomRateLimiterAskedOncePerRetry: a refusal asks a custom
// RateLimiter once, so its own counts stay true: at once, or after the
// wait before refusing, when no abandoned retry gave it tokens back
// meanwhile (asked again after every wait, it counted each refusal twice:
// helper-148).
func TestCustomRateLimiterAskedOncePerRetry(t *testing.T) {
	for name, failFast := range map[string]bool{"fails fast": true, "backs off first": false} {
		t.Run(name, func(t *testing.T) {
			limiter := &countingLimiter{RateLimiter: ratelimit.NewTokenRateLimit(0)}
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.RateLimiter = limiter
				o.FailFastOnEmptyBudget = failFast
			})
			_, err := r.GetRetryToken(context.Background(), serverErr())
			require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
			assert.Equal(t, int32(1), limiter.gets.Load())
		})
	}
}

// TestANilBucketOrDelayerInTheSDKsRetryerActsAsItsZeroValue: a
// constructor's nil result kept despite its error (d, _ :=
// delayers.NewFull(bad)) and plugged into the SDK's own retryer works as
// its type's zero value (a delayer's defaults; an empty bucket) instead of
// crashing the process at the first retry.
func TestANilBucketOrDelayerInTheSDKsRetryerActsAsItsZeroValue(t *testing.T) {
	for name, d := range map[string]retry.BackoffDelayer{
		"Exponential":  (*delayers.Exponential)(nil),
		"Full":         (*delayers.Full)(nil),
		"Equal":        (*delayers.Equal)(nil),
		"Decorrelated": (*delayers.Decorrelated)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = d })
			attempts, err := operation(context.Background(), sdk, script(serverErr, ok))
			require.NoError(t, err)
			requireAttempts(t, 2, attempts, err)
		})
	}
	t.Run("TokenBucket", func(t *testing.T) {
		sdk := retry.NewStandard(func(o *retry.StandardOptions) {
			o.RateLimiter = (*jitterretry.TokenBucket)(nil)
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
		attempts, err := operation(context.Background(), sdk, script(serverErr))
		assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted, "the zero bucket refuses every retry that costs tokens")
		requireAttempts(t, 1, attempts, err)
		attempts, err = operation(context.Background(), sdk, script(ok))
		require.NoError(t, err, "the release of a first attempt's success adds nothing, and fails nothing")
		requireAttempts(t, 1, attempts, err)
	})
}

// TestANilBucketAnswersAsTheZeroValue: every method of a nil *TokenBucket
// answers as the zero value's.
func TestANilBucketAnswersAsTheZeroValue(t *testing.T) {
	var b *jitterretry.TokenBucket
	assert.Zero(t, b.Remaining())
	assert.NoError(t, b.AddTokens(5))
	release, err := b.GetToken(context.Background(), 0)
	require.NoError(t, err, "a cost of 0 always passes")
	assert.NoError(t, release())
	_, err = b.GetToken(context.Background(), 1)
	assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	var zero jitterretry.TokenBucket
	_, zeroErr := zero.GetToken(context.Background(), 1)
	assert.Equal(t, zeroErr.Error(), err.Error())
}
