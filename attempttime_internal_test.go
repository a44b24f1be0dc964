package jitterretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperationEstimatesAreBounded: a partition keeps the estimates of
// maxOperationTimes operations, whatever operation names come; the ones
// beyond have no estimate of their own (margin 0), and every attempt still
// feeds the partition's estimate.
func TestOperationEstimatesAreBounded(t *testing.T) {
	now := time.Unix(0, 0)
	var a attemptTimes
	done := func(error) error { return nil }
	a.init(func() time.Time { return now }, done, nil)
	op := func(i int) context.Context {
		return awsmiddle.SetOperationName(awsmiddle.SetServiceID(context.Background(), "DynamoDB"), fmt.Sprintf("Op%d", i))
	}
	// Enough attempts of each of twice as many operations that, one in
	// attemptSampleEvery timed, every one of them is timed at least once.
	for range 20 * attemptSampleEvery {
		for i := range 2 * maxOperationTimes {
			release := a.measure(op(i), done, false)
			now = now.Add(time.Millisecond)
			_ = release(nil)
		}
	}
	assert.Equal(t, int32(maxOperationTimes), a.count.Load())
	estimated := 0
	for i := range 2 * maxOperationTimes {
		switch e, _ := a.estimateOf(operationOf(op(i))); e {
		case time.Millisecond:
			estimated++
		default:
			assert.Zero(t, e, "expect an operation beyond the bound to have no estimate")
		}
	}
	assert.Equal(t, maxOperationTimes, estimated)
	assert.Equal(t, time.Millisecond, a.estimate())
}

// TestAttemptTimeoutNeverGivesMoreThanItsLimit: with less than twice the
// reserve left before the deadline, the attempt gets half of what is left,
// but never more than its own limit (helper-74: a 3.5 ms limit ran 4.3 ms
// with 8 ms left, and its error named the deadline's rule).
func TestAttemptTimeoutNeverGivesMoreThanItsLimit(t *testing.T) {
	const d = 3500 * time.Microsecond
	stall := middleware.FinalizeHandlerFunc(func(ctx context.Context, _ middleware.FinalizeInput) (middleware.FinalizeOutput, middleware.Metadata, error) {
		<-ctx.Done()
		return middleware.FinalizeOutput{}, middleware.Metadata{}, ctx.Err()
	})
	for left := 7 * time.Millisecond; left <= 9*time.Millisecond; left += 250 * time.Microsecond {
		// A machine that stalls past the caller's deadline before the
		// attempt's own timer fires ends the call with the caller's
		// error: that says nothing of the limit, so it is tried again
		// (five times at most; an outside review saw it once under -race).
		var cut *attemptTimeoutError
		var err error
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), left)
			_, _, err = attemptTimeout{d: d}.HandleFinalize(ctx, middleware.FinalizeInput{}, stall)
			cancel()
			if errors.As(err, &cut) {
				break
			}
		}
		require.ErrorAs(t, err, &cut, "left %v", left)
		assert.LessOrEqual(t, cut.timeout, d, "left %v: expect the attempt limited to its %v", left, d)
		if cut.timeout == d {
			assert.False(t, cut.byDeadline, "left %v: expect the error to name the attempt timeout", left)
		}
	}
}

