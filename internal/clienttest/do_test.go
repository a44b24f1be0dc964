package clienttest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// retryConflicts is an application layer's own rule: a failed condition is
// retried as a transient error (the loop re-reads), so it pays from the
// Retryer's bucket; everything else is left to the SDK's retryer. Do's
// default classification retries conflicts as ClassConflict, free.
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
	cases := map[string]struct {
		classify func(error) jitterretry.ErrorClass
		tokens   uint
	}{
		// 500 - 5 + 5 (the SDK's throttle retry, answered by a conflict:
		// the service answered, so its tokens come back; see the README's
		// side-by-side) - 14 - 14 (Do's two retries, which this Classify
		// pays for) + 14 (the one that succeeded) + 1 (its SDK call
		// succeeded on the first attempt)
		"conflicts as transient: one budget pays for all three retries": {classify: retryConflicts, tokens: 487},
		// 500 - 5 + 5, and the +1 finds the bucket full: conflicts take no
		// tokens, and the SDK's retry they answered gets its own back.
		"default: conflicts are free": {tokens: 500},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(fast)
			// The SDK level retries the throttle inside the first call; Do
			// retries the two conflicts.
			srv := newScriptServer(t, throttle, ccf, ccf, ok)
			client := newClient(srv.URL, r)
			calls := 0
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				calls++
				return conditionalPut(ctx, client)
			}, func(o *jitterretry.DoOptions) {
				if tc.classify != nil {
					o.Classify = tc.classify
				}
				o.MaxAttempts = 5
			})

			require.NoError(t, err)
			assert.Equal(t, 3, calls)
			assert.Equal(t, 4, srv.Calls())
			assert.Equal(t, tc.tokens, r.Remaining())
		})
	}
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
				var m *jitterretry.GiveUpError
				require.ErrorAs(t, err, &m)
				assert.Equal(t, jitterretry.GiveUpMaxAttempts, m.Reason)
				assert.Equal(t, 3, m.Attempt)
				var sdk *retry.MaxAttemptsError
				require.ErrorAs(t, err, &sdk)
				assert.Equal(t, 3, sdk.Attempt)
				assert.ErrorIs(t, err, boom)
			},
		},
		"budget runs out": {
			opts: func(o *jitterretry.Options) { o.BucketCapacity = 20; o.MaxAttempts = 10 },
			doOpts: func(o *jitterretry.DoOptions) {
				o.Classify = func(error) jitterretry.ErrorClass { return jitterretry.ClassTransient }
			},
			results: []error{boom}, calls: 2,
			check: func(t *testing.T, err error) {
				assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
				assert.ErrorIs(t, err, boom)
				var quota ratelimit.QuotaExceededError
				require.ErrorAs(t, err, &quota)
				assert.Equal(t, uint(6), quota.Available)
				assert.Equal(t, uint(14), quota.Requested)
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
		o.Jitter, o.ThrottleBaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Hour, time.Hour
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
	assert.ErrorAs(t, jitterretry.Do(context.Background(), jitterretry.New(), func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { o.MaxAttempts = 0 }), &oe)
	assert.ErrorAs(t, jitterretry.Do(context.Background(), jitterretry.New(), func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { o.MaxConflicts = -2 }), &oe)
	bad := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = 0 })
	assert.ErrorAs(t, jitterretry.Do(context.Background(), bad, func(context.Context) error { return nil }), &oe)
}

// TestDoConflictsKeepTheBudgetForTheSDK: conflicts are the normal price of
// contention, so Do retries them without spending the SDK's retry budget.
func TestDoConflictsKeepTheBudgetForTheSDK(t *testing.T) {
	r := jitterretry.New(fast)
	conflicts := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		if conflicts < 5 {
			conflicts++
			return &types.ConditionalCheckFailedException{Message: aws.String("moved")}
		}
		return nil
	}, func(o *jitterretry.DoOptions) { o.MaxAttempts = 1 })
	require.NoError(t, err, "expect conflicts not to count as attempts")
	assert.Equal(t, 5, conflicts)
	assert.Equal(t, uint(500), r.Remaining(), "expect no token spent on conflicts")
}

// TestDoDefaultClassificationOverARealClient: around SDK calls, Do retries
// the conflicts the service returns, marked or not, with their own budget,
// and leaves alone what the SDK's retry middleware already gave up on.
func TestDoDefaultClassificationOverARealClient(t *testing.T) {
	t.Run("conflicts until MaxConflicts", func(t *testing.T) {
		r := jitterretry.New(fast)
		srv := newScriptServer(t, ccf)
		client := newClient(srv.URL, r)
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			return conditionalPut(ctx, client)
		}, func(o *jitterretry.DoOptions) { o.MaxConflicts = 3 })
		var gu *jitterretry.GiveUpError
		require.ErrorAs(t, err, &gu)
		assert.Equal(t, jitterretry.GiveUpConflicts, gu.Reason)
		var c *types.ConditionalCheckFailedException
		assert.ErrorAs(t, err, &c, "expect the service's conflict as the cause")
		assert.Equal(t, 4, srv.Calls(), "expect the first call and three retried conflicts")
		assert.Equal(t, uint(500), r.Remaining())
	})
	t.Run("a conflict marked with versions", func(t *testing.T) {
		r := jitterretry.New(fast)
		srv := newScriptServer(t, ccf, ccf, ok)
		client := newClient(srv.URL, r)
		var classes []jitterretry.ErrorClass
		version := int64(0)
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			err := conditionalPut(ctx, client)
			if err == nil {
				return nil
			}
			version++
			marked := jitterretry.Conflict(err, version, version+1)
			var c *types.ConditionalCheckFailedException
			require.ErrorAs(t, marked, &c, "expect the mark to keep the service's error")
			classes = append(classes, jitterretry.Classify(marked))
			return marked
		})
		require.NoError(t, err)
		assert.Equal(t, 3, srv.Calls())
		assert.Equal(t, []jitterretry.ErrorClass{jitterretry.ClassConflict, jitterretry.ClassConflict}, classes)
		assert.Equal(t, uint(500), r.Remaining())
		// An application's own conflict, which no rule knows, is one once
		// marked.
		moved := errors.New("version moved")
		assert.Equal(t, jitterretry.ClassNotRetryable, jitterretry.Classify(moved))
		assert.Equal(t, jitterretry.ClassConflict, jitterretry.Classify(jitterretry.Conflict(moved, 1, 2)))
	})
	t.Run("the SDK gave up already", func(t *testing.T) {
		r := jitterretry.New(fast)
		srv := newScriptServer(t, serverErr)
		client := newClient(srv.URL, r)
		calls := 0
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			calls++
			return conditionalPut(ctx, client)
		})
		var sdk *retry.MaxAttemptsError
		require.ErrorAs(t, err, &sdk, "expect the SDK's own error, returned as it is")
		var gu *jitterretry.GiveUpError
		assert.False(t, errors.As(err, &gu), "expect no give-up of Do's around it, got %v", err)
		assert.Equal(t, 1, calls, "expect Do not to retry what the SDK retried already")
		assert.Equal(t, 3, srv.Calls())
	})
}

