package jitterretry_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

type fixedBackoff time.Duration

func (d fixedBackoff) BackoffDelay(int, error) (time.Duration, error) { return time.Duration(d), nil }

// TestLearntMarginFromTheFirstWarmAttempt: a retryer that has made one
// call (a Lambda function's first invocation, say) keeps the cause in the
// next: the failed attempt before the retry decision is measured, so with
// 200 ms attempts, a 1 s deadline and a 750 ms backoff the retry is
// refused with the throttle inside, instead of running into the deadline
// and failing with the context's error alone. (At a tenth of those, a
// stall of a busy machine ended the deadline first: helper-230.) (The first call's attempt
// was cold, and keeps no margin: see TestAColdStartsLongCredentialFetch...
// in internal/clienttest.)
func TestLearntMarginFromTheFirstWarmAttempt(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = fixedBackoff(750 * time.Millisecond)
		o.BucketRefill = math.Inf(1)
	})
	require.NoError(t, stackOperation(context.Background(), r, nil, answerAfter(200*time.Millisecond, nil)), "the first, cold call")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := stackOperation(ctx, r, nil, func(ctx context.Context, attempt int) error {
		select {
		case <-time.After(200 * time.Millisecond):
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

// inOperation names the operation of a stackOperation as a service client
// does, for the margin's estimates.
func inOperation(service, operation string) []func(*smithymiddle.Stack) error {
	return []func(*smithymiddle.Stack) error{func(s *smithymiddle.Stack) error {
		return s.Initialize.Add(&awsmiddle.RegisterServiceMetadata{ServiceID: service, OperationName: operation}, smithymiddle.Before)
	}}
}

// answerAfter returns a send that answers err after d.
func answerAfter(d time.Duration, err error) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		select {
		case <-time.After(d):
			return err
		case <-ctx.Done():
			return &smithy.CanceledError{Err: ctx.Err()}
		}
	}
}

// TestLearntMarginIsPerOperation: one slow operation on a shared retryer (a
// 1.5 s Scan) does not make the retries of a quick one (a PutItem) look
// too long for their 2 s deadline, with or without the send-rate limiter;
// the Scan's own retries still keep its margin. (At 300 ms and 400, a
// stall of a busy machine ended the deadline: helper-230.)
func TestLearntMarginIsPerOperation(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for name, sendRate := range map[string]*jitterretry.SendRateOptions{"": nil, ", with the limiter": {InitialRate: 50}} {
		t.Run("quick after slow"+name, func(t *testing.T) {
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Backoff = fixedBackoff(0)
				o.SendRate = sendRate
			})
			require.NoError(t, stackOperation(context.Background(), r, inOperation("DynamoDB", "Scan"), answerAfter(1500*time.Millisecond, nil)))
			errs := make([]error, 5)
			concurrently(len(errs), func(i int) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				errs[i] = stackOperation(ctx, r, inOperation("DynamoDB", "PutItem"), func(ctx context.Context, attempt int) error {
					if attempt == 1 {
						return throttle
					}
					return nil
				})
			})
			for _, err := range errs {
				assert.NoError(t, err, "expect the PutItem's retry to fit: its attempts are quick")
			}
		})
	}
	t.Run("slow keeps its margin", func(t *testing.T) {
		r := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = fixedBackoff(0) })
		scan := inOperation("DynamoDB", "Scan")
		require.NoError(t, stackOperation(context.Background(), r, scan, answerAfter(1500*time.Millisecond, nil)))
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		err := stackOperation(ctx, r, scan, answerAfter(1500*time.Millisecond, throttle))
		var giveUp *jitterretry.GiveUpError
		if assert.ErrorAs(t, err, &giveUp) {
			assert.Equal(t, jitterretry.GiveUpDeadline, giveUp.Reason)
		}
		assert.ErrorIs(t, err, throttle)
	})
}

// TestMarginLeavesOutAttemptsTheCallerEnded: an attempt that ran until its
// caller's deadline took what the caller allowed, not what the service
// needs: it does not make the next operation's retries look too long. (A
// lower bound of the attempt's time, it is a new client's first: cold, it
// keeps no margin, and the next operation's attempt, warm, replaces it.)
// At 250 ms and 400, a stall of a busy machine ended the next deadline
// (helper-230): a margin of twice the stall, 2.5 s, would refuse a retry
// with 2 s left.
func TestMarginLeavesOutAttemptsTheCallerEnded(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	r := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = fixedBackoff(0) })
	get := inOperation("DynamoDB", "GetItem")
	stalled, cancel := context.WithTimeout(context.Background(), 1250*time.Millisecond)
	defer cancel()
	require.Error(t, stackOperation(stalled, r, get, func(ctx context.Context, _ int) error { return stall(ctx) }))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	assert.NoError(t, stackOperation(ctx, r, get, func(ctx context.Context, attempt int) error {
		if attempt == 1 {
			return throttle
		}
		return nil
	}))
}

