package jitterretry_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// sequence returns a Do function that answers call n with answers[n-1], then
// with the last answer for ever, and counts its calls.
func sequence(answers ...func() error) (func(context.Context) error, *int) {
	calls := 0
	answer := script(answers...)
	return func(context.Context) error {
		calls++
		return answer(calls)
	}, &calls
}

// TestDoAgreesWithTheSDKPath: Do and the SDK's middleware run one retry
// decision. For the same failures they make the same attempts, charge the
// same tokens, wait the same (deterministic) delays, x-amz-retry-after
// included, and give up for the same reason.
func TestDoAgreesWithTheSDKPath(t *testing.T) {
	cases := map[string]struct {
		answers []func() error
		opts    func(*jitterretry.Options)
	}{
		"throttle, 500, success":           {answers: []func() error{throttleErr, serverErr, ok}},
		"throttles until attempts run out": {answers: []func() error{throttleErr}},
		"a retry-after hint":               {answers: []func() error{func() error { return retryAfter(7) }, ok}},
		"an empty budget": {
			answers: []func() error{serverErr},
			opts:    func(o *jitterretry.Options) { o.BucketCapacity, o.RetryCost, o.ThrottlingRetryCost = 20, 14, 5 },
		},
		"not retryable": {answers: []func() error{func() error { return asResponse(400, &modeled{"ValidationException"}) }}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			build := func(events *[]jitterretry.RetryEvent, gaveUp *[]*jitterretry.GiveUpError) *jitterretry.Retryer {
				return jitterretry.New(func(o *jitterretry.Options) {
					o.Jitter = delayers.StrategyExponential
					o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Millisecond, 2*time.Millisecond, 20*time.Millisecond
					o.FailFastOnEmptyBudget = true
					o.OnRetry = func(e jitterretry.RetryEvent) { *events = append(*events, e) }
					o.OnGiveUp = func(e *jitterretry.GiveUpError) { *gaveUp = append(*gaveUp, e) }
					if tc.opts != nil {
						tc.opts(o)
					}
				})
			}
			var sdkEvents, doEvents []jitterretry.RetryEvent
			var sdkGaveUp, doGaveUp []*jitterretry.GiveUpError
			viaSDK, viaDo := build(&sdkEvents, &sdkGaveUp), build(&doEvents, &doGaveUp)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			sdkAttempts, sdkErr := operation(ctx, viaSDK, script(tc.answers...))
			fn, doAttempts := sequence(tc.answers...)
			doErr := jitterretry.Do(ctx, viaDo, fn)

			assert.Equal(t, sdkAttempts, *doAttempts, "expect the same attempts")
			assert.Equal(t, viaSDK.Remaining(), viaDo.Remaining(), "expect the same tokens")
			assert.Equal(t, sdkErr == nil, doErr == nil, "expect the same outcome: sdk %v, Do %v", sdkErr, doErr)
			require.Equal(t, len(sdkEvents), len(doEvents), "expect the same retries")
			for i := range sdkEvents {
				assert.Equal(t, sdkEvents[i].Delay, doEvents[i].Delay, "retry %d: expect the same wait", i+1)
				assert.Equal(t, sdkEvents[i].Class, doEvents[i].Class, "retry %d: expect the same class", i+1)
			}
			var sdkMax, doMax *retry.MaxAttemptsError
			assert.Equal(t, errors.As(sdkErr, &sdkMax), errors.As(doErr, &doMax), "expect the same max-attempts error")
			assert.Equal(t, errors.Is(sdkErr, jitterretry.ErrRetryBudgetExhausted), errors.Is(doErr, jitterretry.ErrRetryBudgetExhausted),
				"expect the same budget refusal")
			reasons := func(gs []*jitterretry.GiveUpError) (rs []jitterretry.GiveUpReason) {
				for _, g := range gs {
					if g.Reason != jitterretry.GiveUpMaxAttempts { // the middleware checks attempts itself
						rs = append(rs, g.Reason)
					}
				}
				return rs
			}
			assert.Equal(t, reasons(sdkGaveUp), reasons(doGaveUp), "expect the same give-ups")
		})
	}
}

// TestDoEmptyBudgetBacksOffFirst: Do's closed-loop callers are the storm
// case, so an empty budget waits a backoff before refusing, as
// GetRetryToken does.
func TestDoEmptyBudgetBacksOffFirst(t *testing.T) {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential
		o.BaseDelay = 30 * time.Millisecond
		o.BucketCapacity, o.RetryCost = 10, 10
	})
	fn, _ := sequence(serverErr)
	start := time.Now()
	err := jitterretry.Do(context.Background(), r, fn)
	require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	// one 30 ms retry, then a 60 ms wait before the refusal
	assert.GreaterOrEqual(t, time.Since(start), 90*time.Millisecond)
}

// TestDoThrottleBase: a throttle waits ThrottleBaseDelay in Do too.
func TestDoThrottleBase(t *testing.T) {
	var delays []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential
		o.BaseDelay, o.ThrottleBaseDelay = time.Millisecond, 40*time.Millisecond
		o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
	})
	fn, _ := sequence(throttleErr, ok)
	require.NoError(t, jitterretry.Do(context.Background(), r, fn))
	assert.Equal(t, []time.Duration{40 * time.Millisecond}, delays)
}

// TestDoBacksOffByTheClassifiedClass: the backoff's base follows the class
// DoOptions.Classify gave, as the cost, the events and the metrics do. Until
// an outside review, the loop's jitter sequence picked the base from its own
// throttle check of the error: an application error classified as a
// throttle paid the throttle's cost and backed off on BaseDelay, and an SDK
// throttle classified as transient backed off on ThrottleBaseDelay.
func TestDoBacksOffByTheClassifiedClass(t *testing.T) {
	busy := errors.New("app: busy")
	for name, tc := range map[string]struct {
		err   func() error
		class jitterretry.ErrorClass
		want  time.Duration
	}{
		"an application error classified as a throttle": {func() error { return busy }, jitterretry.ClassThrottle, 40 * time.Millisecond},
		"a throttle classified as transient":            {throttleErr, jitterretry.ClassTransient, time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			var events []jitterretry.RetryEvent
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Jitter = delayers.StrategyExponential
				o.BaseDelay, o.ThrottleBaseDelay = time.Millisecond, 40*time.Millisecond
				o.OnRetry = func(e jitterretry.RetryEvent) { events = append(events, e) }
			})
			fn, _ := sequence(tc.err, ok)
			classify := func(err error) jitterretry.ErrorClass {
				if err == nil {
					return jitterretry.ClassNotRetryable
				}
				return tc.class
			}
			require.NoError(t, jitterretry.Do(context.Background(), r, fn, func(o *jitterretry.DoOptions) { o.Classify = classify }))
			require.Len(t, events, 1)
			assert.Equal(t, tc.class, events[0].Class)
			assert.Equal(t, tc.want, events[0].Delay)
		})
	}
}

// TestDoConflictsLeaveTheBucketAlone: a storm of conflicts, from many loops
// at once, takes no token from the bucket the client's SDK retries use.
func TestDoConflictsLeaveTheBucketAlone(t *testing.T) {
	r := jitterretry.New(fast)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A retry after a 5xx answered by a conflict gets its
			// cost back, as through the SDK's middleware.
			fn, _ := sequence(conflictErr, serverErr, conflictErr, conflictErr, ok)
			assert.NoError(t, jitterretry.Do(context.Background(), r, fn))
		}()
	}
	wg.Wait()
	assert.Equal(t, uint(500), r.Remaining(), "expect 96 conflicts, and 32 retries they answered, to cost no token")
}