// TestDoRetriesATransactionCancelledForConflictsOrThrottles: DynamoDB
// cancels a transaction with a TransactionCanceledException and a reason for
// each of its items. When every reason is a lost race (its condition
// failed, another transaction held the item) or None, it is a conflict, and
// Do retries it as it does a ConditionalCheckFailedException: a
// TransactWriteItems loop that reads again and retries is the same pattern
// over several items. When every reason is a throttle or None, Do retries it
// as a throttle (paid from the bucket), since the SDK's middleware does not:
// the code is no throttle's. Any other reason among them (a validation
// error), or races and throttles at once, is not retried. Under the
// middleware none is retried, as with retry.NewStandard().
func TestDoRetriesATransactionCancelledForConflictsOrThrottles(t *testing.T) {
	for _, tc := range []struct {
		reasons string
		class   jitterretry.ErrorClass // Classify's, the middleware's view
		retried bool                   // by Do
	}{
		{"ConditionalCheckFailed,None", jitterretry.ClassConflict, true},
		{"None,TransactionConflict", jitterretry.ClassConflict, true},
		{"ConditionalCheckFailed,TransactionConflict", jitterretry.ClassConflict, true},
		{"None,ThrottlingError", jitterretry.ClassNotRetryable, true},
		{"ProvisionedThroughputExceeded,ThrottlingError", jitterretry.ClassNotRetryable, true},
		{"None,ValidationError", jitterretry.ClassNotRetryable, false},
		{"ConditionalCheckFailed,ThrottlingError", jitterretry.ClassNotRetryable, false},
		{"ThrottlingError,ItemCollectionSizeLimitExceeded", jitterretry.ClassNotRetryable, false},
		{"None,None", jitterretry.ClassNotRetryable, false},
	} {
		t.Run(tc.reasons, func(t *testing.T) {
			srv := newScriptServer(t, reply{cancelled: tc.reasons}, ok)
			r := jitterretry.New(fast)
			client := newClient(srv.URL, r)
			var errs []error
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				err := transactWrite(ctx, client, 2)
				errs = append(errs, err)
				return err
			})
			require.NotEmpty(t, errs)
			var cancelled *types.TransactionCanceledException
			require.ErrorAs(t, errs[0], &cancelled, "expect the SDK's modelled error")
			assert.Equal(t, tc.class, jitterretry.Classify(errs[0]))
			if tc.retried {
				require.NoError(t, err)
				assert.Equal(t, 2, srv.Calls(), "expect the transaction sent again by Do, once")
			} else {
				assert.Same(t, errs[0], err, "expect the error as it is, not retried")
				assert.Equal(t, 1, srv.Calls(), "expect no retry, by the middleware or Do")
			}
			assert.Equal(t, uint(500), r.Remaining(), "expect a conflict to cost no token, a throttle's retry refunded on success")
		})
	}
}

// TestRetryAnsweredByACancelledTransactionIsRefunded: as a paid retry
// answered by a ConditionalCheckFailedException (the README's differences),
// one answered by a transaction the service cancelled for conflicts gets its
// cost back.
func TestRetryAnsweredByACancelledTransactionIsRefunded(t *testing.T) {
	srv := newScriptServer(t, serverErr, reply{cancelled: "None,ConditionalCheckFailed"}, ok)
	r := jitterretry.New(fast)
	client := newClient(srv.URL, r)
	require.NoError(t, jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		return transactWrite(ctx, client, 2)
	}))
	assert.Equal(t, 3, srv.Calls())
	assert.Equal(t, uint(500), r.Remaining(), "expect the 500's retry, answered by a conflict, refunded")
}

// TestAThrottledTransactionDoRetriesIsNoGiveUp: under the middleware a
// transaction cancelled for throttles is not retried, but Do retries it:
// as a conflict, it is no refusal for OnGiveUp, only a retry for OnRetry.
// A caller's own marks still decide: Conflict makes it a conflict, and
// Throttles answering false a transient error.
func TestAThrottledTransactionDoRetriesIsNoGiveUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(error) error
		opts func(*jitterretry.Options)
		want jitterretry.ErrorClass // of the retry Do makes
	}{
		{"default", nil, nil, jitterretry.ClassThrottle},
		{"marked a conflict", func(err error) error { return jitterretry.Conflict(err, 1, 2) }, nil, jitterretry.ClassConflict},
		{"no throttle to the caller", nil, func(o *jitterretry.Options) {
			o.Throttles = []retry.IsErrorThrottle{retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.FalseTernary })}
		}, jitterretry.ClassTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, reply{cancelled: "None,ThrottlingError"}, ok)
			var gaveUp []jitterretry.GiveUpReason
			var retried []jitterretry.ErrorClass
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e.Reason) }
				o.OnRetry = func(e jitterretry.RetryEvent) { retried = append(retried, e.Class) }
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			client := newClient(srv.URL, r)
			require.NoError(t, jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				err := transactWrite(ctx, client, 2)
				if err != nil && tc.mark != nil {
					err = tc.mark(err)
				}
				return err
			}))
			assert.Equal(t, 2, srv.Calls())
			assert.Empty(t, gaveUp, "expect no refusal reported for what Do retries")
			assert.Equal(t, []jitterretry.ErrorClass{tc.want}, retried)
		})
	}
}

// TestAThrottledTransactionTheCallerRefusesIsAGiveUp: when the caller's
// Retryables say a throttled transaction is not retryable, Do does not
// retry it, and it is reported as the refusal it is.
func TestAThrottledTransactionTheCallerRefusesIsAGiveUp(t *testing.T) {
	srv := newScriptServer(t, reply{cancelled: "None,ThrottlingError"}, ok)
	var gaveUp []jitterretry.GiveUpReason
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e.Reason) }
		o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			var tce *types.TransactionCanceledException
			if errors.As(err, &tce) {
				return aws.FalseTernary
			}
			return aws.UnknownTernary
		})}
	})
	client := newClient(srv.URL, r)
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		return transactWrite(ctx, client, 2)
	})
	require.Error(t, err)
	assert.Equal(t, 1, srv.Calls())
	assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}, gaveUp,
		"expect the refusal reported once, by the middleware's IsErrorRetryable (Do does not again)")
}