// TestMarginRefusalSaysSo: a refusal says what would not fit: the margin
// kept for the attempt when the wait alone fits, the backoff, and the
// service's x-amz-retry-after when it set the wait. Refused before a
// backoff was drawn (in GetRetryToken), it names no backoff: the message
// said "backoff 0s" there (helper-66), and called a wait the hint set a
// backoff (helper-67).
func TestMarginRefusalSaysSo(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	refusal := func(backoff, margin time.Duration, deadline time.Duration, answer error) string {
		t.Helper()
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Backoff = fixedBackoff(backoff)
			o.DeadlineMargin = margin
		})
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		err := stackOperation(ctx, r, nil, answerAfter(0, answer))
		var gu *jitterretry.GiveUpError
		require.ErrorAs(t, err, &gu)
		require.Equal(t, jitterretry.GiveUpDeadline, gu.Reason)
		return err.Error()
	}
	msg := refusal(0, time.Hour, time.Minute, throttle)
	assert.Contains(t, msg, "gave up: 1h0m0s kept for the attempt after the backoff would end past the context deadline")
	assert.NotContains(t, msg, "backoff 0s")

	msg = refusal(time.Hour, time.Millisecond, time.Minute, throttle)
	assert.Contains(t, msg, "gave up: backoff 1h0m0s would end past the context deadline")

	// The hint makes any wait 5 s at least (less when it says less).
	msg = refusal(0, time.Millisecond, 3*time.Second, asResponse(400, &modeled{"ThrottlingException"}, "X-Amz-Retry-After", "3600000"))
	assert.Contains(t, msg, "gave up: the service's x-amz-retry-after (a wait of 5s at least) would end past the context deadline")

	// A drawn backoff of 10 min that the hint stretches to 10 min 5 s.
	msg = refusal(10*time.Minute, time.Millisecond, 10*time.Minute+3*time.Second, asResponse(400, &modeled{"ThrottlingException"}, "X-Amz-Retry-After", "1200000"))
	assert.Contains(t, msg, "gave up: backoff 10m0s, 10m5s after the service's x-amz-retry-after, would end past the context deadline")

	// The longest margin reads to the millisecond, as shorter ones do:
	// rounding it up overflowed, and it printed every nanosecond.
	msg = refusal(0, math.MaxInt64, time.Hour, throttle)
	assert.Contains(t, msg, "gave up: 2562047h47m16.854s kept for the attempt after the backoff")
}

// TestAttemptReleaseTwiceDoesNotPanic: releasing an attempt twice is the
// caller's mistake, and must cost at most a sample, even when the second
// release comes after another attempt took the same probe.
func TestAttemptReleaseTwiceDoesNotPanic(t *testing.T) {
	r := jitterretry.New()
	ctx := context.Background()
	first, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	assert.NotPanics(t, func() {
		_ = first(nil)
		second, err := r.GetAttemptToken(ctx)
		require.NoError(t, err)
		_ = first(nil)
		_ = second(nil)
	})
}

// TestDoMarginCountsThePartitionsAttempts: Do's fn may call any operation
// of the partition, so its margin is learnt over all of them: after 200 ms
// attempts (two: the first, cold, would keep no margin), a throttled fn with
// 300 ms left is not retried into its deadline.
func TestDoMarginCountsThePartitionsAttempts(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	r := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = fixedBackoff(0) })
	for range 2 {
		require.NoError(t, stackOperation(context.Background(), r, inOperation("DynamoDB", "GetItem"), answerAfter(200*time.Millisecond, nil)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	calls := 0
	err := jitterretry.Do(ctx, r, func(context.Context) error {
		calls++
		return throttle
	})
	var giveUp *jitterretry.GiveUpError
	if assert.ErrorAs(t, err, &giveUp) {
		assert.Equal(t, jitterretry.GiveUpDeadline, giveUp.Reason)
	}
	assert.Equal(t, 1, calls)
}

// TestMarginLearntAfterReleasesThatNeverCame: the SDK's middleware skips an
// attempt's release when it cannot rewind the request's body for a retry
// (an upload from a pipe). Eight such operations once held every probe of
// the partition for good, and the margin was never learnt again; a probe
// held for probeStuckAfter (10 s) is now replaced. With two 200 ms attempts
// measured after that, a throttled operation with 300 ms left is not
// retried into its deadline.
func TestMarginLearntAfterReleasesThatNeverCame(t *testing.T) {
	var elapsed atomic.Int64
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = fixedBackoff(0)
		o.BucketRefill = math.Inf(1)
		o.Clock = clock
	})
	for range 8 {
		err := unrewindableOperation(r, serverErr())
		require.ErrorContains(t, err, "failed to rewind transport stream for retry")
	}
	elapsed.Add(int64(10 * time.Second))
	for range 2 { // one alone would be a stall among the eight quick ones
		require.NoError(t, stackOperation(context.Background(), r, nil, func(context.Context, int) error {
			elapsed.Add(int64(200 * time.Millisecond))
			return nil
		}))
	}
	// The deadline is the retryer's clock's: 300 ms from its now.
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(300*time.Millisecond))
	defer cancel()
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	err := stackOperation(ctx, r, nil, func(_ context.Context, attempt int) error {
		if attempt == 1 {
			return throttle
		}
		return nil
	})
	var giveUp *jitterretry.GiveUpError
	if assert.ErrorAs(t, err, &giveUp, "expect the learnt margin (400 ms) to refuse the retry") {
		assert.Equal(t, jitterretry.GiveUpDeadline, giveUp.Reason)
	}
}

// unrewindableOperation runs one operation through the SDK's retry
// middleware with a request whose body cannot be rewound: its first attempt
// fails with first, and the middleware fails the second before sending it,
// without releasing its attempt token.
func unrewindableOperation(r aws.Retryer, first error) error {
	req, err := (&smithyhttp.Request{Request: &http.Request{Header: http.Header{}}}).SetStream(struct{ io.Reader }{strings.NewReader("body")})
	if err != nil {
		return err
	}
	m := retry.NewAttemptMiddleware(r, func(in any) any { return in })
	next := smithymiddle.FinalizeHandlerFunc(func(context.Context, smithymiddle.FinalizeInput) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
		return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, first
	})
	_, _, err = m.HandleFinalize(context.Background(), smithymiddle.FinalizeInput{Request: req}, next)
	return err
}