// TestAColdStartsUnprobedAttemptIsTimed: more first attempts in flight than
// there are probes (20 workers starting together, say), and one of those
// no probe timed ends first: its retry met a margin of 0, and a 250 ms
// backoff went ahead with 280 ms left after a 20 ms attempt, to meet the
// deadline in the next one (helper-123). Until an operation has a sample,
// every one of its attempts is timed. (Cold, the sample keeps no margin
// yet; the next attempt, warm, sets one of twice its time.)
func TestAColdStartsUnprobedAttemptIsTimed(t *testing.T) {
	base := time.Now()
	var offset time.Duration // moved by this goroutine only
	clock := func() time.Time { return base.Add(offset) }
	r := New(func(o *Options) {
		o.Clock = clock
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 265 * time.Millisecond, nil })
	})
	require.NoError(t, r.Err())
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(300*time.Millisecond))
	defer cancel()
	var releases []func(error) error
	for range attemptProbes + 1 {
		release, err := r.GetAttemptToken(ctx)
		require.NoError(t, err)
		releases = append(releases, release)
	}
	offset += 20 * time.Millisecond // every attempt took 20 ms; the last, unprobed before, ends first
	throttle := errors.New("throttled")
	require.NoError(t, releases[attemptProbes](throttle))
	l := r.lanes.get(ctx)
	e, cold := l.attempts.estimateOf(operationOf(ctx))
	assert.Equal(t, 20*time.Millisecond, e, "expect the unprobed attempt timed")
	assert.True(t, cold)
	for _, release := range releases[:attemptProbes] {
		require.NoError(t, release(nil))
	}
	warm, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	offset += 20 * time.Millisecond
	require.NoError(t, warm(throttle))
	requireRetryRefusedForDeadline(t, r, ctx, throttle, "expect the 265 ms backoff refused: 260 ms left, and 40 ms of margin after a warm 20 ms attempt")
}

// TestColdSamplesGiveWayToWarmOnes: two attempts of a new lane begin
// together and wait for its credentials; the first comes back after 400 ms
// and is the estimate, cold: no margin yet. An attempt begun after it took
// 10 ms: warm, it replaces the cold sample, and the margin is twice it.
// The other cold attempt, back at 500 ms, is left out.
func TestColdSamplesGiveWayToWarmOnes(t *testing.T) {
	base := time.Now()
	var offset time.Duration // moved by this goroutine only
	clock := func() time.Time { return base.Add(offset) }
	r := New(func(o *Options) { o.Clock = clock })
	require.NoError(t, r.Err())
	ctx := awsmiddle.SetOperationName(awsmiddle.SetServiceID(context.Background(), "DynamoDB"), "PutItem")
	first, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	second, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	l := r.lanes.get(ctx)

	offset += 400 * time.Millisecond
	require.NoError(t, first(nil))
	assert.Zero(t, r.margin(ctx, l), "expect a cold estimate to keep no margin")
	e, cold := l.attempts.read()
	assert.Equal(t, 400*time.Millisecond, e)
	assert.True(t, cold)

	warm, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	offset += 10 * time.Millisecond
	require.NoError(t, warm(nil))
	assert.Equal(t, 20*time.Millisecond, r.margin(ctx, l), "expect the warm sample alone, twice")
	assert.Equal(t, 20*time.Millisecond, r.margin(nil, l), "and over the lane's operations too")
	_, cold = l.attempts.read()
	assert.False(t, cold)

	offset += 90 * time.Millisecond
	require.NoError(t, second(nil))
	assert.Equal(t, 20*time.Millisecond, r.margin(ctx, l), "expect a cold attempt back after a warm one left out")
}

// inRegion is the context the SDK's middleware gives an attempt of
// DynamoDB operation op by a client of region.
func inRegion(op, region string) context.Context {
	return withOperation(context.Background(), op, region)
}

// withOperation returns ctx as the SDK's middleware gives it to an attempt
// of DynamoDB operation op by a client of region.
func withOperation(ctx context.Context, op, region string) context.Context {
	ctx = awsmiddle.SetServiceID(ctx, "DynamoDB")
	ctx = awsmiddle.SetOperationName(ctx, op)
	return awsmiddle.SetRegion(ctx, region)
}