// TestDoAroundAnSDKCallReportsAGiveUpOnce: a give-up the SDK's middleware
// reported (the same Retryer's refusal of an error that is not retryable,
// of an empty bucket) reaches Do as fn's error; Do does not report it
// again. What the middleware did not report (its own max attempts, fn's
// own error, a client with another retryer) Do reports, once, with its
// reason; a Do inside fn reports for the loop around it.
func TestDoAroundAnSDKCallReportsAGiveUpOnce(t *testing.T) {
	validation := reply{code: "ValidationException"}
	own := errors.New("the item read back is not the one written")
	// A signature refused with a Date an hour off: the SDK's middleware
	// rewraps it as a clock skew it retries, between the attempt's release
	// and IsErrorRetryable.
	skewed := reply{code: "InvalidSignatureException", date: time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}
	notRetryable := jitterretry.GiveUpNotRetryable
	for _, tc := range []struct {
		name   string
		script []reply
		cycle  bool
		opts   func(*jitterretry.Options)
		fn     func(ctx context.Context, client *dynamodb.Client, r *jitterretry.Retryer) error
		client func(r *jitterretry.Retryer) aws.Retryer // the client's retryer; default r
		want   []jitterretry.GiveUpReason
	}{
		{name: "not retryable, refused by the middleware", script: []reply{validation},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}},
		{name: "budget, refused by the middleware", script: []reply{serverErr},
			opts: func(o *jitterretry.Options) { o.BucketCapacity, o.RetryCost, o.FailFastOnEmptyBudget = 20, 14, true },
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpBudget}},
		{name: "max attempts of the middleware", script: []reply{serverErr},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}},
		{name: "fn's own error after a call that succeeded", script: []reply{ok},
			fn: func(ctx context.Context, client *dynamodb.Client, _ *jitterretry.Retryer) error {
				if err := putItem(ctx, client); err != nil {
					return err
				}
				return own
			},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}},
		{name: "fn's own error after a call the middleware refused", script: []reply{validation},
			fn: func(ctx context.Context, client *dynamodb.Client, _ *jitterretry.Retryer) error {
				_ = putItem(ctx, client)
				return own
			},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}},
		{name: "a client with another retryer", script: []reply{validation},
			client: func(*jitterretry.Retryer) aws.Retryer { return retry.NewStandard() },
			want:   []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}},
		{name: "a wrapper that answers IsErrorRetryable", script: []reply{validation},
			client: func(r *jitterretry.Retryer) aws.Retryer { return retry.AddWithErrorCodes(r, "ValidationException") },
			want:   []jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}},
		{name: "a clock skew the middleware rewraps", script: []reply{skewed},
			opts: func(o *jitterretry.Options) { o.MaxAttempts = 1 },
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}},
		{name: "an earlier call's refusal returned after a later call", script: []reply{validation, serverErr, ok},
			fn: func(ctx context.Context, client *dynamodb.Client, _ *jitterretry.Retryer) error {
				first := putItem(ctx, client)
				if err := putItem(ctx, client); err != nil {
					return err
				}
				return first
			},
			want: []jitterretry.GiveUpReason{notRetryable}},
		{name: "eight refused calls at once", script: []reply{validation},
			fn: func(ctx context.Context, client *dynamodb.Client, _ *jitterretry.Retryer) error {
				errs := make([]error, 8)
				var wg sync.WaitGroup
				for i := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = putItem(ctx, client)
					}()
				}
				wg.Wait()
				return errs[3]
			},
			want: []jitterretry.GiveUpReason{notRetryable, notRetryable, notRetryable, notRetryable, notRetryable, notRetryable, notRetryable, notRetryable}},
		{name: "a Do inside fn", script: []reply{validation},
			fn: func(ctx context.Context, client *dynamodb.Client, r *jitterretry.Retryer) error {
				return jitterretry.Do(ctx, r, func(ctx context.Context) error { return putItem(ctx, client) })
			},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}},
		{name: "a Do inside fn whose fn wraps the SDK's error", script: []reply{serverErr},
			fn: func(ctx context.Context, client *dynamodb.Client, r *jitterretry.Retryer) error {
				return jitterretry.Do(ctx, r, func(ctx context.Context) error {
					return fmt.Errorf("saving order: %w", putItem(ctx, client))
				})
			},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}},
		{name: "a Do inside fn that runs out of attempts", script: []reply{serverErr},
			fn: func(ctx context.Context, client *dynamodb.Client, r *jitterretry.Retryer) error {
				return jitterretry.Do(ctx, r, func(ctx context.Context) error { return putItem(ctx, client) }, func(o *jitterretry.DoOptions) { o.MaxAttempts = 2 })
			},
			want: []jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script...)
			srv.cycle = tc.cycle
			var mu sync.Mutex
			var gaveUp []jitterretry.GiveUpReason
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.OnGiveUp = func(e *jitterretry.GiveUpError) {
					mu.Lock()
					defer mu.Unlock()
					gaveUp = append(gaveUp, e.Reason)
				}
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			var clientRetryer aws.Retryer = r
			if tc.client != nil {
				clientRetryer = tc.client(r)
			}
			client := newClient(srv.URL, clientRetryer)
			fn := tc.fn
			if fn == nil {
				fn = func(ctx context.Context, client *dynamodb.Client, _ *jitterretry.Retryer) error {
					return putItem(ctx, client)
				}
			}
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error { return fn(ctx, client, r) })
			require.Error(t, err)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, tc.want, gaveUp, "expect each give-up reported once (calls: %d; error: %v)", srv.Calls(), err)
		})
	}
}

// giveUpLog records a Retryer's give-ups.
type giveUpLog struct {
	mu      sync.Mutex
	reasons []jitterretry.GiveUpReason
}

func (l *giveUpLog) add(e *jitterretry.GiveUpError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reasons = append(l.reasons, e.Reason)
}

func (l *giveUpLog) get() []jitterretry.GiveUpReason {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reasons)
}

// TestDoReportsWhatAnotherRetryerReported: a give-up is each Retryer's to
// report. A Do loop of retryer A whose fn calls a client with retryer B
// (directly, or in a Do loop of B) reports the refusal to A's listeners,
// which heard nothing of it, while B's hear it once: also when B has a Do
// loop running elsewhere at the time.
func TestDoReportsWhatAnotherRetryerReported(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("in a Do of the other: %v", nested), func(t *testing.T) {
			srv := newScriptServer(t, reply{code: "ValidationException"})
			var logA, logB giveUpLog
			a := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = logA.add })
			b := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = logB.add })
			clientB := newClient(srv.URL, b)

			// B's own loop, elsewhere, running all along.
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan error)
			go func() {
				done <- jitterretry.Do(context.Background(), b, func(context.Context) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			defer func() {
				close(release)
				require.NoError(t, <-done)
			}()

			err := jitterretry.Do(context.Background(), a, func(ctx context.Context) error {
				if nested {
					return jitterretry.Do(ctx, b, func(ctx context.Context) error { return putItem(ctx, clientB) })
				}
				return putItem(ctx, clientB)
			})
			require.Error(t, err)
			assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}, logA.get(), "expect A's loop to report its give-up")
			assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}, logB.get(), "expect B's middleware to report its refusal once")
		})
	}
}