// TestDoConflictBudget: conflicts have a budget of their own, separate from
// MaxAttempts, and running out gives a typed error around the last
// conflict.
func TestDoConflictBudget(t *testing.T) {
	r := jitterretry.New(fast)
	last := conflictErr()
	fn, calls := sequence(conflictErr, conflictErr, conflictErr, conflictErr, fail(last))
	err := jitterretry.Do(context.Background(), r, fn, func(o *jitterretry.DoOptions) { o.MaxConflicts = 4 })
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, jitterretry.GiveUpConflicts, gu.Reason)
	assert.Equal(t, 5, *calls, "expect 4 conflicts retried, more than the 3 attempts of the retryer")
	assert.ErrorIs(t, err, last, "expect the last conflict inside")
	assert.Equal(t, "jitterretry: conflict budget exhausted after 5 conflicts: "+last.Error(), err.Error())
	fn, _ = sequence(fail(last))
	err = jitterretry.Do(context.Background(), r, fn, func(o *jitterretry.DoOptions) { o.MaxConflicts = 0 })
	assert.Equal(t, "jitterretry: conflict budget exhausted after 1 conflict: "+last.Error(), err.Error())

	// A failure between the conflicts is an attempt, not a conflict: the
	// message counts what the budget counts (helper-129).
	fn, calls = sequence(conflictErr, serverErr, conflictErr, conflictErr, fail(last))
	err = jitterretry.Do(context.Background(), r, fn, func(o *jitterretry.DoOptions) { o.MaxConflicts = 3 })
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, 5, *calls)
	assert.Equal(t, 5, gu.Attempt, "expect Attempt to number fn's calls")
	assert.Equal(t, "jitterretry: conflict budget exhausted after 4 conflicts: "+last.Error(), err.Error())

	// The default budget is far above the SDK's three attempts.
	fn, calls = sequence(conflictErr, conflictErr, conflictErr, conflictErr, conflictErr, conflictErr, ok)
	require.NoError(t, jitterretry.Do(context.Background(), r, fn))
	assert.Equal(t, 7, *calls)
}

// TestDoConflictReport: Conflict marks an error as a conflict, keeps the
// error inside, and its versions steer the backoff.
func TestDoConflictReport(t *testing.T) {
	plain := errors.New("version moved")
	marked := jitterretry.Conflict(plain, 3, 9)
	assert.Equal(t, jitterretry.ClassConflict, jitterretry.Classify(marked))
	assert.ErrorIs(t, marked, plain)
	assert.Nil(t, jitterretry.Conflict(nil, 1, 2))
	var typedNil *modeled // a nil pointer in an error: its Error would dereference it
	assert.NotPanics(t, func() {
		assert.Equal(t, "<nil *jitterretry_test.modeled>", jitterretry.Conflict(typedNil, 1, 2).Error())
	}, "expect a conflict holding a nil pointer to print as such, as a *GiveUpError does")

	var delays []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
	})
	attempt := 0
	require.NoError(t, jitterretry.Do(context.Background(), r, func(context.Context) error {
		attempt++
		time.Sleep(time.Millisecond) // a round trip
		if attempt < 4 {
			return jitterretry.Conflict(plain, int64(10*attempt), int64(10*attempt+2))
		}
		return nil
	}))
	require.Len(t, delays, 3)
	for _, d := range delays {
		assert.Less(t, d, time.Second, "expect delays of a few round trips, got %v", delays)
	}
}

// TestDoFirstConflictIgnoresTheSDKsRetriesInsideFn: fn's SDK call was
// throttled and retried by the SDK's middleware for about a second before
// its write conflicted. The second says nothing about the item's
// contention: the first conflict's backoff follows the attempts' own time
// (10 ms each here), not fn's, and is far below a second. Time is the
// Retryer's injected clock, advanced by the attempts and by the SDK's
// throttle retry; the test never reads the wall clock.
func TestDoFirstConflictIgnoresTheSDKsRetriesInsideFn(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	var firstConflicts []time.Duration
	var cancel context.CancelFunc
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.ThrottleBaseDelay = time.Millisecond, time.Millisecond // the SDK's real sleeps stay short
		o.Source = delayers.NewSource(1)
		o.Clock = clock
		o.OnRetry = func(e jitterretry.RetryEvent) {
			switch e.Class {
			case jitterretry.ClassThrottle:
				advance(time.Second) // the SDK's retry of the throttle, as long as a real one can be
			case jitterretry.ClassConflict:
				firstConflicts = append(firstConflicts, e.Delay)
				cancel() // one conflict is enough: Do's sleep ends at once
			}
		}
	})
	for loop := range 10 {
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		err := jitterretry.Do(ctx, r, func(ctx context.Context) error {
			err := stackOperation(ctx, r, nil, func(_ context.Context, attempt int) error {
				advance(10 * time.Millisecond) // the attempt's round trip
				if attempt == 1 {
					return throttleErr()
				}
				return conflictErr()
			})
			return jitterretry.Conflict(err, int64(10*loop), int64(10*loop+3))
		})
		cancel()
		var gu *jitterretry.GiveUpError
		require.ErrorAs(t, err, &gu)
		require.Equal(t, jitterretry.GiveUpCanceled, gu.Reason, "loop %d: expect the test to end the loop after its first conflict", loop)
	}
	require.Len(t, firstConflicts, 10)
	for _, d := range firstConflicts {
		assert.Less(t, d, 500*time.Millisecond, "expect first-conflict backoffs of attempts of 10 ms, not of a 1 s throttle retry, got %v", firstConflicts)
	}
}

// TestDoLeavesWhatTheSDKGaveUpOn: an error the SDK's middleware already
// retried and gave up on is not retried again by default, so retries do not
// multiply across the two layers.
func TestDoLeavesWhatTheSDKGaveUpOn(t *testing.T) {
	r := jitterretry.New(fast)
	sdkGaveUp := &retry.MaxAttemptsError{Attempt: 3, Err: throttleErr()}
	fn, calls := sequence(fail(sdkGaveUp))
	err := jitterretry.Do(context.Background(), r, fn)
	assert.Same(t, sdkGaveUp, err)
	assert.Equal(t, 1, *calls)

	// retry.Standard's middleware joins the operation's error with its
	// bucket's refusal when it has no token for the retry.
	quota := errors.Join(throttleErr(), fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{Available: 0, Requested: 5}))
	fn, calls = sequence(fail(quota))
	assert.Same(t, quota, jitterretry.Do(context.Background(), r, fn))
	assert.Equal(t, 1, *calls, "expect a throttle the SDK's bucket refused not retried again")

	fn, calls = sequence(serverErr, ok) // a plain function: the SDK's rules
	require.NoError(t, jitterretry.Do(context.Background(), r, fn))
	assert.Equal(t, 2, *calls)
}

// TestDoReportsTheSDKsAttemptsWhenItRanOutOfThem: when fn's SDK call ran
// out of attempts, the give-up OnGiveUp hears of counts the SDK's attempts,
// not Do's calls of fn: its message and its *retry.MaxAttemptsError said 1
// where the SDK had made 3 (an outside review).
func TestDoReportsTheSDKsAttemptsWhenItRanOutOfThem(t *testing.T) {
	var heard []*jitterretry.GiveUpError
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.OnGiveUp = func(g *jitterretry.GiveUpError) { heard = append(heard, g) }
	})
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		_, err := operation(ctx, r, script(throttleErr)) // the SDK's middleware
		return err
	})
	var sdk *retry.MaxAttemptsError
	require.ErrorAs(t, err, &sdk)
	require.Equal(t, 3, sdk.Attempt)

	require.Len(t, heard, 1)
	g := heard[0]
	assert.Equal(t, jitterretry.GiveUpMaxAttempts, g.Reason)
	var reported *retry.MaxAttemptsError
	require.ErrorAs(t, g, &reported)
	assert.Equal(t, 3, reported.Attempt, "expect the SDK's attempts")
	assert.True(t, strings.HasPrefix(g.Error(), "jitterretry: exceeded maximum number of attempts, 3: "), g.Error())
}

// TestDoRetriesATimeoutOfFnsOwnContext: a deadline of a context fn made
// for itself is a timeout, retried as the SDK's checks retry one, while a
// cancel of fn's own is not; as DoOptions.Classify says.
func TestDoRetriesATimeoutOfFnsOwnContext(t *testing.T) {
	r := jitterretry.New(fast)
	ownEnd := func(cancelIt bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			own, cancel := context.WithTimeout(ctx, time.Nanosecond)
			if cancelIt {
				own, cancel = context.WithCancel(ctx)
				cancel()
			}
			defer cancel()
			<-own.Done()
			return own.Err()
		}
	}
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error { calls++; return ownEnd(false)(ctx) })
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	assert.Equal(t, jitterretry.GiveUpMaxAttempts, g.Reason)
	assert.Equal(t, 3, calls, "expect a timeout of fn's own retried")

	calls = 0
	err = jitterretry.Do(context.Background(), r, func(ctx context.Context) error { calls++; return ownEnd(true)(ctx) })
	assert.Equal(t, context.Canceled, err)
	assert.Equal(t, 1, calls, "expect a cancel of fn's own returned as it is")
}