// TestAClientsColdStartIsJudgedByItsServiceAndRegion: a warm client's
// first call of another operation is warm, and counts twice in the margin
// (judged cold by its own estimate's first sample, it counted once and
// halved that operation's first margin: helper-148); the first call of a
// client of another region joining the warm retryer is cold, and keeps no
// margin; that client's next operation, after it, is warm again.
func TestAClientsColdStartIsJudgedByItsServiceAndRegion(t *testing.T) {
	base := time.Now()
	var offset time.Duration
	r := New(func(o *Options) { o.Clock = func() time.Time { return base.Add(offset) } })
	require.NoError(t, r.Err())
	attempt := func(ctx context.Context, took time.Duration) time.Duration {
		release, err := r.GetAttemptToken(ctx)
		require.NoError(t, err)
		offset += took
		require.NoError(t, release(nil))
		return r.margin(ctx, r.lanes.get(ctx))
	}
	for range 4 {
		attempt(inRegion("PutItem", "us-east-1"), 10*time.Millisecond)
	}
	assert.Equal(t, 200*time.Millisecond, attempt(inRegion("GetItem", "us-east-1"), 100*time.Millisecond),
		"expect a warm client's first GetItem counted twice")
	assert.Zero(t, attempt(inRegion("PutItem", "eu-west-1"), 500*time.Millisecond),
		"expect another region's first call cold: no margin")
	assert.Equal(t, 40*time.Millisecond, attempt(inRegion("GetItem", "eu-west-1"), 20*time.Millisecond),
		"expect that client's next operation warm, counted twice")
}

// TestAColdBurstLeavesTheNextAttemptTimed: a new client's first 40
// attempts begin together (40 goroutines at a service's start) and come
// back after 800 ms, cold. Their samples filled the estimate, and the
// attempts after them were timed one in 16: a warm 20 ms attempt left the
// margin at 0, 15 attempts on average and 85 at worst (helper-176). Cold
// samples never fill an estimate: the next attempt is timed, and sets the
// margin.
func TestAColdBurstLeavesTheNextAttemptTimed(t *testing.T) {
	base := time.Now()
	var offset time.Duration // moved by this goroutine only
	r := New(func(o *Options) { o.Clock = func() time.Time { return base.Add(offset) } })
	require.NoError(t, r.Err())
	ctx := inRegion("PutItem", "us-east-1")
	var releases []func(error) error
	for range 40 {
		release, err := r.GetAttemptToken(ctx)
		require.NoError(t, err)
		releases = append(releases, release)
	}
	offset += 800 * time.Millisecond
	for _, release := range releases {
		require.NoError(t, release(nil))
	}
	l := r.lanes.get(ctx)
	require.Zero(t, r.margin(ctx, l), "expect the cold burst to keep no margin")
	release, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	offset += 20 * time.Millisecond
	require.NoError(t, release(nil))
	assert.Equal(t, 40*time.Millisecond, r.margin(ctx, l), "expect the first warm attempt timed: twice its 20 ms")
}

