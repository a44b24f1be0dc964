package sim

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// short keeps the throttled runs of the tests to a few thousand operations.
var short = ThrottleParams{Capacity: 500, Warmup: 3 * time.Second, Duration: 2 * time.Second}

func TestThrottleErrorIsAThrottleToEveryRetryer(t *testing.T) {
	err := ThrottleError()
	assert.True(t, retry.NewStandard().IsErrorRetryable(err), "expect the SDK to retry it")
	assert.Equal(t, aws.TrueTernary, retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err),
		"expect the SDK to classify it as a throttle")
	ours := jitterretry.New()
	assert.True(t, ours.IsErrorRetryable(err), "expect our retryer to retry it")
	assert.Equal(t, jitterretry.ClassThrottle, jitterretry.Classify(err), "expect our rules to classify it as a throttle")
}

// countingLimiter is a retry.RateLimiter that counts the tokens added back.
type countingLimiter struct{ added uint }

func (l *countingLimiter) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (l *countingLimiter) AddTokens(n uint) error { l.added += n; return nil }

func TestAttemptContextsCarryTheMiddlewaresAttemptNumber(t *testing.T) {
	ctxs, err := attemptContexts(3)
	require.NoError(t, err)
	require.Len(t, ctxs, 3)
	lim := &countingLimiter{}
	sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = lim })

	release, err := sdk.GetAttemptToken(ctxs[0])
	require.NoError(t, err)
	require.NoError(t, release(nil))
	assert.Equal(t, uint(1), lim.added, "expect a first-attempt success to add NoRetryIncrement")

	for n := 2; n <= 3; n++ {
		release, err = sdk.GetAttemptToken(ctxs[n-1])
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	assert.Equal(t, uint(1), lim.added, "expect later attempts' successes to add nothing, as under the middleware")

	more, err := attemptContexts(40)
	require.NoError(t, err)
	assert.Len(t, more, 40)
}

func TestRunThrottledIsDeterministicForASeed(t *testing.T) {
	for _, name := range []string{RetryerNone, "jitterretry-full", "jitterretry-decorrelated", "sdk+equal"} {
		t.Run(name, func(t *testing.T) {
			rt := mustRetryer(t, name)
			a, err := RunThrottled(short, rt, 50, 11, 0)
			require.NoError(t, err)
			b, err := RunThrottled(short, rt, 50, 11, 0)
			require.NoError(t, err)
			assert.Equal(t, a, b, "expect the same run for the same seed")
		})
	}
}

func TestRunThrottledAccounting(t *testing.T) {
	for _, name := range []string{RetryerNone, RetryerSDK, RetryerSDKNoBucket, "jitterretry-full"} {
		t.Run(name, func(t *testing.T) {
			r, err := RunThrottled(short, mustRetryer(t, name), 20, 1, 0)
			require.NoError(t, err)
			assert.InDelta(t, 2*500*2, r.Ops, 200, "expect Load*Capacity*Duration measured operations")
			assert.Equal(t, r.Ops, r.Succeeded+r.Failed, "expect every operation to end")
			assert.Len(t, r.Latencies, r.Succeeded)
			assert.GreaterOrEqual(t, r.Calls, r.Ops)
			assert.LessOrEqual(t, r.Calls, 3*r.Ops, "expect at most the SDK's 3 attempts per operation")
			// The server admits at most its burst plus Capacity per second.
			assert.LessOrEqual(t, float64(r.Succeeded), 500*r.End.Seconds()+50+1)
			assert.GreaterOrEqual(t, r.End, short.Warmup+short.Duration-time.Second/10, "expect measured operations to start until the window ends")
			if name == RetryerNone {
				assert.Equal(t, r.Ops, r.Calls, "expect no retries")
			}
		})
	}
}

// The retry token bucket is per client: a few busy clients exhaust theirs
// and stop retrying, a fleet of many quiet clients never does.
func TestRunThrottledBucketTripsOnlyForFewClients(t *testing.T) {
	for _, name := range []string{RetryerSDK, "jitterretry-full"} {
		t.Run(name, func(t *testing.T) {
			few, err := RunThrottled(short, mustRetryer(t, name), 2, 1, 0)
			require.NoError(t, err)
			fleet, err := RunThrottled(short, mustRetryer(t, name), 500, 1, 0)
			require.NoError(t, err)
			assert.Greater(t, few.QuotaFailed, few.Ops/10, "expect two clients' buckets to run dry")
			assert.Zero(t, fleet.QuotaFailed, "expect no client of a large fleet to run dry")
			assert.Greater(t, float64(fleet.Calls)/float64(fleet.Succeeded), float64(few.Calls)/float64(few.Succeeded),
				"expect the fleet to amplify the load more")
			nobucket, err := RunThrottled(short, mustRetryer(t, RetryerSDKNoBucket), 2, 1, 0)
			require.NoError(t, err)
			assert.Zero(t, nobucket.QuotaFailed)
		})
	}
}

func TestSweepThrottled(t *testing.T) {
	rows, err := SweepThrottled(ThrottleConfig{
		Clients: []int{5, 50}, Runs: 3, Seed: 2, Params: short,
		Retryers: []Retryer{mustRetryer(t, RetryerNone), mustRetryer(t, "jitterretry-full")},
	})
	require.NoError(t, err)
	require.Len(t, rows, 4)
	none := rows[0]
	assert.Equal(t, RetryerNone, none.Retryer)
	assert.InDelta(t, 1, none.Amplification.Mean, 1.0/4+1, "expect one call per operation")
	assert.InDelta(t, 50, none.FailedPct.Mean, 10, "expect half the operations to fail at twice the capacity")
	assert.InDelta(t, 20, none.P50Ms.Mean, 3, "expect a success to take one round trip")
	for _, r := range rows {
		assert.InDelta(t, 500, r.GoodputPerS.Mean, 500*0.06, "%s: expect the server's capacity, plus at most its burst, to be used", r.Retryer)
	}
	_, err = LookupRetryer("sdk-adaptive")
	assert.ErrorContains(t, err, "jitterretry-full", "expect the error to list the valid names")
	_, err = RunThrottled(ThrottleParams{Capacity: 5}, mustRetryer(t, RetryerNone), 3, 1, 0)
	assert.Error(t, err, "expect a bucket of half a token to be refused")
}
