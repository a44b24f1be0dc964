package jitterretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drain takes r's bucket's tokens with retries of throwaway errors.
func drain(t *testing.T, r *Retryer, bucket *TokenBucket) {
	t.Helper()
	for bucket.Remaining() >= r.costs.retry {
		_, err := r.GetRetryToken(context.Background(), errors.New("drain"))
		require.NoError(t, err)
	}
}

// TestStaleRefusalIsNotAnotherOperationsEntry: a refusal an ordinary
// operation left (its RetryDelay never comes) is not handed to a later
// operation of the same error value whose own entry another error evicted:
// an outside review found the later operation, with no deadline, refused
// for the refusal's deadline, and its 14 tokens lost.
func TestStaleRefusalIsNotAnotherOperationsEntry(t *testing.T) {
	bucket := NewTokenBucket(100, 0)
	r := New(func(o *Options) {
		o.RateLimiter = bucket
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
	})
	shared := errors.New("shared sentinel")
	var colliding error // another error in the same slot of the hand-off table
	for colliding == nil {
		if c := errors.New("other"); keyHash(c)%handoffSlots == keyHash(shared)%handoffSlots {
			colliding = c
		}
	}
	drain(t, r, bucket)
	soon, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := r.GetRetryToken(soon, shared)
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	time.Sleep(150 * time.Millisecond) // the refusal is stale, its deadline past
	bucket.AddTokens(100)

	_, err = r.GetRetryToken(context.Background(), shared) // no deadline
	require.NoError(t, err)
	_, err = r.GetRetryToken(context.Background(), colliding) // evicts its entry
	require.NoError(t, err)
	d, err := r.RetryDelay(1, shared)
	require.NoError(t, err, "expect the operation without a deadline not refused for another's")
	assert.Equal(t, 10*time.Millisecond, d)
}

// TestTwoRefusalsOfOneValueAreAmbiguous: two refusals of the same error
// value at once cannot be told apart; neither operation's RetryDelay may
// use the other's entry (the first took the second's backoff wait).
func TestTwoRefusalsOfOneValueAreAmbiguous(t *testing.T) {
	bucket := NewTokenBucket(14, 0)
	r := New(func(o *Options) {
		o.RateLimiter = bucket
		// The empty budget's wait before refusing is the first retry's
		// backoff: short, so the two refusals come together.
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return time.Duration(attempt) * time.Millisecond, nil
		})
	})
	drain(t, r, bucket)
	shared := errors.New("shared")
	soon, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, errA := r.GetRetryToken(soon, shared)
	_, errB := r.GetRetryToken(context.Background(), shared)
	require.ErrorIs(t, errA, ErrRetryBudgetExhausted)
	require.ErrorIs(t, errB, ErrRetryBudgetExhausted)
	for _, who := range []string{"first", "second"} {
		_, status, _ := r.handoff.take(shared)
		assert.Equal(t, handoffAmbiguous, status, "%s RetryDelay", who)
	}
}