// TestNestedDoGivesUpOnce: an inner Do that gave up on its conflicts ends
// the outer loop too, as any refusal of the retry machinery does, instead
// of multiplying the inner loop's calls by the outer's budget.
func TestNestedDoGivesUpOnce(t *testing.T) {
	r := jitterretry.New(fast)
	outer, inner := 0, 0
	twoConflicts := func(o *jitterretry.DoOptions) { o.MaxConflicts = 2 }
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		outer++
		return jitterretry.Do(ctx, r, func(context.Context) error {
			inner++
			return conflictErr()
		}, twoConflicts)
	}, twoConflicts)
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, jitterretry.GiveUpConflicts, gu.Reason)
	assert.Equal(t, 1, outer, "expect the outer loop to stop at the inner loop's refusal")
	assert.Equal(t, 3, inner)

	// A conflict the SDK's middleware was told to retry
	// (retry.AddWithErrorCodes), and that the bucket then refused, is
	// still a conflict to the loop, as one it ran out of attempts on is.
	for _, gaveUp := range []error{
		&jitterretry.GiveUpError{Reason: jitterretry.GiveUpBudget, Err: conflictErr()},
		&retry.MaxAttemptsError{Attempt: 3, Err: conflictErr()},
	} {
		calls := 0
		require.NoError(t, jitterretry.Do(context.Background(), r, func(context.Context) error {
			if calls++; calls == 1 {
				return gaveUp
			}
			return nil
		}))
		assert.Equal(t, 2, calls, "%T", gaveUp)
	}
}

// TestDoClassifiesEachFailureOnce: a caller's Classify (which may count,
// log or look the error up) is asked once per failed call of fn, also for
// the call that follows a paid retry.
func TestDoClassifiesEachFailureOnce(t *testing.T) {
	r := jitterretry.New(fast)
	asked := map[error]int{}
	failures := []error{throttleErr(), serverErr(), conflictErr()}
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		if calls++; calls <= len(failures) {
			return failures[calls-1]
		}
		return nil
	}, func(o *jitterretry.DoOptions) {
		o.Classify = func(err error) jitterretry.ErrorClass {
			asked[err]++
			return jitterretry.Classify(err)
		}
	})
	require.NoError(t, err)
	require.Equal(t, len(failures)+1, calls)
	for i, f := range failures {
		assert.Equal(t, 1, asked[f], "failure %d classified", i+1)
	}
}

// TestDoTreatsAClassItDoesNotKnowAsNotRetryable: a Classify that returns a
// value outside the four classes (a cast, a bug) is not retried: the loop
// cannot tell what such an error costs or how it backs off, and its String
// says what it is rather than pass for one of the four.
func TestDoTreatsAClassItDoesNotKnowAsNotRetryable(t *testing.T) {
	unknown := jitterretry.ErrorClass(9)
	assert.Equal(t, "ErrorClass(9)", unknown.String())
	var gaveUp []*jitterretry.GiveUpError
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e) }
	})
	boom := errors.New("boom")
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		calls++
		return boom
	}, func(o *jitterretry.DoOptions) { o.Classify = func(error) jitterretry.ErrorClass { return unknown } })
	assert.Same(t, boom, err, "expect fn's error as it is, as for any error not retried")
	assert.Equal(t, 1, calls)
	require.Len(t, gaveUp, 1)
	assert.Equal(t, jitterretry.GiveUpNotRetryable, gaveUp[0].Reason)
	assert.Equal(t, uint(500), r.Remaining(), "expect no token spent")
}

// TestDoLeavesAMarkedConflictTheMiddlewareGaveUpOn: a conflict that its
// error marks retryable (RetryableError() true) is retried by the SDK's
// middleware, as the SDK's own retryer does; when the middleware gives up on
// it, Do must not retry it again, or retries multiply (3 × 3 attempts, paid
// from the bucket: an outside review).
func TestDoLeavesAMarkedConflictTheMiddlewareGaveUpOn(t *testing.T) {
	r := jitterretry.New(fast)
	marked := &retryableMark{conflictErr()}
	require.True(t, r.IsErrorRetryable(marked), "expect the middleware to retry it, as the SDK's")
	gaveUp := &retry.MaxAttemptsError{Attempt: 3, Err: marked}
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		calls++
		return gaveUp
	})
	assert.Same(t, gaveUp, err)
	assert.Equal(t, 1, calls, "expect no retry of what the middleware gave up on")
	assert.Equal(t, uint(500), r.Remaining())
}

// retryableMark marks its error retryable, as an error's RetryableError()
// method does for the SDK.
type retryableMark struct{ error }

func (e *retryableMark) RetryableError() bool { return true }
func (e *retryableMark) Unwrap() error        { return e.error }

// TestDoReportsACallTheContextEndedAsCanceled: fn's error from a request
// the caller's context ended is not retried and is returned as it is, and
// reported as the context done, not as an error that is not retryable. A
// context of fn's own that ended, or a refusal made ahead of a deadline
// still to come, is no such report.
func TestDoReportsACallTheContextEndedAsCanceled(t *testing.T) {
	run := func(ctx context.Context, fn func(ctx context.Context) error) (error, []*jitterretry.GiveUpError) {
		var gaveUp []*jitterretry.GiveUpError
		r := jitterretry.New(fast, func(o *jitterretry.Options) {
			o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e) }
		})
		return jitterretry.Do(ctx, r, fn), gaveUp
	}
	t.Run("the caller's deadline", func(t *testing.T) {
		// The deadline must pass inside fn: on a machine busy enough to
		// pass 10 ms before Do called fn, Do refused the call before it
		// (a CI run beside two others), so the timeout grows until fn ran.
		ended := &smithy.CanceledError{Err: context.DeadlineExceeded}
		var err error
		var gaveUp []*jitterretry.GiveUpError
		for timeout := 10 * time.Millisecond; ; timeout *= 10 {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			called := false
			err, gaveUp = run(ctx, func(ctx context.Context) error { called = true; <-ctx.Done(); return ended })
			cancel()
			if called || timeout >= 10*time.Second {
				require.True(t, called, "expect fn called within a %v deadline", timeout)
				break
			}
		}
		assert.Same(t, ended, err, "expect fn's error as it is")
		require.Len(t, gaveUp, 1)
		assert.Equal(t, jitterretry.GiveUpCanceled, gaveUp[0].Reason)
		assert.ErrorIs(t, gaveUp[0], context.DeadlineExceeded)
	})
	t.Run("fn's own context", func(t *testing.T) {
		err, gaveUp := run(context.Background(), func(ctx context.Context) error {
			own, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-own.Done()
			return &smithy.CanceledError{Err: own.Err()}
		})
		require.Error(t, err)
		require.Len(t, gaveUp, 1)
		assert.Equal(t, jitterretry.GiveUpNotRetryable, gaveUp[0].Reason)
	})
	t.Run("a deadline refusal from inside fn", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		refusal := &jitterretry.GiveUpError{Reason: jitterretry.GiveUpDeadline, Err: serverErr()}
		err, gaveUp := run(ctx, func(context.Context) error { return refusal })
		assert.Same(t, refusal, err)
		require.Len(t, gaveUp, 1)
		assert.Equal(t, jitterretry.GiveUpNotRetryable, gaveUp[0].Reason, "expect no cancellation: the context is live")
	})
}

func TestDoOutcomes(t *testing.T) {
	boom := errors.New("boom")
	always := func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
	cases := map[string]struct {
		opts   func(*jitterretry.Options)
		ctx    func() (context.Context, context.CancelFunc)
		doOpts func(*jitterretry.DoOptions)
		answer func() error
		calls  int
		check  func(t *testing.T, err error)
	}{
		"not retryable returns the error itself": {
			answer: fail(boom), calls: 1,
			check: func(t *testing.T, err error) { assert.Same(t, boom, err) },
		},
		"attempts run out": {
			doOpts: func(o *jitterretry.DoOptions) { o.Classify = always },
			answer: fail(boom), calls: 3,
			check: func(t *testing.T, err error) {
				var m *retry.MaxAttemptsError
				require.ErrorAs(t, err, &m, "expect the SDK's max-attempts type to match")
				assert.Equal(t, 3, m.Attempt)
				assert.ErrorIs(t, err, boom)
			},
		},
		"unlimited attempts stop at the deadline": {
			ctx: func() (context.Context, context.CancelFunc) {
				// Long enough that fn is called before it, on a busy
				// machine too (helper-230: 50 ms may pass first), the
				// backoffs long enough that the budget outlasts it.
				return context.WithTimeout(context.Background(), 500*time.Millisecond)
			},
			opts:   func(o *jitterretry.Options) { o.BaseDelay, o.MaxBackoff = 20*time.Millisecond, time.Second },
			doOpts: func(o *jitterretry.DoOptions) { o.Classify, o.MaxAttempts = always, jitterretry.UnlimitedAttempts },
			answer: fail(boom), calls: -1,
			check: func(t *testing.T, err error) {
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.ErrorIs(t, err, boom)
			},
		},
		"budget refused": {
			opts:   func(o *jitterretry.Options) { o.BucketCapacity, o.RetryCost, o.FailFastOnEmptyBudget = 14, 14, true },
			doOpts: func(o *jitterretry.DoOptions) { o.Classify = always },
			answer: fail(boom), calls: 2,
			check: func(t *testing.T, err error) {
				var q ratelimit.QuotaExceededError
				require.ErrorAs(t, err, &q)
				assert.Equal(t, uint(14), q.Requested)
				assert.ErrorIs(t, err, boom)
			},
		},
		"cancelled before the first call": {
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			answer: fail(boom), calls: 0,
			check: func(t *testing.T, err error) { assert.ErrorIs(t, err, context.Canceled) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			fn, calls := sequence(tc.answer)
			err := jitterretry.Do(ctx, r, fn, tc.doOpts)
			if tc.calls >= 0 {
				assert.Equal(t, tc.calls, *calls)
			}
			tc.check(t, err)
		})
	}
}

