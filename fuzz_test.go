package jitterretry_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// FuzzTokenBucket interleaves takes, refunds and adds from several goroutines
// and checks that the tokens stay within [0, capacity] and are conserved:
// what is left is the capacity less what was taken and not given back.
func FuzzTokenBucket(f *testing.F) {
	f.Add(uint16(500), false, []byte{14, 5, 1, 200, 3})
	f.Add(uint16(1), true, []byte{0, 1, 2, 255})
	f.Add(uint16(65535), false, []byte{})
	f.Fuzz(func(t *testing.T, capacity uint16, refill bool, ops []byte) {
		rate := 0.0
		if refill {
			rate = 1e-12 // takes the locked path, refills nothing
		}
		b := jitterretry.NewTokenBucket(uint(capacity), rate)
		want := uint(capacity)
		var mu sync.Mutex
		held := uint(0)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(ops); i += 4 {
					cost := uint(ops[i] % 32)
					release, err := b.GetToken(context.Background(), cost)
					if err != nil {
						assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
						continue
					}
					if ops[i]&0x80 != 0 {
						mu.Lock()
						held += cost
						mu.Unlock()
						continue
					}
					assert.NoError(t, release())
				}
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, b.Remaining(), want)
		require.Equal(t, want-held, b.Remaining(), "expect tokens conserved")
		require.NoError(t, b.AddTokens(math.MaxUint))
		require.Equal(t, want, b.Remaining(), "expect adds to stop at the capacity")
	})
}

// FuzzOptions feeds arbitrary settings to New: it never panics, and either
// reports an *OptionsError naming a field, or gives a retryer whose delays
// stay within [0, MaxBackoff] for any attempt and whose decisions work.
func FuzzOptions(f *testing.F) {
	f.Add(3, int64(50e6), int64(1e9), int64(20e9), int64(0), 0.0, uint8(1), 1, 2.0, uint(14))
	f.Add(0, int64(-1), int64(0), int64(0), int64(-5), -1.0, uint8(9), math.MaxInt, 0.5, uint(600))
	f.Add(-1, int64(math.MaxInt64), int64(1), int64(1), int64(0), math.Inf(1), uint8(3), math.MinInt, 1.5, uint(0))
	f.Fuzz(func(t *testing.T, maxAttempts int, base, throttleBase, maxBackoff, margin int64, refill float64, jitter uint8, attempt int, growth float64, cost uint) {
		strategies := append(delayers.Strategies(), "bogus", "")
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.MaxAttempts = maxAttempts
			o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Duration(base), time.Duration(throttleBase), time.Duration(maxBackoff)
			o.DeadlineMargin = time.Duration(margin)
			o.BucketRefill = refill
			o.BackoffGrowth = growth
			o.RetryCost = cost
			o.Jitter = strategies[int(jitter)%len(strategies)]
		})
		if err := r.Err(); err != nil {
			var oe *jitterretry.OptionsError
			require.True(t, errors.As(err, &oe), "expect an *OptionsError, got %T", err)
			require.NotEmpty(t, oe.Option)
			_, derr := r.RetryDelay(attempt, nil)
			require.ErrorIs(t, derr, err)
			return
		}
		d, err := r.RetryDelay(attempt, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, time.Duration(maxBackoff))
		require.GreaterOrEqual(t, r.MaxAttempts(), 0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if release, err := r.GetRetryToken(ctx, serverErr()); err == nil {
			_, _ = r.RetryDelay(1, nil)
			_ = release(nil)
		}
	})
}