// fieldErrors is a slice-based error, as validation libraries return.
type fieldErrors []string

func (e fieldErrors) Error() string { return strings.Join(e, "; ") }

// opError is a value error that holds another: == panics on it when that
// one is a slice.
type opError struct {
	op  string
	err error
}

func (e opError) Error() string { return e.op + ": " + e.err.Error() }
func (e opError) Unwrap() error { return e.err }

// TestDoInDoWithAnErrorThatCannotBeCompared: an inner Do returning fn's
// own error that == cannot compare does not make the outer Do panic; that
// error is reported by both loops, the one case where a give-up is
// reported twice rather than risk losing one.
func TestDoInDoWithAnErrorThatCannotBeCompared(t *testing.T) {
	var log giveUpLog
	r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
	own := opError{op: "validate", err: fieldErrors{"pk missing"}}
	var err error
	require.NotPanics(t, func() {
		err = jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			return jitterretry.Do(ctx, r, func(context.Context) error { return own })
		})
	})
	assert.EqualError(t, err, own.Error())
	assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}, log.get())
}

// busyError is a value error a client-side middleware returns, with a code:
// every copy is equal, so it tells nothing of which operation had it.
type busyError struct{}

func (busyError) Error() string     { return "Busy: local limiter" }
func (busyError) ErrorCode() string { return "Busy" }

// refuseLocally is an API option that fails every attempt before it is sent
// with busyError, in the Finalize step after the retry middleware.
func refuseLocally(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("refuseLocally",
		func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, busyError{}
		}), middleware.After)
}

// TestDoDoesNotTakeAnEqualValueRefusedElsewhereForItsOwn: a refusal the
// retryer reported for another operation, of an error equal to one of fn's
// (a value every copy of which is equal), does not hide Do's give-up, nor
// does a refusal inside fn hide fn's own equal error: values are not
// matched, only pointers.
func TestDoDoesNotTakeAnEqualValueRefusedElsewhereForItsOwn(t *testing.T) {
	srv := newScriptServer(t, ok)
	var log giveUpLog
	r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
	plain := newClient(srv.URL, r)
	answeredFor := newClient(srv.URL, retry.AddWithErrorCodes(r, "Busy")) // the wrapper retries Busy
	local := dynamodb.WithAPIOptions(refuseLocally)

	t.Run("refused in another operation", func(t *testing.T) {
		log.reasons = nil
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			err := putItem(ctx, answeredFor, local) // retried to the end, reported by no one inside
			_ = putItem(context.Background(), plain, local)
			return err
		})
		var maxed *retry.MaxAttemptsError
		require.ErrorAs(t, err, &maxed)
		assert.ElementsMatch(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpMaxAttempts}, log.get())
	})
	t.Run("fn's own equal error", func(t *testing.T) {
		log.reasons = nil
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			_ = putItem(ctx, plain, local)
			return busyError{}
		})
		assert.Equal(t, busyError{}, err)
		assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}, log.get())
	})
}

// TestDoReportsWhatAJoinedErrorCarriesUnreported: fn's error joined of
// several is left unreported by Do only when each part was reported inside
// fn. A refused call joined with one that ran out of attempts (which the
// middleware reports to no one), or with fn's own error, is Do's to
// report.
func TestDoReportsWhatAJoinedErrorCarriesUnreported(t *testing.T) {
	for name, join := range map[string]func(a, b error) error{
		"errors.Join":     func(a, b error) error { return errors.Join(a, b) },
		"two %w":          func(a, b error) error { return fmt.Errorf("%w; %w", a, b) },
		"fn's own joined": func(a, _ error) error { return errors.Join(errors.New("the read-back differs"), a) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := newScriptServer(t, reply{code: "ValidationException"}, serverErr)
			var log giveUpLog
			r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
			client := newClient(srv.URL, r)
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				refused := putItem(ctx, client)
				if name == "fn's own joined" {
					return join(refused, nil)
				}
				return join(refused, putItem(ctx, client)) // three 500s: out of attempts
			})
			require.Error(t, err)
			want := []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpMaxAttempts}
			if name == "fn's own joined" {
				want = []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}
			}
			assert.Equal(t, want, log.get())
		})
	}
}

// TestAnInnerDosSentinelDoesNotHideTheOuterGiveUp: an inner Do that gave up
// on fn's own sentinel (a package-level error, context.Canceled) reports
// it; the outer loop that later fails with the same sentinel, a give-up of
// its own, reports it too.
func TestAnInnerDosSentinelDoesNotHideTheOuterGiveUp(t *testing.T) {
	errNotFound := errors.New("order not found")
	t.Run("a sentinel", func(t *testing.T) {
		var log giveUpLog
		r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			_ = jitterretry.Do(ctx, r, func(context.Context) error { return errNotFound }) // handled
			return fmt.Errorf("step 3: %w", errNotFound)
		})
		require.ErrorIs(t, err, errNotFound)
		assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}, log.get())
	})
	t.Run("the caller's cancel", func(t *testing.T) {
		var log giveUpLog
		r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := jitterretry.Do(ctx, r, func(fctx context.Context) error {
			_ = jitterretry.Do(fctx, r, func(context.Context) error { return context.Canceled }) // a sub-step abandoned
			cancel()
			return fctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpCanceled}, log.get())
	})
}

// TestTheRefusalsLoggedForDoAreForgottenWhenNoneRuns: the refusals the
// retryer logs while Do loops run (see TestDoAroundAnSDKCallReportsAGiveUpOnce)
// are dropped when the last loop ends: they would keep what their errors
// reach, the request's context and its values, alive.
func TestTheRefusalsLoggedForDoAreForgottenWhenNoneRuns(t *testing.T) {
	srv := newScriptServer(t, reply{code: "ValidationException"})
	r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = func(*jitterretry.GiveUpError) {} })
	client := newClient(srv.URL, r)
	type key struct{}
	big := new([1 << 20]byte)
	collected := make(chan struct{})
	runtime.AddCleanup(big, func(c chan struct{}) { close(c) }, collected)
	ctx := context.WithValue(context.Background(), key{}, big)
	big = nil
	require.NoError(t, jitterretry.Do(ctx, r, func(ctx context.Context) error {
		_ = putItem(ctx, client) // refused, tolerated
		return nil
	}))
	ctx = nil
	defer runtime.KeepAlive(r) // the retryer lives on, as a client's does
	// Cleanups run after a collection, on their own goroutine, and the HTTP
	// transport's goroutines let go of the request they served when next
	// scheduled: ten tries, 100 ms, failed once on a loaded machine (a CI
	// run beside a fuzzer and another job, 2026-12-07). A context kept for
	// good still fails after 3 s.
	for range 300 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("expect the context of a refused call collected once no Do loop runs")
}