func TestDoCancelStopsTheSleepAndRefunds(t *testing.T) {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Hour, time.Hour
		o.DisableDeadlineGiveUp = true
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	fn, _ := sequence(serverErr)
	start := time.Now()
	err := jitterretry.Do(ctx, r, fn)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(start), time.Minute)
	assert.Equal(t, uint(500), r.Remaining(), "expect the unsent retry's tokens back")
}

func TestDoBadInput(t *testing.T) {
	r := jitterretry.New()
	var oe *jitterretry.OptionsError
	assert.ErrorAs(t, jitterretry.Do(context.Background(), r, nil), &oe)
	assert.ErrorAs(t, jitterretry.Do(context.Background(), r, func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { o.MaxAttempts = 0 }), &oe)
	assert.Equal(t, "DoOptions.MaxAttempts", oe.Option)
	assert.ErrorAs(t, jitterretry.Do(context.Background(), r, func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { o.MaxConflicts = -7 }), &oe)
	//nolint:staticcheck // a nil context is bad input Do must survive
	assert.NoError(t, jitterretry.Do(nil, r, func(context.Context) error { return nil }))
}

// TestDoConflictsSlowDownWhileFnIsThrottled: conflicts on an item whose
// table is at capacity look like little contention (the capacity holds the
// win rate down), so the contention backoff alone would keep sending into
// the throttles. A throttle that fn's own SDK calls met (and retried) since
// the loop's previous call makes the conflict wait at least the Retryer's
// throttle backoff, and so does one of another caller in the loop's named
// partition (a scope the caller chose: the loops on one table back off
// together); a throttle of another caller of the client in the default
// partition does not: counted, one goroutine throttled on another table
// every 100 ms made 32 loops on one item 50 times slower.
// The contention backoff is drawn from the attempts' learnt time: on the
// wall clock one attempt descheduled for 7 ms or more drew it past the
// throttle base. Time is the Retryer's injected clock, which only the
// attempts advance, 1 ms each, so the contention backoff stays a few round
// trips (30 ms at most here), well under the base, and the floor alone can
// lift it over.
//
// With the send-rate limiter, each SDK service of a partition has a lane of
// its own: a throttle noted on the service's lane never reached the loop,
// which looks at the partition's (helper-221: 21 ms where 200 ms).
func TestDoConflictsSlowDownWhileFnIsThrottled(t *testing.T) {
	for _, sendRate := range []bool{false, true} {
		t.Run(fmt.Sprint("SendRate ", sendRate), func(t *testing.T) { doConflictsSlowDownWhileFnIsThrottled(t, sendRate) })
	}
}

func doConflictsSlowDownWhileFnIsThrottled(t *testing.T, sendRate bool) {
	const throttleBase = 200 * time.Millisecond
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	var cancel context.CancelFunc
	var conflicts []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential // a throttle's first backoff is exactly throttleBase
		o.BaseDelay, o.ThrottleBaseDelay = time.Millisecond, throttleBase
		o.Source = delayers.NewSource(1)
		o.Clock = clock
		o.PartitionKey = jitterretry.PartitionFromContext
		if sendRate {
			o.SendRate = &jitterretry.SendRateOptions{}
		}
		o.OnRetry = func(e jitterretry.RetryEvent) {
			if e.Class == jitterretry.ClassConflict {
				conflicts = append(conflicts, e.Delay)
				cancel() // Do's sleep ends at once
			}
		}
	})
	// The SDK's operations carry their service ID; stackOperation's
	// stacks do not clear it from the context.
	ddb := func(ctx context.Context) context.Context { return awsmiddle.SetServiceID(ctx, "DynamoDB") }
	throttledOnce := func(_ context.Context, attempt int) error {
		advance(time.Millisecond) // the attempt's round trip
		if attempt == 1 {
			return throttleErr()
		}
		return conflictErr()
	}
	inConflict := func(ctx context.Context) error {
		return stackOperation(ddb(ctx), r, nil, func(context.Context, int) error {
			advance(time.Millisecond)
			return conflictErr()
		})
	}
	orders := jitterretry.WithPartition(context.Background(), "orders")
	cases := []struct {
		name      string
		partition context.Context // the loop's
		send      func(fnCtx context.Context) error
		floored   bool
	}{
		{"nothing throttled", context.Background(), inConflict, false},
		{"another caller of the client throttled meanwhile", context.Background(), func(ctx context.Context) error {
			_ = stackOperation(ddb(context.Background()), r, nil, throttledOnce)
			return inConflict(ctx)
		}, false},
		{"fn's own call throttled, retried, then in conflict", context.Background(), func(ctx context.Context) error {
			return stackOperation(ddb(ctx), r, nil, throttledOnce)
		}, true},
		{"fn's call inside a Do loop of its own throttled, retried, then in conflict", context.Background(), func(ctx context.Context) error {
			_ = jitterretry.Do(ctx, r, func(ctx context.Context) error {
				_ = stackOperation(ddb(ctx), r, nil, throttledOnce)
				return nil
			})
			return inConflict(ctx)
		}, true},
		{"another caller of the loop's named partition throttled meanwhile", orders, func(ctx context.Context) error {
			_ = stackOperation(ddb(orders), r, nil, throttledOnce)
			return inConflict(ctx)
		}, true},
		{"another partition throttled meanwhile", orders, func(ctx context.Context) error {
			_ = stackOperation(ddb(jitterretry.WithPartition(context.Background(), "users")), r, nil, throttledOnce)
			return inConflict(ctx)
		}, false},
	}
	for _, tc := range cases {
		conflicts = nil
		var ctx context.Context
		ctx, cancel = context.WithCancel(tc.partition)
		err := jitterretry.Do(ctx, r, func(ctx context.Context) error {
			return jitterretry.Conflict(tc.send(ctx), 1, 3)
		})
		cancel()
		var gu *jitterretry.GiveUpError
		require.ErrorAs(t, err, &gu, tc.name)
		require.Equal(t, jitterretry.GiveUpCanceled, gu.Reason, tc.name)
		require.Len(t, conflicts, 1, tc.name)
		if tc.floored {
			assert.GreaterOrEqual(t, conflicts[0], throttleBase, "%s: expect at least the throttle backoff", tc.name)
		} else {
			assert.Less(t, conflicts[0], throttleBase, "%s: expect the contention backoff", tc.name)
		}
	}
}

// TestDoSuccessfulRetryLeavesLaterIncrementsAlone: a Do loop whose retry
// succeeds gets the retry's cost back and nothing else; later first-attempt
// successes through the SDK's middleware each still earn NoRetryIncrement.
func TestDoSuccessfulRetryLeavesLaterIncrementsAlone(t *testing.T) {
	r := jitterretry.New(fast)
	ctx := context.Background()
	spendTokens(t, r, 100) // so that increments show
	start := r.Remaining()
	for range 5 {
		calls := 0
		require.NoError(t, jitterretry.Do(ctx, r, func(context.Context) error {
			if calls++; calls == 1 {
				return throttleErr()
			}
			return nil
		}))
	}
	assert.Equal(t, start, r.Remaining(), "expect each Do retry's cost back, and no more")
	for range 10 {
		_, err := operation(ctx, r, script(ok))
		require.NoError(t, err)
	}
	assert.Equal(t, start+10, r.Remaining(), "expect +1 for each first-attempt success after the Do loops")
}

