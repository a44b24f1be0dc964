package jitterretry_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"

	"github.com/jitterretry/jitterretry"
)

type fixedBackoff time.Duration

func (d fixedBackoff) BackoffDelay(int, error) (time.Duration, error) { return time.Duration(d), nil }

// TestLearntMarginFromTheFirstAttempt: a retryer that has measured nothing
// yet (a Lambda cold start) still keeps the cause: the failed attempt
// before the first retry decision is measured, so with 20 ms attempts, a
// 100 ms deadline and a 75 ms backoff the retry is refused with the
// throttle inside, instead of running into the deadline and failing with
// the context's error alone.
func TestLearntMarginFromTheFirstAttempt(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = fixedBackoff(75 * time.Millisecond)
		o.BucketRefill = math.Inf(1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := stackOperation(ctx, r, nil, func(ctx context.Context, attempt int) error {
		select {
		case <-time.After(20 * time.Millisecond):
			return throttle
		case <-ctx.Done():
			return &smithy.CanceledError{Err: ctx.Err()}
		}
	})
	var giveUp *jitterretry.GiveUpError
	if assert.ErrorAs(t, err, &giveUp) {
		assert.Equal(t, jitterretry.GiveUpDeadline, giveUp.Reason)
	}
	assert.True(t, errors.Is(err, throttle), "expect the throttle inside, got %v", err)
}