// TestACutIsALowerBoundForTheLimitersWaitOnly: a new client whose first
// attempt came back in 150 ms (cold: no margin) and whose next attempts
// were each sent with 20 ms, then 60 ms, left and ended by the caller's
// deadline: behind the send-rate limiter, whose turns go to the callers
// that have waited longest, with the least time left, such a client sent
// every turn with no time for it and learnt nothing (helper-207). The send-rate wait now keeps the
// longest such cut for the attempt, 20 then 60 ms; the retries' margin
// keeps none (a cut is no sample: helper-211). A cancel is nothing; the
// first warm success is the estimate, and cuts after it are nothing.
func TestACutIsALowerBoundForTheLimitersWaitOnly(t *testing.T) {
	c := newSteppedClient(t)
	cancelled, cancel := context.WithCancel(c.op)
	cancel()
	sendMargin := func() time.Duration {
		t.Helper()
		return c.r.sendMargin(c.op, c.lane)
	}

	c.attempt(c.op, 150*time.Millisecond, nil)
	assert.Zero(t, sendMargin(), "expect the cold first attempt to keep no margin")
	c.attempt(c.expired, 20*time.Millisecond, c.ended)
	assert.Equal(t, 20*time.Millisecond, sendMargin())
	c.attempt(c.expired, 60*time.Millisecond, c.ended)
	c.attempt(c.expired, 10*time.Millisecond, c.ended)
	c.attempt(cancelled, time.Second, &smithy.CanceledError{Err: context.Canceled})
	assert.Equal(t, 60*time.Millisecond, sendMargin(), "expect the longest cut, and a cancel left out")
	assert.Zero(t, c.r.margin(c.op, c.lane), "expect no margin for the retries from cuts")

	c.attempt(c.op, 150*time.Millisecond, nil)
	assert.Equal(t, 150*time.Millisecond, sendMargin(), "expect the first warm success to be the estimate")
	assert.Equal(t, 300*time.Millisecond, c.r.margin(c.op, c.lane))
	c.attempt(c.expired, time.Second, c.ended)
	assert.Equal(t, 150*time.Millisecond, sendMargin(), "expect a warm client's cuts left out")

	// A new client whose every attempt its deadline ends: none is known
	// to be warm, since none came back to say when the client's one-time
	// costs (a credential fetch) were paid, so none bounds the wait
	// (helper-212); and a cut does not make later attempts warm.
	c = newSteppedClient(t)
	c.attempt(c.expired, time.Second, c.ended)
	c.attempt(c.expired, 100*time.Millisecond, c.ended)
	assert.Zero(t, c.r.sendMargin(c.op, c.lane))
	c.attempt(c.op, 300*time.Millisecond, nil)
	_, cold := c.lane.attempts.estimateOf(operationOf(c.op))
	assert.True(t, cold, "expect the first attempt back cold, whatever cuts came before it")
}

// TestAWarmClientsCutsLeaveItsMargins: a warm client of 2 ms attempts, five
// of which in a row hang until their callers' 1 s deadline: its margins
// stay as they were. Counted as samples, such cuts raised the margin to
// the deadline and refused retries that retry.NewStandard() made (a fifth
// of 50 ms answers hanging past 400 ms deadlines: 30-54 retries of 5xx
// refused in 10 s against 0-4; after a slow period, some 500 attempts'
// worth: helper-211).
func TestAWarmClientsCutsLeaveItsMargins(t *testing.T) {
	c := newSteppedClient(t)
	for range 8 {
		c.attempt(c.op, 2*time.Millisecond, nil)
	}
	for range 5 {
		c.attempt(c.expired, time.Second, c.ended)
	}
	assert.Equal(t, 4*time.Millisecond, c.r.margin(c.op, c.lane))
	assert.Equal(t, 2*time.Millisecond, c.r.sendMargin(c.op, c.lane))
}

// steppedClient is a Retryer whose clock only its attempts move, with the
// context of a PutItem's attempt, live and past its deadline, and the
// SDK's error for an attempt the deadline ended.
type steppedClient struct {
	t           *testing.T
	r           *Retryer
	lane        *lane
	offset      time.Duration
	op, expired context.Context
	ended       error
}

func newSteppedClient(t *testing.T) *steppedClient {
	base := time.Now()
	c := &steppedClient{t: t, ended: &smithy.CanceledError{Err: context.DeadlineExceeded}}
	c.r = New(func(o *Options) { o.Clock = func() time.Time { return base.Add(c.offset) } })
	require.NoError(t, c.r.Err())
	c.op = withOperation(context.Background(), "PutItem", "eu-west-1")
	expired, cancel := context.WithDeadline(c.op, time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	c.expired, c.lane = expired, c.r.lanes.get(c.op)
	return c
}

// attempt makes an attempt under ctx that takes took and ends with err.
func (c *steppedClient) attempt(ctx context.Context, took time.Duration, err error) {
	c.t.Helper()
	release, terr := c.r.GetAttemptToken(ctx)
	require.NoError(c.t, terr)
	c.offset += took
	require.NoError(c.t, release(err))
}