// twice is an error that joins the same error twice, with a short message.
type twice struct{ of error }

func (e *twice) Error() string   { return "twice" }
func (e *twice) Unwrap() []error { return []error{e.of, e.of} }

// TestDoReadsAJoinOfJoinsInBoundedTime: fn's error joined of itself forty
// levels deep has 2^40 paths; Do reads a bounded number of its nodes, and
// reports it, its own error, once.
func TestDoReadsAJoinOfJoinsInBoundedTime(t *testing.T) {
	var reports atomic.Int32
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.OnGiveUp = func(*jitterretry.GiveUpError) { reports.Add(1) }
	})
	wide := errors.New("own")
	for range 40 {
		wide = &twice{wide}
	}
	err := jitterretry.Do(context.Background(), r, func(context.Context) error { return wide })
	require.True(t, err == wide, "expect fn's own error back, got %v", err)
	assert.Equal(t, int32(1), reports.Load())
}

// selfCycle is an error whose Unwrap returns itself: errors.As follows it
// for ever.
type selfCycle struct{}

func (e *selfCycle) Error() string { return "cycle" }
func (e *selfCycle) Unwrap() error { return e }

// valueUnwrap has a value Unwrap: a nil *valueUnwrap panics on it.
type valueUnwrap struct{ err error }

func (e valueUnwrap) Error() string { return "value unwrap" }
func (e valueUnwrap) Unwrap() error { return e.err }

// TestMalformedErrorChainsAreNotRetried: an error whose chain has a cycle,
// or a nil pointer deeper than the classifier reads, next to a conflict's
// mark or a throttle, or under a retryable mark, is not retried by Do nor
// the Retryer (the SDK's checks would loop for ever on the cycle, or panic
// on the nil), and nothing hangs or panics: past the walk's depth, in a
// chain of single wraps, read without maps, and through a join, read with
// them.
func TestMalformedErrorChainsAreNotRetried(t *testing.T) {
	var deepNil error = (*valueUnwrap)(nil)
	for range 70 {
		deepNil = fmt.Errorf("layer: %w", deepNil)
	}
	past := func(err error) error { // under more wrappers than the walk reads
		for range 100 {
			err = fmt.Errorf("layer: %w", err)
		}
		return err
	}
	three := &link{}
	three.to = &link{to: &link{to: three}}
	throughJoin := &link{}
	throughJoin.to = errors.Join(errors.New("plain"), throughJoin)
	for name, bad := range map[string]error{
		"a cycle":                      &selfCycle{},
		"a nil, deep":                  deepNil,
		"a cycle, deep":                fmt.Errorf("%w", &selfCycle{}),
		"a cycle of three, past":       past(three),
		"a cycle through a join, past": past(throughJoin),
		"a nil past a join, past":      past(errors.Join(errors.New("plain"), past((*valueUnwrap)(nil)))),
	} {
		t.Run(name, func(t *testing.T) {
			err := errors.Join(bad, jitterretry.Conflict(errors.New("conditional check failed"), 1, 2))
			r := jitterretry.New(fast)
			calls := 0
			var got error
			require.NotPanics(t, func() {
				got = jitterretry.Do(context.Background(), r, func(context.Context) error { calls++; return err })
			})
			assert.Equal(t, 1, calls, "expect no retry of a malformed error")
			assert.True(t, got == err, "expect fn's error back")
			assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(err))
			assert.False(t, r.IsErrorRetryable(errors.Join(bad, throttleErr())))
			assert.False(t, r.IsErrorRetryable(&retryableMark{bad}), "expect the chain not retried under a retryable mark")
			assert.False(t, r.IsErrorRetryable(fmt.Errorf("%w: %w", throttleErr(), bad)), "expect a throttle beside it not retried")
			// (Not through the SDK's middleware: its clock-skew check, an
			// errors.As before IsErrorRetryable, loops or panics itself.)
		})
	}
}

// TestARetryableErrorPastTheWalksDepthIsNotFound: the classifier reads a
// chain 64 wrappers deep, so that a decision's cost is bounded; a throttle
// under more is not found, and not retried, where the SDK's errors.As
// reads any depth and retries it (a difference the README lists; helper-236
// measured 1,000 wrappers). Within the depth, it is found.
func TestARetryableErrorPastTheWalksDepthIsNotFound(t *testing.T) {
	wrapped := func(n int) error {
		err := throttleErr()
		for range n {
			err = fmt.Errorf("layer: %w", err)
		}
		return err
	}
	r := jitterretry.New(fast)
	shallow, deep := wrapped(63), wrapped(64) // throttleErr is a response error over the API error
	assert.Equal(t, jitterretry.ClassThrottle, jitterretry.Classify(shallow))
	assert.True(t, r.IsErrorRetryable(shallow))
	assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(deep))
	assert.False(t, r.IsErrorRetryable(deep))
	assert.True(t, retry.NewStandard().IsErrorRetryable(deep), "expect the SDK to find it at any depth")
}

// countedWrap wraps err and counts the calls of its methods.
type countedWrap struct {
	err            error
	unwraps, texts *atomic.Int64
}

func (w countedWrap) Error() string { w.texts.Add(1); return "proxy: " + w.err.Error() }
func (w countedWrap) Unwrap() error { w.unwraps.Add(1); return w.err }

// TestADeepChainOfConnectionErrorsCostsInProportionToItsDepth: a chain of
// nested url and net errors (a tunnelling dialer's, say) far deeper than
// the walk reads is judged on work in proportion to its depth, and its text,
// which grows as the square of the depth, is read a few times, not at
// every level (helper-254: not at all lost a wide join's broken
// connections, told by their text, which the SDK retries). The connection
// check went into every nested url or net error, formatting the rest of
// the chain at each, as the SDK's does: a chain of 1,600 cost seconds a
// decision (helper-250), where the README says the walk's bounds keep a
// decision's cost bounded. Counted in method calls, not time.
func TestADeepChainOfConnectionErrorsCostsInProportionToItsDepth(t *testing.T) {
	var unwraps, texts atomic.Int64
	chain := func(n int) error {
		var err error = errors.New("proxy said no")
		for i := range n {
			switch i % 3 {
			case 0:
				err = &net.OpError{Op: "read", Net: "tcp", Err: err}
			case 1:
				err = &url.Error{Op: "Post", URL: "https://dynamodb.us-east-1.amazonaws.com/", Err: err}
			default:
				err = countedWrap{err, &unwraps, &texts}
			}
		}
		return err
	}
	r := jitterretry.New()
	calls := map[int]int64{}
	for _, n := range []int{900, 1800} {
		err := chain(n)
		unwraps.Store(0)
		texts.Store(0)
		assert.False(t, r.IsErrorRetryable(err), "n=%d: expect the proxy's refusal not retried, as by the SDK", n)
		calls[n] = unwraps.Load()
		// n/3 wrappers: the text of the whole, read a few times at most.
		assert.LessOrEqual(t, texts.Load(), int64(4*n/3), "n=%d: expect the chain's text read a few times, not at every level", n)
	}
	t.Logf("Unwrap calls of the wrappers: %v", calls)
	assert.Less(t, float64(calls[1800]), 2.5*float64(calls[900]), "expect work in proportion to the depth")
}

// TestBrokenConnectionsToldByTextInALargeChainAreRetried: a chain larger
// than the walk reads whose text says a connection broke is retried, as by
// the SDK: a batch's errors joined (300, one level deep), and a broken
// connection under 100 fmt.Errorf wrappers, whose text each formatted once.
// Reading no text of such chains lost both (helper-254).
func TestBrokenConnectionsToldByTextInALargeChainAreRetried(t *testing.T) {
	errs := make([]error, 300)
	for i := range errs {
		errs[i] = fmt.Errorf("worker %d: read tcp: connection reset by peer", i)
	}
	deep := errors.New("tls: read: connection reset by peer")
	for i := range 100 {
		deep = fmt.Errorf("layer %d: %w", i, deep)
	}
	for name, err := range map[string]error{"a wide join": errors.Join(errs...), "a deep chain": deep} {
		assert.True(t, retry.NewStandard().IsErrorRetryable(err), "%s: the SDK retries it", name)
		assert.True(t, jitterretry.New().IsErrorRetryable(err), "%s: expect it retried, as by the SDK", name)
		assert.Equal(t, jitterretry.ClassTransient, jitterretry.Classify(err), name)
	}
}

