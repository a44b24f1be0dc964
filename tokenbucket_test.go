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
)

func TestTokenBucketDefaultsAndBounds(t *testing.T) {
	b := jitterretry.NewTokenBucket()
	assert.Equal(t, uint(500), b.Capacity())
	assert.Equal(t, uint(500), b.Remaining())
	require.NoError(t, b.AddTokens(math.MaxUint))
	assert.Equal(t, uint(500), b.Remaining(), "never above capacity")

	release, err := b.GetToken(context.Background(), 500)
	require.NoError(t, err)
	assert.Equal(t, uint(0), b.Remaining())
	_, err = b.GetToken(context.Background(), 1)
	var be *jitterretry.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, uint(0), be.Available)
	var q ratelimit.QuotaExceededError
	assert.ErrorAs(t, err, &q)
	require.NoError(t, release())
	assert.Equal(t, uint(500), b.Remaining())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = b.GetToken(ctx, 1)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, uint(500), b.Remaining(), "a cancelled caller takes nothing")
}

func TestTokenBucketRefillWithFakeClock(t *testing.T) {
	now := time.Unix(0, 0)
	b := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) {
		o.Capacity, o.RefillPerSecond = 100, 10
		o.Clock = func() time.Time { return now }
	})
	_, err := b.GetToken(context.Background(), 100)
	require.NoError(t, err)
	assert.Equal(t, uint(0), b.Remaining())
	now = now.Add(250 * time.Millisecond)
	assert.Equal(t, uint(2), b.Remaining(), "2.5 tokens refilled, 2 whole")
	now = now.Add(250 * time.Millisecond)
	assert.Equal(t, uint(5), b.Remaining(), "fractions carry over")
	now = now.Add(time.Hour)
	assert.Equal(t, uint(100), b.Remaining(), "refill stops at capacity")
	now = now.Add(-time.Hour)
	assert.Equal(t, uint(100), b.Remaining(), "a clock going backwards refills nothing and breaks nothing")
}

// TestTokenBucketConservesTokensUnderContention proves no lost refunds: the
// tokens left equal the capacity less what was taken and not given back.
func TestTokenBucketConservesTokensUnderContention(t *testing.T) {
	const capacity = 100_000
	b := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) { o.Capacity = capacity })
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
	assert.Zero(t, refused.Load(), "the bucket is large enough that nothing is refused")
}

func TestTokenBucketPlugsIntoStandard(t *testing.T) {
	b := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) { o.Capacity = 20 })
	srv := newScriptServer(t, serverErr)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = b
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
	err := putItem(context.Background(), newClient(srv.URL, sdk))
	assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	assert.Equal(t, 2, srv.Calls())
	assert.Equal(t, uint(6), b.Remaining())
}

// TestRetryerBucketInvariantsUnderLoad runs many goroutines through one
// client against a server that throttles every other request, and checks
// that the bucket ends exactly where the SDK's accounting says it must: each
// failed retry loses its cost, each first-attempt success earns one token,
// and each successful retry gets its cost back.
func TestRetryerBucketInvariantsUnderLoad(t *testing.T) {
	const capacity, start = 100_000, 50_000 // room both ways, so nothing saturates
	bucket := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) { o.Capacity = capacity })
	_, err := bucket.GetToken(context.Background(), capacity-start)
	require.NoError(t, err)
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.MaxAttempts = jitterretry.UnlimitedAttempts
		o.RateLimiter = bucket
	})
	srv := newScriptServer(t, throttle, ok)
	srv.mu.Lock()
	srv.cycle = true
	srv.mu.Unlock()
	client := newClient(srv.URL, r)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				assert.NoError(t, putItem(context.Background(), client))
			}
		}()
	}
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	assert.Greater(t, srv.retryFailed, 0, "expect contention to make some retries fail")
	want := start - 5*srv.retryFailed + srv.firstAttemptOK
	assert.Equal(t, uint(want), r.Remaining(), "expect %d tokens: %d failed retries, %d first-attempt successes", want, srv.retryFailed, srv.firstAttemptOK)
}
