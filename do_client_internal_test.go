package jitterretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDoFirstConflictOfAnUntimedClientIsSizedByRoundTrips: in a lane whose
// estimate is full (one attempt in 16 timed), fn calls a client none of
// whose attempts was timed, and its call took 800 ms, nearly all of it the
// SDK's own retry sleep inside fn. The first conflict's window is still
// sized from round trips, fn's time bounded by twice the lane's estimate;
// taken whole, it made waits of 82-528 ms where 17-72 ms were drawn before
// (helper-151).
func TestDoFirstConflictOfAnUntimedClientIsSizedByRoundTrips(t *testing.T) {
	base := time.Now()
	var offset time.Duration
	var delays []time.Duration
	r := New(func(o *Options) {
		o.Clock = func() time.Time { return base.Add(offset) }
		o.OnRetry = func(e RetryEvent) { delays = append(delays, e.Delay) }
	})
	require.NoError(t, r.Err())
	l := r.lanes.get(context.Background())
	for range 40 {
		release, err := r.GetAttemptToken(inRegion("PutItem", "us-west-2"))
		require.NoError(t, err)
		offset += time.Millisecond
		require.NoError(t, release(nil))
	}
	require.True(t, l.attempts.all.full.Load())
	calls := 0
	err := Do(context.Background(), r, func(ctx context.Context) error {
		calls++
		if calls > 1 {
			return nil
		}
		// What GetAttemptToken does for two attempts not drawn for timing.
		markClient(withOperation(ctx, "PutItem", "us-east-1"), &r.hooks, &l.attempts)
		markClient(withOperation(ctx, "PutItem", "us-east-1"), &r.hooks, &l.attempts)
		offset += 800 * time.Millisecond // a 500, the SDK's sleep, the retry
		return Conflict(errors.New("the item moved on"), 1, 2)
	})
	require.NoError(t, err)
	require.Len(t, delays, 1)
	assert.Less(t, delays[0], 30*time.Millisecond, "expect the first window sized from round trips, not from the SDK's sleep inside fn")
}

// TestDoFindsItsClientWhenTheEstimatesAreFull: with the lane's
// maxOperationTimes estimates taken, fn calls an operation with no room
// for an estimate, of a client whose other operation has one: the loop
// learns from that client, not from the partition's far region.
func TestDoFindsItsClientWhenTheEstimatesAreFull(t *testing.T) {
	base := time.Now()
	var offset time.Duration
	r := New(func(o *Options) { o.Clock = func() time.Time { return base.Add(offset) } })
	require.NoError(t, r.Err())
	l := r.lanes.get(context.Background())
	release, err := r.GetAttemptToken(inRegion("GetItem", "us-east-1"))
	require.NoError(t, err)
	offset += time.Millisecond
	require.NoError(t, release(nil))
	for i := range maxOperationTimes - 1 {
		op := l.attempts.operation(operationOf(inRegion(fmt.Sprintf("Op%d", i), "ap-southeast-2")))
		start := l.attempts.since()
		offset += 300 * time.Millisecond
		l.attempts.record(op, start, l.attempts.since())
	}
	require.Equal(t, int32(maxOperationTimes), l.attempts.count.Load())
	require.Greater(t, l.attempts.estimate(), 250*time.Millisecond)
	d := doLoop{r: r, lane: l}
	d.mark.owner = &r.hooks
	markClient(withLoopMark(withOperation(context.Background(), "PutItem", "us-east-1"), &d.mark), &r.hooks, &l.attempts)
	e, _ := d.estimate()
	assert.Equal(t, time.Millisecond, e, "expect the near client's estimate, not the partition's far one")
}

// TestADoLoopJudgesItsCallByTheLimiterOfTheAttemptThatFailed: fn's call is
// judged by the lane of the attempt that failed, DynamoDB's, whichever
// lane it waited at first: a credential refresh through an STS client the
// retryer also serves runs inside the DynamoDB attempt that needs it (the
// SDK's Retry middleware comes before GetIdentity), and fn may call STS
// itself before the call that fails (helper-222: judged by the first
// lane, that call was judged by STS's limiter). In the shared partition
// and in a named one.
func TestADoLoopJudgesItsCallByTheLimiterOfTheAttemptThatFailed(t *testing.T) {
	inConflict := &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}
	for _, part := range []string{"", "orders"} {
		for name, call := range map[string]func(r *Retryer, ctx context.Context) error{
			"a refresh inside the attempt": func(r *Retryer, ctx context.Context) error {
				release, err := r.GetAttemptToken(awsmiddle.SetServiceID(ctx, "DynamoDB"))
				require.NoError(t, err)
				refresh, err := r.GetAttemptToken(awsmiddle.SetServiceID(ctx, "STS"))
				require.NoError(t, err)
				require.NoError(t, refresh(nil))
				_ = release(inConflict)
				return inConflict
			},
			"STS called before": func(r *Retryer, ctx context.Context) error {
				for _, service := range []string{"STS", "DynamoDB"} {
					release, err := r.GetAttemptToken(awsmiddle.SetServiceID(ctx, service))
					require.NoError(t, err)
					if service == "STS" {
						require.NoError(t, release(nil))
						continue
					}
					_ = release(inConflict)
				}
				return inConflict
			},
		} {
			r := serviceLanesRetryer(t)
			ctx := WithPartition(context.Background(), part)
			var judged *lane
			calls := 0
			require.NoError(t, Do(ctx, r, func(ctx context.Context) error {
				if calls++; calls == 1 {
					err := call(r, ctx)
					judged = loopMarkOf(ctx).lane.Load()
					return Conflict(err, 1, 1)
				}
				return nil
			}))
			ddb := r.lanes.get(awsmiddle.SetServiceID(ctx, "DynamoDB"))
			require.NotSame(t, r.lanes.get(awsmiddle.SetServiceID(ctx, "STS")), ddb)
			assert.True(t, judged == ddb, "partition %q, %s: expect the call judged by DynamoDB's limiter", part, name)
		}
	}
}

// TestADoLoopJudgesACallPastThePartitionsServicesByTheirLane: fn's call of
// a service past its partition's bound, which goes unpaced, is judged by
// that lane, with no limiter: not by the loop's own, whose limiter is the
// partition's first service's, which neither paced nor counted the call
// (helper-227: a throttle there backed off as a near miss while that
// limiter paced).
func TestADoLoopJudgesACallPastThePartitionsServicesByTheirLane(t *testing.T) {
	inConflict := &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}
	r := serviceLanesRetryer(t)
	ctx := WithPartition(context.Background(), "orders")
	for _, service := range []string{"DynamoDB", "S3", "SQS", "SNS", "Kinesis"} {
		r.lanes.get(awsmiddle.SetServiceID(ctx, service))
	}
	unpaced := r.lanes.get(awsmiddle.SetServiceID(ctx, "Glue"))
	require.True(t, unpaced.sender == nil, "expect the sixth service unpaced")
	var judged *lane
	calls := 0
	require.NoError(t, Do(ctx, r, func(ctx context.Context) error {
		if calls++; calls == 1 {
			release, err := r.GetAttemptToken(awsmiddle.SetServiceID(ctx, "Glue"))
			require.NoError(t, err)
			_ = release(inConflict)
			judged = loopMarkOf(ctx).lane.Load()
			return Conflict(inConflict, 1, 1)
		}
		return nil
	}))
	assert.True(t, judged == unpaced, "expect the call judged by its own lane, got the partition's own: %v", judged == r.lanes.get(ctx))
}