// wideSelf is a join of many plain errors whose last entry is itself: the
// walk reads its budget before it reaches the cycle.
type wideSelf struct{ errs []error }

func (e *wideSelf) Error() string   { return "wide" }
func (e *wideSelf) Unwrap() []error { return e.errs }

// posing is an error with an As method, which only errors.As can read:
// the classifier hands an error holding one to the SDK's checks.
type posing struct{}

func (posing) Error() string { return "posing" }
func (posing) As(any) bool   { return false }

// TestAWideCycleIsFoundBeyondWhatTheWalkReads: a cycle that comes after
// more errors than the classifier reads is still found, so nothing calls
// errors.As on it (which would recurse until the stack overflows), and it
// is not retried; a large join without one (a batch's errors) is
// classified from what was read, however its errors are shared.
func TestAWideCycleIsFoundBeyondWhatTheWalkReads(t *testing.T) {
	cyclic := &wideSelf{errs: []error{posing{}}}
	for range 300 {
		cyclic.errs = append(cyclic.errs, errors.New("plain"))
	}
	cyclic.errs = append(cyclic.errs, throttleErr(), cyclic)
	r := jitterretry.New(fast)
	assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(cyclic))
	assert.False(t, r.IsErrorRetryable(cyclic))

	shared := throttleErr()
	wide := &wideSelf{}
	for range 300 {
		wide.errs = append(wide.errs, shared)
	}
	assert.Equal(t, jitterretry.ClassThrottle, jitterretry.Classify(wide))
}

// zeroOuter and zeroInner are errors of zero size, the first wrapping the
// second: Go gives every zero-size allocation the same address.
type zeroOuter struct{}

func (*zeroOuter) Error() string { return "outer" }
func (*zeroOuter) Unwrap() error { return &zeroInner{} }

type zeroInner struct{}

func (*zeroInner) Error() string { return "inner" }

// TestZeroSizeErrorsMakeNoCycle: two zero-size errors of different types,
// one wrapping the other, share an address, and were taken for one error
// met twice, a cycle, past the walk's bounds: a throttle read at the top of
// the chain was not retried. Told apart by their types, they are no cycle,
// in a chain of single wraps (the zero-size pair at the 128th read, where
// a chain's reading saves one to compare) and in a join.
func TestZeroSizeErrorsMakeNoCycle(t *testing.T) {
	outer := error(&zeroOuter{})
	require.Equal(t, reflect.ValueOf(outer).Pointer(), reflect.ValueOf(errors.Unwrap(outer)).Pointer(),
		"expect the two zero-size errors at one address")
	deep := outer
	for range 127 {
		deep = fmt.Errorf("layer: %w", deep)
	}
	wide := &wideSelf{errs: []error{throttleErr()}}
	for range 300 {
		wide.errs = append(wide.errs, errors.New("plain"))
	}
	wide.errs = append(wide.errs, outer)
	for name, err := range map[string]error{
		"a chain": &sdkcCoded{code: "ThrottlingException", err: deep},
		"a join":  wide,
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, jitterretry.ClassThrottle, jitterretry.Classify(err))
			assert.True(t, jitterretry.New(fast).IsErrorRetryable(err))
		})
	}
}

// link is an error whose Unwrap returns the join it is in, once set.
type link struct{ to error }

func (l *link) Error() string { return "link" }
func (l *link) Unwrap() error { return l.to }

// TestACycleThatRunsWideIsFound: a join of a few errors whose last entry
// leads back to the join runs wide before it runs deep: the walk's budget
// ends before its depth does. The cycle is still found, so no check runs
// errors.As (or Error) on it: not retried, nothing overflows; also with a
// network error in it, or the caller's own Retryables.
func TestACycleThatRunsWideIsFound(t *testing.T) {
	wideCycle := func(first error) error {
		parts := []error{first}
		for range 10 {
			parts = append(parts, errors.New("plain"))
		}
		l := &link{}
		join := errors.Join(append(parts, l)...)
		l.to = join
		return join
	}
	for name, first := range map[string]error{
		"a throttle":      throttleErr(),
		"a network error": &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
	} {
		t.Run(name, func(t *testing.T) {
			err := wideCycle(first)
			assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(err))
			own := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.Retryables = []retry.IsErrorRetryable{retry.RetryableErrorCode{Codes: map[string]struct{}{"X": {}}}}
			})
			assert.False(t, own.IsErrorRetryable(err))
			calls := 0
			require.NoError(t, own.Err())
			_ = jitterretry.Do(context.Background(), jitterretry.New(fast), func(context.Context) error { calls++; return wideCycle(jitterretry.Conflict(errors.New("ccf"), 1, 2)) })
			assert.Equal(t, 1, calls)
		})
	}
	t.Run("a nil pointer past the walk's budget", func(t *testing.T) {
		parts := make([]error, 300)
		for i := range parts {
			parts[i] = errors.New("plain")
		}
		err := errors.Join(append(parts, (*valueUnwrap)(nil))...)
		require.NotPanics(t, func() { assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(err)) })
	})
}

// TestDoLeavesAnInnerLoopsDeadlineAlone: a Do loop around an inner Do that
// gave up for its deadline (its own shorter timeout, or the one both
// share) while it was losing races: the outer loop took the inner
// refusal, which wraps the last conflict, for a conflict, ran the inner
// loop again (13 times in an outside review's run, 154 writes), and, with
// one shared deadline, reported the deadline twice (helper-65). The
// default Classify leaves a give-up for a deadline or a cancel alone, as
// it says, whatever it wraps.
func TestDoLeavesAnInnerLoopsDeadlineAlone(t *testing.T) {
	for name, innerTimeout := range map[string]time.Duration{"its own timeout": 100 * time.Millisecond, "the shared deadline": 0} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var gaveUp []*jitterretry.GiveUpError
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.OnGiveUp = func(e *jitterretry.GiveUpError) { mu.Lock(); gaveUp = append(gaveUp, e); mu.Unlock() }
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if innerTimeout == 0 {
				ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			}
			defer cancel()
			outer := 0
			err := jitterretry.Do(ctx, r, func(ctx context.Context) error {
				outer++
				if innerTimeout > 0 {
					var cancelInner context.CancelFunc
					ctx, cancelInner = context.WithTimeout(ctx, innerTimeout)
					defer cancelInner()
				}
				return jitterretry.Do(ctx, r, func(context.Context) error { return conflictErr() })
			})
			var gu *jitterretry.GiveUpError
			require.ErrorAs(t, err, &gu)
			assert.Equal(t, 1, outer, "expect the outer loop to leave the inner loop's give-up alone")
			mu.Lock()
			defer mu.Unlock()
			assert.Len(t, gaveUp, 1, "expect the one give-up reported once, got %v", gaveUp)
		})
	}
}

// TestDoThrottleFloorAsksACustomBackoffForAThrottle: a conflict after a
// throttle waits at least the Retryer's backoff after a throttle. With a
// Backoff of the caller's own, which tells throttles by the error it is
// given, the floor asked it with the conflict's error, and got the
// backoff of a conflict (helper-71: 1 ms for a 40 ms throttle backoff).
func TestDoThrottleFloorAsksACustomBackoffForAThrottle(t *testing.T) {
	var asked []error
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			asked = append(asked, err)
			if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
				return 40 * time.Millisecond, nil
			}
			return time.Millisecond, nil
		})
	})
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		calls++
		switch calls {
		case 1:
			return throttleErr()
		case 2:
			return conflictErr()
		}
		return nil
	}, func(o *jitterretry.DoOptions) { o.Classify = jitterretry.Classify })
	require.NoError(t, err)
	require.Len(t, asked, 2, "expect the throttle's backoff and the conflict's floor")
	assert.True(t, retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(asked[1]).Bool(),
		"expect the floor asked for with a throttle, got %v", asked[1])
}

// clockBeforeDeadline returns a context whose deadline is an hour away and
// a Retryer (3 ms margin, seeded draws, then optFns) whose clock stands
// before that deadline, moved on by what the test adds to elapsed.
func clockBeforeDeadline(t *testing.T, before time.Duration, optFns ...func(*jitterretry.Options)) (*jitterretry.Retryer, context.Context, *atomic.Int64) {
	t.Helper()
	deadline := time.Now().Add(time.Hour)
	elapsed := new(atomic.Int64)
	r := jitterretry.New(append([]func(*jitterretry.Options){func(o *jitterretry.Options) {
		o.Clock = func() time.Time { return deadline.Add(-before + time.Duration(elapsed.Load())) }
		o.DeadlineMargin = 3 * time.Millisecond
		o.Source = delayers.NewSource(1)
	}}, optFns...)...)
	require.NoError(t, r.Err())
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	t.Cleanup(cancel)
	return r, ctx, elapsed
}

