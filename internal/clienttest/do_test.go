package clienttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// retryConflicts is the application layer's rule: a failed condition is
// retried (the loop re-reads), everything else is left to the SDK's retryer.
func retryConflicts(err error) jitterretry.ErrorClass {
	var c *types.ConditionalCheckFailedException
	if errors.As(err, &c) {
		return jitterretry.ClassTransient
	}
	return jitterretry.ClassNotRetryable
}

func conditionalPut(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String("orders"),
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	return err
}

func TestDoRetriesConflictsOverSDKThrottleRetries(t *testing.T) {
	r := jitterretry.New(fast)
	// The SDK level retries the throttle inside the first call; Do retries
	// the two conflicts; one budget pays for all three retries.
	srv := newScriptServer(t, throttle, ccf, ccf, ok)
	client := newClient(srv.URL, r)
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		calls++
		return conditionalPut(ctx, client)
	}, func(o *jitterretry.DoOptions) { o.Classify = retryConflicts; o.MaxAttempts = 5 })

	require.NoError(t, err)
	assert.Equal(t, 3, calls)
	assert.Equal(t, 4, srv.Calls())
	// 500 - 5 (the SDK's throttle retry, which then failed its condition)
	// - 14 - 14 (Do's two retries) + 14 (the one that succeeded) + 1 (its
	// SDK call succeeded on the first attempt)
	assert.Equal(t, uint(482), r.Remaining())
}

func TestDoOutcomes(t *testing.T) {
	boom := errors.New("boom")
	cases := map[string]struct {
		opts    func(*jitterretry.Options)
		ctx     func() (context.Context, context.CancelFunc)
		doOpts  func(*jitterretry.DoOptions)
		results []error
		calls   int
		check   func(t *testing.T, err error)
	}{
		"not retryable returns the error itself": {
			results: []error{boom}, calls: 1,
			check: func(t *testing.T, err error) { assert.Same(t, boom, err) },
		},
		"attempts run out": {
			doOpts: func(o *jitterretry.DoOptions) {
				o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
			},
			results: []error{boom}, calls: 3,
			check: func(t *testing.T, err error) {
				var m *jitterretry.MaxAttemptsError
				require.ErrorAs(t, err, &m)
				assert.Equal(t, 3, m.Attempt)
				var sdk *retry.MaxAttemptsError
				assert.ErrorAs(t, err, &sdk)
				assert.ErrorIs(t, err, boom)
			},
		},
		"budget runs out": {
			opts: func(o *jitterretry.Options) { o.Bucket.Capacity = 20; o.MaxAttempts = 10 },
			doOpts: func(o *jitterretry.DoOptions) {
				o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
			},
			results: []error{boom}, calls: 2,
			check: func(t *testing.T, err error) {
				assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
				assert.ErrorIs(t, err, boom)
			},
		},
		"backoff past the deadline": {
			opts: func(o *jitterretry.Options) {
				o.Jitter, o.BaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Hour, time.Hour
			},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Minute)
			},
			doOpts: func(o *jitterretry.DoOptions) {
				o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
			},
			results: []error{boom}, calls: 1,
			check: func(t *testing.T, err error) {
				var gu *jitterretry.GiveUpError
				require.ErrorAs(t, err, &gu)
				assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason)
				assert.ErrorIs(t, err, boom)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			},
		},
		"success after retries": {
			doOpts: func(o *jitterretry.DoOptions) {
				o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
			},
			results: []error{boom, boom, nil}, calls: 3,
			check: func(t *testing.T, err error) { assert.NoError(t, err) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(fast, tc.opts)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			calls := 0
			err := jitterretry.Do(ctx, r, func(context.Context) error {
				calls++
				return tc.results[min(calls, len(tc.results))-1]
			}, tc.doOpts)
			assert.Equal(t, tc.calls, calls)
			tc.check(t, err)
		})
	}
}

func TestDoCancelStopsTheSleep(t *testing.T) {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Hour, time.Hour
	})
	ctx, cancel := context.WithCancel(context.Background())
	boom := errors.New("boom")
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	// Were the sleep not cut short, this would block for an hour and the
	// test binary would time out.
	err := jitterretry.Do(ctx, r, func(context.Context) error { return boom },
		func(o *jitterretry.DoOptions) {
			o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassThrottle }
		})
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, jitterretry.GiveUpCanceled, gu.Reason)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, uint(500), r.Remaining(), "the abandoned retry's tokens come back")
}

func TestDoBadInput(t *testing.T) {
	var oe *jitterretry.OptionsError
	assert.ErrorAs(t, jitterretry.Do(context.Background(), nil, func(context.Context) error { return nil }), &oe)
	assert.ErrorAs(t, jitterretry.Do(context.Background(), jitterretry.New(), nil), &oe)
	assert.ErrorAs(t, jitterretry.Do(context.Background(), jitterretry.New(), func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { o.MaxAttempts = -7 }), &oe)
	bad := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = 0 })
	assert.ErrorAs(t, jitterretry.Do(context.Background(), bad, func(context.Context) error { return nil }), &oe)
}

func TestDoRetryCostKeepsTheBudgetForTheSDK(t *testing.T) {
	r := jitterretry.New(fast)
	conflicts := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		if conflicts < 5 {
			conflicts++
			return &types.ConditionalCheckFailedException{Message: aws.String("moved")}
		}
		return nil
	}, func(o *jitterretry.DoOptions) {
		o.Classify = retryConflicts
		o.MaxAttempts = 10
		o.RetryCost = func(error, jitterretry.ErrorClass) uint { return 1 }
	})
	require.NoError(t, err)
	// Four failed retries at 1 token each; the fifth succeeded and was refunded.
	assert.Equal(t, uint(496), r.Remaining())
}