// TestDoReportsItsOwnErrorJoinedWithAnSDKErrorThatHoldsIt: fn's own
// sentinel joined with an SDK error the middleware refused that holds the
// same sentinel is fn's give-up too: the refusal covers the SDK's error
// only.
func TestDoReportsItsOwnErrorJoinedWithAnSDKErrorThatHoldsIt(t *testing.T) {
	errQuota := errors.New("quota exhausted")
	quota := func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("quota",
			func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("quota for this call: %w", errQuota)
			}), middleware.After)
	}
	srv := newScriptServer(t, ok)
	var log giveUpLog
	r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
	client := newClient(srv.URL, r)
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		sdkErr := putItem(ctx, client, dynamodb.WithAPIOptions(quota))
		return errors.Join(sdkErr, errQuota) // and fn's own quota step failed too
	})
	require.ErrorIs(t, err, errQuota)
	assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}, log.get())
}

// TestDoRemembersTheGiveUpsOfManyInnerLoops: an outer fn that runs a dozen
// inner Do loops, each around one SDK call that runs out of attempts, and
// returns their errors joined, is reported by each inner loop once, and
// not again by the outer one; one give-up of the retryer's before them,
// an empty bucket, is reported once too.
func TestDoRemembersTheGiveUpsOfManyInnerLoops(t *testing.T) {
	srv := newScriptServer(t, serverErr)
	var log giveUpLog
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.OnGiveUp = log.add
		o.MaxAttempts = 1
	})
	client := newClient(srv.URL, r)
	const loops = 12
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		errs := make([]error, loops)
		for i := range errs {
			errs[i] = jitterretry.Do(ctx, r, func(ctx context.Context) error { return putItem(ctx, client) })
		}
		return errors.Join(errs...)
	})
	require.Error(t, err)
	assert.Equal(t, loops, srv.Calls())
	assert.Equal(t, slices.Repeat([]jitterretry.GiveUpReason{jitterretry.GiveUpMaxAttempts}, loops), log.get())
}

// fieldsError is a value error that == cannot compare, which the SDK's
// rules retry.
type fieldsError struct{ fields []string }

func (e fieldsError) Error() string        { return "throttled locally: " + strings.Join(e.fields, ",") }
func (e fieldsError) RetryableError() bool { return true }

// errorList is a slice of errors that is itself an error.
type errorList []error

func (l errorList) Error() string   { return fmt.Sprint([]error(l)) }
func (l errorList) Unwrap() []error { return l }

// failLocally is an API option that fails every attempt, before it is
// sent, with err, in the Finalize step after the retry middleware.
func failLocally(err error) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("failLocally",
			func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, err
			}), middleware.After)
	}
}

// TestDoReadsValueErrorsWithoutComparingThem: errors that are values, some
// of which == cannot compare, reach Do from the SDK's join of an attempt's
// error with the bucket's refusal, and from inner loops' give-ups; Do
// never compares them (it would panic), and reports them, at worst twice.
func TestDoReadsValueErrorsWithoutComparingThem(t *testing.T) {
	srv := newScriptServer(t, serverErr)
	t.Run("joined with a refusal", func(t *testing.T) {
		var log giveUpLog
		r := jitterretry.New(fast, func(o *jitterretry.Options) {
			o.OnGiveUp = log.add
			o.BucketCapacity, o.RetryCost, o.FailFastOnEmptyBudget = 20, 14, true
		})
		client := newClient(srv.URL, r)
		var err error
		require.NotPanics(t, func() {
			err = jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				return putItem(ctx, client, dynamodb.WithAPIOptions(failLocally(fieldsError{[]string{"pk"}})))
			})
		})
		require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
		assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpBudget, jitterretry.GiveUpNotRetryable}, log.get())
	})
	t.Run("two inner give-ups", func(t *testing.T) {
		var log giveUpLog
		r := jitterretry.New(fast, func(o *jitterretry.Options) {
			o.OnGiveUp = log.add
			o.MaxAttempts = 1
		})
		client := newClient(srv.URL, r)
		require.NotPanics(t, func() {
			_ = jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				for range 2 {
					_ = jitterretry.Do(ctx, r, func(ctx context.Context) error { return errorList{putItem(ctx, client)} })
				}
				return errorList{errors.New("own")}
			})
		})
		assert.Len(t, log.get(), 3)
	})
}

// TestDoReportsItsOwnSentinelAfterAnSDKCallFailedWithIt: an SDK call inside
// fn refused with a package-level error (a client-side middleware's), then
// fn failing on its own with the same error, are two give-ups: the
// refusal counts for errors reached through the SDK's operation error only.
func TestDoReportsItsOwnSentinelAfterAnSDKCallFailedWithIt(t *testing.T) {
	errLocalQuota := errors.New("local quota exhausted")
	local := dynamodb.WithAPIOptions(failLocally(errLocalQuota))
	for _, inner := range []bool{false, true} {
		t.Run(fmt.Sprintf("the call in an inner Do: %v", inner), func(t *testing.T) {
			srv := newScriptServer(t, ok)
			var log giveUpLog
			r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
			client := newClient(srv.URL, r)
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				if inner {
					_ = jitterretry.Do(ctx, r, func(ctx context.Context) error { return putItem(ctx, client, local) })
				} else {
					_ = putItem(ctx, client, local)
				}
				return fmt.Errorf("step 2, own quota check: %w", errLocalQuota)
			})
			require.ErrorIs(t, err, errLocalQuota)
			assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable, jitterretry.GiveUpNotRetryable}, log.get())
		})
	}
}

// TestALargeJoinOfSDKErrorsIsClassifiedFromWhatIsRead: a batch's errors
// joined, all at once (here 100 conflicts, 60 throttles: over 256 errors)
// or one by one (errs = errors.Join(errs, err): a join per item, deeper
// than the classifier reads after some sixty), are classified from the
// part the classifier reads, as before and as the SDK's errors.As finds
// them: a batch that lost a race is retried by Do.
func TestALargeJoinOfSDKErrorsIsClassifiedFromWhatIsRead(t *testing.T) {
	for name, join := range map[string]func(errs []error) error{
		"at once": func(errs []error) error { return errors.Join(errs...) },
		"one by one": func(errs []error) error {
			var all error
			for _, err := range errs {
				all = errors.Join(all, err)
			}
			return all
		},
	} {
		t.Run(name, func(t *testing.T) {
			batch := func(ctx context.Context, client *dynamodb.Client, n int) error {
				errs := make([]error, n)
				for i := range errs {
					errs[i] = conditionalPut(ctx, client)
				}
				return join(errs)
			}
			once := func(answer reply) *dynamodb.Client {
				return newClient(newScriptServer(t, answer).URL, jitterretry.New(fast, func(o *jitterretry.Options) { o.MaxAttempts = 1 }))
			}
			assert.Equal(t, jitterretry.ClassConflict, jitterretry.Classify(batch(context.Background(), once(ccf), 100)))
			assert.Equal(t, jitterretry.ClassThrottle, jitterretry.Classify(batch(context.Background(), once(throttle), 60)))

			r := jitterretry.New(fast)
			client := newClient(newScriptServer(t, ccf).URL, r)
			calls := 0
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				if calls++; calls > 1 {
					return nil
				}
				return batch(ctx, client, 100)
			})
			require.NoError(t, err)
			assert.Equal(t, 2, calls, "expect the batch that lost its race retried")
		})
	}
}