// TestDoFitsAConflictBackoffIntoTheTimeLeft: a conflict backoff only spaces
// the loop's attempts among its competitors, so one drawn longer than the
// time left before the deadline (less the margin) is drawn again within it,
// and the loop gives up only when no attempt fits: an outside trial of 64
// writers on one item with 1 s deadlines gave up 28-60 of 1,280 increments
// with, at the median, half the deadline left ("backoff 1.084s would end
// past the context deadline (736ms left)"). Here each call of fn takes 4 ms
// of the retryer's clock (its sleeps take none), the deadline is 30 ms of it
// away, and the blind window grows from 8 ms by half each conflict: the
// draws outgrow the time left by the third call, and the loop still calls
// fn until less than the 3 ms margin is left, the seventh call.
func TestDoFitsAConflictBackoffIntoTheTimeLeft(t *testing.T) {
	r, ctx, elapsed := clockBeforeDeadline(t, 30*time.Millisecond)
	calls := 0
	err := jitterretry.Do(ctx, r, func(context.Context) error {
		calls++
		elapsed.Add(int64(4 * time.Millisecond))
		return conflictErr() // a bare conflict: blind full jitter, 4 round trips growing by half
	})
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%v", err)
	assert.Equal(t, 7, calls, "expect fn called until less than the margin was left (28 ms of 30 gone): %v", err)
	assert.Contains(t, err.Error(), "2ms left", "expect the give-up with 2 ms left")
	// The margin refused it, whatever the backoff drawn: with none, the
	// backoff would have been fitted into the 2 ms (an outside review
	// read "backoff 20s would end past the context deadline (6.13ms
	// left)", blaming a backoff Do would have shortened).
	assert.Contains(t, err.Error(), "and 3ms kept for the attempt after it, would end past the context deadline (2ms left)")
}

// TestDoKeepsAReserveBeforeTheDeadline: a loop whose fn is quick learns a
// margin of about nothing, and each conflict's backoff was fitted into
// nearly all the time left: the loop drew ever closer to the deadline until
// a sleep, woken a little late, ended past it (an outside review: every call
// of such a loop with a 50 ms deadline returned up to 1.1 ms after it, a
// third as GiveUpCanceled). The learnt margin is at least 5 ms now: with 3
// ms left the first conflict is refused; with 8 ms, backoffs fit into 3.
// The retryer's clock stands still, so fn takes no time, and each
// conflict's blind window grows by half, outgrowing the time left.
func TestDoKeepsAReserveBeforeTheDeadline(t *testing.T) {
	run := func(t *testing.T, before time.Duration) (calls int, delays []time.Duration, err error) {
		r, ctx, _ := clockBeforeDeadline(t, before, func(o *jitterretry.Options) {
			o.DeadlineMargin = 0 // learnt
			o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
		})
		err = jitterretry.Do(ctx, r, func(context.Context) error {
			calls++
			return conflictErr()
		}, func(o *jitterretry.DoOptions) { o.MaxConflicts = 40 })
		return calls, delays, err
	}
	t.Run("3 ms left", func(t *testing.T) {
		calls, delays, err := run(t, 3*time.Millisecond)
		var g *jitterretry.GiveUpError
		require.ErrorAs(t, err, &g)
		assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%v", err)
		assert.Equal(t, 1, calls, "expect the first conflict refused: %v", delays)
		assert.Contains(t, err.Error(), "and 5ms kept for the attempt after it")
	})
	t.Run("8 ms left", func(t *testing.T) {
		_, delays, err := run(t, 8*time.Millisecond)
		var g *jitterretry.GiveUpError
		require.ErrorAs(t, err, &g)
		assert.Equal(t, jitterretry.GiveUpConflicts, g.Reason, "%v", err)
		require.NotEmpty(t, delays)
		assert.LessOrEqual(t, slices.Max(delays), 3*time.Millisecond, "expect every backoff to end 5 ms before the deadline: %v", delays)
		assert.Greater(t, slices.Max(delays), time.Millisecond, "expect backoffs fitted into the 3 ms: %v", delays)
	})
}

// TestDoThrottleFloorRefusalDoesNotBlameTheMargin: a conflict after a
// throttle waits at least the throttle's backoff, which is not shortened to
// the time left: when that floor does not fit, the refusal names the
// backoff, not the margin (an outside review of the message that names the
// margin when it decided).
func TestDoThrottleFloorRefusalDoesNotBlameTheMargin(t *testing.T) {
	r, ctx, elapsed := clockBeforeDeadline(t, 100*time.Millisecond, func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential // no jitter: the throttle's floor is its 20 ms base
		o.ThrottleBaseDelay = 20 * time.Millisecond
	})
	calls := 0
	err := jitterretry.Do(ctx, r, func(context.Context) error {
		if calls++; calls == 1 {
			return throttleErr()
		}
		elapsed.Store(int64(90 * time.Millisecond)) // 10 ms left: the 20 ms floor cannot fit
		return conflictErr()
	})
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%v", err)
	assert.Equal(t, 2, calls)
	assert.Contains(t, err.Error(), "backoff 20ms would end past the context deadline (10ms left")
	assert.NotContains(t, err.Error(), "kept for the attempt after")
}

// TestDoThrottleFloorRefusalHoldsItsCaller: a conflict whose wait is the
// throttle floor says the table is at capacity: when the floor does not fit
// before the deadline, the loop's caller is held first, as after a throttle
// (see TestThrottleHintPastTheDeadlineHoldsItsCaller), so that a closed loop
// does not send again at once (helper-163). Here for half of what is left
// less 5 ms, 2.5 ms of the 10 left, longer than what ends before the
// deadline less the 3 ms margin and 5 ms (2 ms; see refusalHold).
func TestDoThrottleFloorRefusalHoldsItsCaller(t *testing.T) {
	r, ctx, elapsed := clockBeforeDeadline(t, 100*time.Millisecond, func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential // no jitter: the throttle's floor is its 20 ms base
		o.ThrottleBaseDelay = 20 * time.Millisecond
	})
	calls := 0
	start := time.Now()
	err := jitterretry.Do(ctx, r, func(context.Context) error {
		if calls++; calls == 1 {
			return throttleErr()
		}
		start = time.Now()
		elapsed.Store(int64(90 * time.Millisecond)) // 10 ms left: the 20 ms floor cannot fit
		return conflictErr()
	})
	held := time.Since(start)
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%v", err)
	assert.Contains(t, err.Error(), "(10ms left; held 2.5ms before refusing, as after a throttle)")
	assert.GreaterOrEqual(t, held, 2500*time.Microsecond)
}

// TestDoPanicInFnGivesTheRetrysTokensBack: a panic in fn goes through Do to
// its caller, as any panic of the caller's code; the retry in flight then
// says nothing of the service, so its tokens go back to the bucket. They
// were lost before (an outside review: 14 each, so some 36 such panics,
// recovered by net/http in a handler, emptied the shared bucket of a client
// with no refill). A panic in the caller's Classify comes after fn returned
// the retry's answer, a 5xx here: spent, as any failed retry's cost. And a
// hook that panics after a refusal refunded the retry must not have it
// refunded twice (a review of the first form of this fix: 14 tokens made).
func TestDoPanicInFnGivesTheRetrysTokensBack(t *testing.T) {
	panics := func(t *testing.T, r *jitterretry.Retryer, ctx context.Context, fn func(context.Context) error, optFns ...func(*jitterretry.DoOptions)) {
		t.Helper()
		assert.Panics(t, func() { _ = jitterretry.Do(ctx, r, fn, optFns...) })
	}
	fails := func(context.Context) error { return serverErr() }
	t.Run("fn", func(t *testing.T) {
		r := jitterretry.New(func(o *jitterretry.Options) { o.BaseDelay = time.Millisecond })
		calls := 0
		panics(t, r, context.Background(), func(context.Context) error {
			if calls++; calls == 1 {
				return serverErr() // the retry after it pays 14 tokens
			}
			panic("fn")
		})
		assert.Equal(t, uint(500), r.Remaining(), "expect the retry's tokens back after a panic in fn")
	})
	t.Run("Classify", func(t *testing.T) {
		r := jitterretry.New(func(o *jitterretry.Options) { o.BaseDelay = time.Millisecond })
		classified := 0
		panics(t, r, context.Background(), fails, func(o *jitterretry.DoOptions) {
			def := o.Classify
			o.Classify = func(err error) jitterretry.ErrorClass {
				if classified++; classified == 2 {
					panic("Classify")
				}
				return def(err)
			}
		})
		assert.Equal(t, uint(486), r.Remaining(), "expect the failed retry's cost spent")
	})
	t.Run("OnRetry", func(t *testing.T) {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.BaseDelay = time.Millisecond
			o.OnRetry = func(jitterretry.RetryEvent) { panic("OnRetry") }
		})
		panics(t, r, context.Background(), fails) // the retry pays 14, is scheduled, never sent
		assert.Equal(t, uint(500), r.Remaining(), "expect the unsent retry's tokens back (a review: 486)")
	})
	t.Run("OnGiveUp", func(t *testing.T) {
		now := time.Now()
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Clock = func() time.Time { return now }
			o.Jitter, o.BaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Second, time.Second
			o.DeadlineMargin = time.Millisecond
			o.OnGiveUp = func(*jitterretry.GiveUpError) { panic("OnGiveUp") }
		})
		for range 10 {
			_, err := r.GetRetryToken(context.Background(), serverErr())
			require.NoError(t, err)
		}
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(100*time.Millisecond))
		defer cancel()
		panics(t, r, ctx, fails) // the retry pays 14, its 1 s backoff is refused and refunded
		assert.Equal(t, uint(360), r.Remaining(), "expect the refused retry refunded once")
	})
}

// TestDoConflictSpanCountsTheLimitersQueue: with the send-rate limiter, the
// SDK calls of fn wait their turn in its queue, and the wait between the
// read and the write holds the item open as a round trip does: the conflict
// backoff is sized on it. Timed apart, the few-millisecond round trips sized
// the windows of 32 writers whose writes waited hundreds of milliseconds in
// the queue, and the loops spun through it (an outside review: 23.4
// requests per increment against 3.9-4.1 without the limiter, on a table of 50
// writes a second). Here fn reads and writes through the SDK's middleware at
// a rate of 10 a second, so its write waits 100 ms; the first conflict's
// window (28 round trips, capped at MaxBackoff 400 ms) is drawn at its middle.
func TestDoConflictSpanCountsTheLimitersQueue(t *testing.T) {
	var delays []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 10}
		o.MaxBackoff = 400 * time.Millisecond
		o.Source = sdkcFraction(0.5)
		o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
	})
	require.NoError(t, r.Err())
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		for range 2 { // a read and a write
			_, err := operation(ctx, r, script(ok))
			require.NoError(t, err)
		}
		if calls++; calls == 1 {
			return jitterretry.Conflict(conflictErr(), 1, 2)
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, delays, 1)
	assert.Equal(t, 200*time.Millisecond, delays[0], "expect the window sized on the queue's wait, capped, and drawn at its middle")
}

// TestDoEmptyBudgetWaitsTheBackoffOfItsFailures: before an empty budget
// refuses a retry of fn, Do waits that retry's backoff, which counts fn's
// transient and throttling failures, as its retries' backoffs do. It was
// drawn for fn's call number, conflicts included: after eight conflicts a
// second 5xx waited 512 ms of a 1 ms base, not 2 ms (helper-127). Here
// a 4 ms base: 8 ms against 2 s, told apart by 1 s, which no stall of a
// busy machine reaches (200 ms could: helper-230).
func TestDoEmptyBudgetWaitsTheBackoffOfItsFailures(t *testing.T) {
	var waits []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential
		o.BaseDelay, o.MaxBackoff = 4*time.Millisecond, time.Minute
		o.BucketCapacity, o.RetryCost = 5, 5 // one retry, then empty
	})
	require.NoError(t, r.Err())
	calls := 0
	var last time.Time
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		if calls++; calls <= 8 {
			return conflictErr()
		}
		last = time.Now()
		return serverErr()
	})
	waits = append(waits, time.Since(last))
	require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, 10, gu.Attempt, "expect the call that failed named: fn's tenth")
	assert.Less(t, waits[0], time.Second, "expect the wait of the second failure's 8 ms backoff, not of call 10's (2 s)")
}

// TestDoConflictOfAnEndedContextIsCanceled: a conflict fn returns after the
// caller's context ended is no retry: Do gives up with GiveUpCanceled, as
// for a transient error, and reports no retry. It scheduled one, told
// OnRetry and the retries metric, and then gave up in the sleep (a
// cancel), or gave GiveUpDeadline "no time left" (a deadline), which says
// the context had not ended (helper-127).
func TestDoConflictOfAnEndedContextIsCanceled(t *testing.T) {
	for name, timeout := range map[string]time.Duration{"canceled": 0, "past its deadline": time.Millisecond} {
		t.Run(name, func(t *testing.T) {
			var retries int
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.OnRetry = func(jitterretry.RetryEvent) { retries++ }
			})
			ctx, cancel := context.WithCancel(context.Background())
			if timeout > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), timeout)
			}
			defer cancel()
			err := jitterretry.Do(ctx, r, func(context.Context) error {
				if timeout == 0 {
					cancel()
				}
				<-ctx.Done()
				return conflictErr()
			})
			var gu *jitterretry.GiveUpError
			require.ErrorAs(t, err, &gu)
			assert.Equal(t, jitterretry.GiveUpCanceled, gu.Reason, "got %v", err)
			assert.ErrorIs(t, err, ctx.Err())
			assert.Zero(t, retries, "expect no retry reported")
		})
	}
}

// TestDoMaxAttemptsCountsFailuresNotConflicts: MaxAttempts counts fn's
// transient and throttling failures, not its conflicts, and so do the
// give-up's message and the *retry.MaxAttemptsError it matches: they said
// 6 attempts for a limit of 3 met after three conflicts (helper-127).
func TestDoMaxAttemptsCountsFailuresNotConflicts(t *testing.T) {
	calls := 0
	err := jitterretry.Do(context.Background(), jitterretry.New(fast), func(context.Context) error {
		if calls++; calls%2 == 1 {
			return conflictErr()
		}
		return serverErr()
	})
	require.Equal(t, 6, calls)
	var m *retry.MaxAttemptsError
	require.ErrorAs(t, err, &m)
	assert.Equal(t, 3, m.Attempt, "expect the three failures MaxAttempts counts")
	assert.Contains(t, err.Error(), "exceeded maximum number of attempts, 3")
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu)
	assert.Equal(t, 6, gu.Attempt, "expect Attempt to name the call that failed last")
}

// TestDoBackoffErrorKeepsFnsError: when a custom Options.Backoff fails, Do
// returns its error joined with fn's last, as the SDK's middleware returns
// RetryDelay's; fn's error was lost (helper-127).
func TestDoBackoffErrorKeepsFnsError(t *testing.T) {
	broke := errors.New("backoff broke")
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, broke })
	})
	boom := serverErr()
	err := jitterretry.Do(context.Background(), r, func(context.Context) error { return boom })
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, broke)
	assert.Equal(t, uint(500), r.Remaining(), "expect the retry's tokens back")

	// A Backoff that refuses with the very error it was asked about: said
	// once, not "boom\nboom" (helper-129).
	r = jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(_ int, err error) (time.Duration, error) { return 0, err })
	})
	err = jitterretry.Do(context.Background(), r, func(context.Context) error { return boom })
	assert.Same(t, boom, err)
}

// TestDoConflictBackoffKeepsMaxBackoffBesideACustomBackoff: Do's conflict
// backoff is its own, not the Backoff's: with a Backoff of the caller's
// that is no delayer of package delayers, MaxBackoff still caps it. It was
// capped at 20 s whatever MaxBackoff said (helper-125: 11.3 s with a
// MaxBackoff of 1 s). Conflicts without versions back off blindly, their
// window doubling from fn's round trip.
func TestDoConflictBackoffKeepsMaxBackoffBesideACustomBackoff(t *testing.T) {
	var delays []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = retry.NewExponentialJitterBackoff(time.Second)
		o.MaxBackoff = 2 * time.Millisecond
		o.Source = sdkcFraction(0.5)
		o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
	})
	require.NoError(t, r.Err())
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		time.Sleep(time.Millisecond) // a round trip, which the windows grow from
		if calls++; calls <= 10 {
			return conflictErr()
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, delays, 10)
	for i, d := range delays {
		assert.LessOrEqual(t, d, 2*time.Millisecond, "conflict %d: expect MaxBackoff to cap the wait", i+1)
	}
}