// TestDoInDoAroundAClientWithAnotherRetryerReportsOnce: the inner loop
// reports the give-up on the SDK call (the client's own retryer reports to
// no listener of this one), and the outer loop, which returns it, does not
// again, wrapped or not.
func TestDoInDoAroundAClientWithAnotherRetryerReportsOnce(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrapped: %v", wrap), func(t *testing.T) {
			srv := newScriptServer(t, reply{code: "ValidationException"})
			var log giveUpLog
			r := jitterretry.New(fast, func(o *jitterretry.Options) { o.OnGiveUp = log.add })
			client := newClient(srv.URL, retry.NewStandard())
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				return jitterretry.Do(ctx, r, func(ctx context.Context) error {
					err := putItem(ctx, client)
					if wrap {
						err = fmt.Errorf("saving order: %w", err)
					}
					return err
				})
			})
			require.Error(t, err)
			assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}, log.get())
		})
	}
}

// TestDoMarginIsNotTheSDKsSleeps: fn's call of an SDK operation that was
// throttled includes the SDK's backoff sleep. Do kept all of fn's time for
// the next call, so a retry that fits was refused, and DeadlineMargin did
// not fix it though the README says it does (helper-72: "858ms kept for
// the attempt after it" with a 10 ms DeadlineMargin). Now DeadlineMargin
// fixes Do's margin. (The learnt margin still counts fn's whole time.)
// The retryer's clock stands still but for the SDK's 300 ms sleep, which
// the server adds when the SDK's retry arrives, and the 800 ms deadline is
// on it: Do then sees exactly 500 ms left for its 300 ms backoff and the
// margin. Against a real 800 ms deadline the real sleeps and round trips
// left 190 ms of slack, which a sleep woken late or a stall before Do's
// check used up. fn's time kept as the margin, 300 ms, still leaves the
// backoff no room.
func TestDoMarginIsNotTheSDKsSleeps(t *testing.T) {
	const sdkSleep = 300 * time.Millisecond
	for _, margin := range []time.Duration{10 * time.Millisecond} {
		clk := newTestClock()
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Backoff = constBackoff(sdkSleep)
			o.DeadlineMargin = margin
			o.Clock = clk.Now
		})
		// The SDK retries the throttle inside fn's first call after 300 ms,
		// and that call ends in a conflict; Do waits the Retryer's throttle
		// backoff, 300 ms, and its second call succeeds.
		script := &scriptServer{script: []reply{throttle, ccf, ok}}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasPrefix(req.Header.Get("Amz-Sdk-Request"), "attempt=2;") {
				clk.Advance(sdkSleep) // the SDK's sleep before its retry, on the retryer's clock
			}
			script.serve(w, req)
		}))
		client := newClient(srv.URL, r)
		ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(800*time.Millisecond))
		calls := 0
		err := jitterretry.Do(ctx, r, func(ctx context.Context) error {
			calls++
			return conditionalPut(ctx, client)
		})
		cancel()
		srv.Close()
		require.NoError(t, err, "DeadlineMargin %v: expect the retry to fit: 300 ms backoff and the attempt's time in 500 ms", margin)
		assert.Equal(t, 2, calls)
		assert.Equal(t, 3, script.Calls(), "expect the SDK's retry of the throttle inside fn's first call")
	}
}

type constBackoff time.Duration

func (d constBackoff) BackoffDelay(int, error) (time.Duration, error) { return time.Duration(d), nil }

// TestAThrottledTransactionBacksOffOnACallersDelayersThrottleBase: a
// transaction DynamoDB cancelled for throttles, which Do retries as a
// throttle, is asked of a delayer of the caller's with the SDK's throttle
// checks as a throttle those checks know, not as the cancellation first:
// its code, first in the chain, hides any throttle after it from them.
func TestAThrottledTransactionBacksOffOnACallersDelayersThrottleBase(t *testing.T) {
	d, err := delayers.NewExponential(func(o *delayers.Options) { o.Base, o.ThrottleBase = time.Millisecond, 20*time.Millisecond })
	require.NoError(t, err)
	var delays []time.Duration
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = d
		o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
	})
	throttled := reply{cancelled: "None,ThrottlingError"}
	srv := newScriptServer(t, throttled, throttled, ok)
	client := newClient(srv.URL, r)
	require.NoError(t, jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		return transactWrite(ctx, client, 2)
	}))
	assert.Equal(t, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond}, delays, "expect the delayer's ThrottleBase")
}

// TestDoThrottleFloorForAThrottledTransaction: after a transaction DynamoDB
// cancelled for a throttle, which the SDK's rules do not call a throttle,
// a conflict's floor asks a Backoff of the caller's own with an error that
// is one (helper-74: it was asked with the cancellation, and answered with
// a conflict's delay).
func TestDoThrottleFloorForAThrottledTransaction(t *testing.T) {
	var asked []error
	isThrottle := retry.IsErrorThrottles(retry.DefaultThrottles)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(_ int, err error) (time.Duration, error) {
			asked = append(asked, err)
			return time.Millisecond, nil
		})
	})
	srv := newScriptServer(t, reply{cancelled: "None,ThrottlingError"}, reply{cancelled: "None,TransactionConflict"}, ok)
	client := newClient(srv.URL, r)
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		return transactWrite(ctx, client, 2)
	})
	require.NoError(t, err)
	require.NotEmpty(t, asked)
	floor := asked[len(asked)-1]
	assert.True(t, isThrottle.IsErrorThrottle(floor).Bool(), "expect the conflict's floor asked with a throttle, got %v", floor)
}

// conflictOnce runs a Do loop whose fn calls PutItem on c and takes the
// first call's answer for a conflict whose item moved from version 1 to 2,
// under a deadline of d.
func conflictOnce(r *jitterretry.Retryer, c *dynamodb.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	calls := 0
	return jitterretry.Do(ctx, r, func(ctx context.Context) error {
		calls++
		err := putItem(ctx, c)
		if calls == 1 {
			return jitterretry.Conflict(err, 1, 2)
		}
		return err
	})
}

// nearConflictsBesideAFarRegion has workers goroutines make calls
// PutItems each through a client of a region 300 ms away, and then runs
// ten Do loops through a near region's client, on the same retryer, whose
// first call meets a conflict and whose second succeeds under a 450 ms
// deadline: each must succeed.
func nearConflictsBesideAFarRegion(t *testing.T, workers, calls int) {
	t.Helper()
	r := jitterretry.New()
	far := newScriptServer(t, reply{delay: 300 * time.Millisecond})
	farClient := newClientIn("ap-southeast-2", far.URL, r)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				assert.NoError(t, putItem(context.Background(), farClient))
			}
		}()
	}
	wg.Wait()
	near := newScriptServer(t, ccf, ok)
	near.cycle = true
	nearClient := newClientIn("us-east-1", near.URL, r)
	for range 10 {
		assert.NoError(t, conflictOnce(r, nearClient, 450*time.Millisecond))
	}
}

// TestDoLearnsFromTheClientItsCallsUse: one retryer serves two regions'
// clients, as config.WithRetryer's does. A Do loop in the near region,
// whose attempts take a millisecond, sized its margin and its first
// conflict's window from the partition's times, every region's: beside a
// region 300 ms away, every conflict under 450 ms deadlines was refused
// (helper-148), and a client of another region joining the warm retryer
// had its first call's 500 ms credential fetch taken for a warm round
// trip, twice (a backoff of 4.5 s drawn, 1 s kept, 997 ms left). It now
// learns from the slowest client fn's calls used.
func TestDoLearnsFromTheClientItsCallsUse(t *testing.T) {
	t.Run("a far region beside", func(t *testing.T) {
		nearConflictsBesideAFarRegion(t, 1, 4)
	})
	t.Run("a near client joining a lane full of a far one's times", func(t *testing.T) {
		// Past its first 32 timed attempts the partition times one in 16:
		// the near client's estimate is made for the loop all the same,
		// not left to the partition's (helper-150: 0 to 10 of 10 refused).
		nearConflictsBesideAFarRegion(t, 8, 5)
	})
	t.Run("a far call before a near one in fn", func(t *testing.T) {
		// fn reads from a far region (300 ms, then 450 ms) and writes to a
		// near one, which answers a conflict: the margin keeps the far
		// call's headroom, and the loop gives up before calling fn again
		// rather than run its second far call into the deadline (it did,
		// learning from the last call's client only: helper-150).
		r := jitterretry.New()
		far := newScriptServer(t, reply{delay: 300 * time.Millisecond}, reply{delay: 300 * time.Millisecond},
			reply{delay: 300 * time.Millisecond}, reply{delay: 450 * time.Millisecond})
		farClient := newClientIn("ap-southeast-2", far.URL, r)
		near := newScriptServer(t, ok, ccf, ok)
		nearClient := newClientIn("us-east-1", near.URL, r)
		require.NoError(t, putItem(context.Background(), farClient))
		require.NoError(t, putItem(context.Background(), farClient))
		require.NoError(t, putItem(context.Background(), nearClient))
		ctx, cancel := context.WithTimeout(context.Background(), 750*time.Millisecond)
		defer cancel()
		calls := 0
		err := jitterretry.Do(ctx, r, func(ctx context.Context) error {
			calls++
			if err := putItem(ctx, farClient); err != nil {
				return err
			}
			err := putItem(ctx, nearClient)
			if calls == 1 {
				return jitterretry.Conflict(err, 1, 2)
			}
			return err
		})
		var g *jitterretry.GiveUpError
		require.ErrorAs(t, err, &g)
		assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "expect the loop to give up before its second call: %v", err)
		assert.Equal(t, 1, calls)
		assert.Equal(t, 3, far.Calls(), "expect no second far call run into the deadline")
	})
	t.Run("a cold client of another region joining", func(t *testing.T) {
		r := jitterretry.New()
		warm := newScriptServer(t, ok)
		for range 4 {
			require.NoError(t, putItem(context.Background(), newClient(warm.URL, r)))
		}
		srv := newScriptServer(t, ccf, ok)
		assert.NoError(t, conflictOnce(r, newColdClientIn("eu-west-1", srv.URL, r), 1500*time.Millisecond))
	})
}

// errUnprocessed is an application's error for a BatchWriteItem that left
// items unprocessed: DynamoDB answers such a batch with a 200, the
// throttle inside its body.
var errUnprocessed = errors.New("unprocessed items remain")

// TestDoBacksOffAThrottleTheLimiterNeverSawOnTheThrottleBase: a loop that
// resends a BatchWriteItem's UnprocessedItems as a throttle (what
// DynamoDB's guide asks: back off), with the send-rate limiter on. The
// limiter sees those answers as successes, and pacing with few throttles
// it took the loop's throttle for a near miss and backed off from
// BaseDelay: helper-198's 16 workers on a table of 500 items a second sent
// three times the requests and gave up for the budget 207 and 338 times in
// 8 s, where without the limiter none did. Judged by the error's type, the
// leftovers still were near misses when Options.Throttles named fn's error
// or fn made a throttle's error of them (helper-201). What counts is
// whether the limiter counted a throttle answer in fn's call: one it did
// (an SDK call answered with a throttle) still backs off as a near miss,
// as the middleware's retries do (TestThrottleBackoffWhileTheLimiterPaces).
func TestDoBacksOffAThrottleTheLimiterNeverSawOnTheThrottleBase(t *testing.T) {
	const throttleBase, base = time.Second, pacedLoopBase // the near miss's rule is for the default ThrottleBaseDelay only
	madeUp := &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "items left unprocessed"}
	byClassify := func(o *jitterretry.DoOptions) {
		o.Classify = func(err error) jitterretry.ErrorClass {
			var thr *types.ProvisionedThroughputExceededException
			if errors.Is(err, errUnprocessed) || errors.As(err, &thr) {
				return jitterretry.ClassThrottle
			}
			return jitterretry.ClassNotRetryable
		}
	}
	for name, c := range map[string]struct {
		named    bool  // Options.Retryables and Throttles name errUnprocessed
		leftover error // fn's error for the leftovers
		doOpts   []func(*jitterretry.DoOptions)
		answered bool // the batch is answered with a throttle, not a 200 with leftovers
		// inSTS: Do is called under a context of an STS operation (as a
		// credential provider would): its home lane is STS's, whose
		// limiter never saw the batch (helper-219)
		inSTS bool
		want  time.Duration
	}{
		"Classify":                                             {leftover: errUnprocessed, doOpts: []func(*jitterretry.DoOptions){byClassify}, want: throttleBase},
		"Options.Retryables and Throttles":                     {leftover: errUnprocessed, want: throttleBase, named: true},
		"a throttle's error of fn's":                           {leftover: madeUp, want: throttleBase},
		"an answer the limiter saw":                            {answered: true, doOpts: []func(*jitterretry.DoOptions){byClassify}, want: base},
		"an answer the limiter saw, Do under an STS operation": {answered: true, inSTS: true, doOpts: []func(*jitterretry.DoOptions){byClassify}, want: base},
	} {
		t.Run(name, func(t *testing.T) {
			var batches atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".BatchWriteItem") && batches.Add(1) == 1 {
					if c.answered {
						ddbwire.WriteError(w, http.StatusBadRequest, ddbwire.ProvisionedThroughputExceeded, "scripted")
						return
					}
					ddbwire.WriteJSON(w, http.StatusOK, []byte(`{"UnprocessedItems":{"orders":[{"PutRequest":{"Item":{"pk":{"S":"b"}}}}]}}`))
					return
				}
				ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
			}))
			t.Cleanup(srv.Close)
			var delays []time.Duration
			r := pacedLoopRetryer(t, &delays, func(o *jitterretry.Options) {
				if c.named {
					isLeftover := func(err error) aws.Ternary { return aws.BoolTernary(errors.Is(err, errUnprocessed)) }
					o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(isLeftover)}
					o.Throttles = []retry.IsErrorThrottle{retry.IsErrorThrottleFunc(isLeftover)}
				}
			})
			client := newClient(srv.URL, r)
			for range 20 {
				require.NoError(t, putItem(context.Background(), client))
			}
			items := []types.WriteRequest{{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "b"}}}}}
			doCtx := context.Background()
			if c.inSTS {
				doCtx = awsmiddle.SetServiceID(doCtx, "STS")
			}
			err := jitterretry.Do(doCtx, r, func(ctx context.Context) error {
				out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"orders": items}},
					func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }) // the loop retries; a throttle's answer reaches fn
				if err != nil {
					return err
				}
				if len(out.UnprocessedItems["orders"]) > 0 {
					items = out.UnprocessedItems["orders"]
					return c.leftover
				}
				return nil
			}, c.doOpts...)
			require.NoError(t, err)
			assert.Equal(t, int32(2), batches.Load(), "expect the batch sent again once")
			assert.Equal(t, []time.Duration{c.want}, delays, "expect the loop's throttle to back off from %v", c.want)
		})
	}
}

// TestDoLateAnswersOfAnEarlierCallAreNotItsNextCallsNearMiss: fn's first
// call leaves a BatchWriteItem behind in a goroutine, answered with a
// throttle during fn's second call; both calls return leftovers the limiter
// never counted. The late answer made the second call's leftovers a near
// miss (20 ms where 2 s: helper-202); it belongs to the call it was made in.
func TestDoLateAnswersOfAnEarlierCallAreNotItsNextCallsNearMiss(t *testing.T) {
	release := make(chan struct{})
	var batches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".BatchWriteItem") && batches.Add(1) == 1 {
			<-release
			ddbwire.WriteError(w, http.StatusBadRequest, ddbwire.ProvisionedThroughputExceeded, "late")
			return
		}
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
	}))
	t.Cleanup(srv.Close)
	var delays []time.Duration
	r := pacedLoopRetryer(t, &delays)
	client := newClient(srv.URL, r)
	items := map[string][]types.WriteRequest{"orders": {{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "b"}}}}}}
	done := make(chan struct{})
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		switch calls++; calls {
		case 1:
			go func() {
				defer close(done)
				_, _ = client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: items}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
			}()
			return errUnprocessed
		case 2:
			for range 20 { // answers the limiter counts as accepted: it paces with few throttles
				if err := putItem(ctx, client); err != nil {
					return err
				}
			}
			close(release)
			<-done // the first call's attempt released with its throttle
			return errUnprocessed
		}
		return nil
	}, func(o *jitterretry.DoOptions) {
		o.Classify = func(err error) jitterretry.ErrorClass {
			if errors.Is(err, errUnprocessed) {
				return jitterretry.ClassThrottle
			}
			return jitterretry.ClassNotRetryable
		}
	})
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, delays, "expect both calls' leftovers on the throttle base")
}

// pacedLoopBase is pacedLoopRetryer's BaseDelay.
const pacedLoopBase = 10 * time.Millisecond

// pacedLoopRetryer returns a retryer whose send-rate limiter paces at a
// floor well above a test's pace (no attempt waits, and with no throttle
// the limiter paces with few), with exact backoffs (BaseDelay
// pacedLoopBase, the default ThrottleBaseDelay, for which alone the near
// miss's rule holds), recording each retry's delay in delays, after opts.
func pacedLoopRetryer(t *testing.T, delays *[]time.Duration, opts ...func(*jitterretry.Options)) *jitterretry.Retryer {
	t.Helper()
	r := jitterretry.New(append([]func(*jitterretry.Options){func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 1000, MinRate: 500}
		o.Jitter, o.BaseDelay = delayers.StrategyExponential, pacedLoopBase
		o.OnRetry = func(e jitterretry.RetryEvent) { *delays = append(*delays, e.Delay) }
	}}, opts...)...)
	require.NoError(t, r.Err())
	return r
}

// TestADoLoopUnderWayKeepsItsPartition: a Do loop retrying in partition
// "hot", its retry's 14 tokens paid from hot's bucket of 28, is in use
// while its fn's call waits, however many other keys come and go. A churn
// of 1,100 new keys forgot hot's lane as least recently used: the SDK's
// calls in hot then got a new, full bucket while the loop paid from the
// forgotten one, and the partition spent twice its capacity (helper-255:
// two retries of 14 granted beside the loop's, where its bucket held one).
func TestADoLoopUnderWayKeepsItsPartition(t *testing.T) {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.PartitionKey = jitterretry.PartitionFromContext
		o.BucketCapacity = 28 // two retries of RetryCost 14
		o.FailFastOnEmptyBudget = true
		o.BaseDelay, o.MaxBackoff = time.Millisecond, time.Millisecond
	})
	require.NoError(t, r.Err())
	failing := newScriptServer(t, serverErr)
	plain := newClient(failing.URL, aws.NopRetryer{}) // fn's calls: one attempt each
	hot := jitterretry.WithPartition(context.Background(), "hot")

	inRetry, letGo := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		calls := 0
		done <- jitterretry.Do(hot, r, func(ctx context.Context) error {
			if calls++; calls == 2 {
				close(inRetry)
				<-letGo
				return nil
			}
			return putItem(ctx, plain) // a 500: Do pays 14 from hot's bucket
		})
	}()
	<-inRetry
	for i := range 1100 { // other tenants come and go
		release, err := r.GetAttemptToken(jitterretry.WithPartition(context.Background(), fmt.Sprint("tenant-", i)))
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	failed := putItem(context.Background(), plain)
	granted := 0
	for range 4 {
		if _, err := r.GetRetryToken(hot, failed); err != nil {
			break
		}
		granted++
	}
	close(letGo)
	require.NoError(t, <-done)
	assert.Equal(t, 1, granted, "expect one retry of 14 granted from hot's bucket, the loop holding the other 14")
}
