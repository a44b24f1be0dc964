package jitterretry_test

// The SDK's own test cases, turned into tests of jitterretry.
//
// Each test here ports one test function of aws-sdk-go-v2 v1.48.0 (packages
// aws/retry and aws/ratelimit) and is named after it:
// TestSDKContract_<the SDK's test name>. The inputs and expected outcomes are
// the SDK's; the retryer is jitterretry.New() (or jitterretry.NewTokenBucket
// for the ratelimit tests, used both as a retry.RateLimiter and inside
// retry.NewStandard). Where our behaviour differs on purpose, the case sits
// in the test's `differences` table with a one-line reason and asserts what
// we do, so the README's side-by-side table can be checked against them.
//
// What the SDK's tests reach through unexported fields is driven through the
// public API: a fixed jitter draw through Options.Source (or
// StrategyExponential for a draw of 1), the first-attempt increment through
// the order in which the middleware releases its tokens, long polling through
// the middleware's protocol (GetRetryToken refused, then RetryDelay), the
// retry metadata through the Amz-Sdk-Request header and retry.AttemptResults,
// and clock skew through the SDK's RecordResponseTiming middleware.
//
// Not ported: two of TestMetricsHeaderMiddleware's three cases (the
// deprecated MetricsHeader middleware alone; its third, the header's ttl,
// is ported through the attempt middleware), TestTokenBucket's Resize steps (our
// bucket has a fixed capacity), the adaptive-mode files, and the limiter
// updates of TestAttemptMiddleware_adaptiveMode (its quota part is ported).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithymw "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// ---------------------------------------------------------------------------
// Fixed jitter and quick backoffs.

// sdkcDraw is a delayers.Source that always draws the same value.
type sdkcDraw uint64

func (d sdkcDraw) Uint64() uint64 { return uint64(d) }

// sdkcFraction is the draw that full jitter turns into the fraction f, in
// [0, 1), of its window: the SDK's randFloat64 returning f. A fraction of 1
// (the whole window) is StrategyExponential.
func sdkcFraction(f float64) delayers.Source { return sdkcDraw(math.Ldexp(f, 64)) }

// sdkcJitter fixes the jitter at the fraction f of the window, f in [0, 1].
func sdkcJitter(f float64) func(*jitterretry.Options) {
	return func(o *jitterretry.Options) {
		if f == 1 {
			o.Jitter = delayers.StrategyExponential
			return
		}
		o.Source = sdkcFraction(f)
	}
}

// sdkcQuick keeps every backoff within 2 ms, for cases about what is retried
// rather than how long it waits (the SDK's tests sleep with a no-op).
func sdkcQuick(o *jitterretry.Options) {
	o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Millisecond, time.Millisecond, 2*time.Millisecond
}

// sdkcSlack is how much later than asked a real sleep may end on a loaded
// machine (-race, parallel tests): 500 ms was passed once, 929 ms for 550,
// with the test binary starved beside CPU hogs (helper-230).
const sdkcSlack = 2 * time.Second

// ---------------------------------------------------------------------------
// Errors, as the SDK's retry tests build them, in our own types.

// sdkcTemporary has Temporary() bool.
type sdkcTemporary bool

func (e sdkcTemporary) Temporary() bool { return bool(e) }
func (e sdkcTemporary) Error() string   { return fmt.Sprintf("temporary=%t", bool(e)) }

// sdkcTimeout has Timeout() bool.
type sdkcTimeout bool

func (e sdkcTimeout) Timeout() bool { return bool(e) }
func (e sdkcTimeout) Error() string { return fmt.Sprintf("timeout=%t", bool(e)) }

// sdkcRetryableFlag has RetryableError() bool.
type sdkcRetryableFlag bool

func (e sdkcRetryableFlag) RetryableError() bool { return bool(e) }
func (e sdkcRetryableFlag) Error() string        { return fmt.Sprintf("retryable=%t", bool(e)) }

// sdkcCanceledFlag has CanceledError() bool.
type sdkcCanceledFlag bool

func (e sdkcCanceledFlag) CanceledError() bool { return bool(e) }
func (e sdkcCanceledFlag) Error() string       { return fmt.Sprintf("canceled=%t", bool(e)) }

// sdkcStatus is a bare HTTP status, HTTPStatusCode() int.
type sdkcStatus int

func (e sdkcStatus) HTTPStatusCode() int { return int(e) }
func (e sdkcStatus) Error() string       { return fmt.Sprintf("http status %d", int(e)) }

// sdkcSendFailure is a request that got no response: ConnectionError() true.
type sdkcSendFailure struct{ err error }

func (e *sdkcSendFailure) ConnectionError() bool { return true }
func (e *sdkcSendFailure) Error() string         { return "send failed: " + e.err.Error() }
func (e *sdkcSendFailure) Unwrap() error         { return e.err }

// sdkcCoded carries an error code but is no smithy.APIError.
type sdkcCoded struct {
	code string
	err  error
}

func (e *sdkcCoded) ErrorCode() string { return e.code }
func (e *sdkcCoded) Unwrap() error     { return e.err }
func (e *sdkcCoded) Error() string {
	if e.err == nil {
		return e.code
	}
	return e.code + ": " + e.err.Error()
}

// sdkcModeledOver is a modelled API error (a service's generated type) over
// another error, such as the response's status.
type sdkcModeledOver struct {
	code string
	err  error
}

func (e *sdkcModeledOver) ErrorCode() string             { return e.code }
func (e *sdkcModeledOver) ErrorMessage() string          { return e.code }
func (e *sdkcModeledOver) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }
func (e *sdkcModeledOver) Error() string                 { return e.code + ": modelled" }
func (e *sdkcModeledOver) Unwrap() error                 { return e.err }

// sdkcVerdict is an error that says itself whether it may be retried.
type sdkcVerdict struct {
	err       error
	retryable bool
}

func (e *sdkcVerdict) RetryableError() bool { return e.retryable }
func (e *sdkcVerdict) Error() string        { return e.err.Error() }
func (e *sdkcVerdict) Unwrap() error        { return e.err }

// sdkcStatusOver is a status over the API error the response deserialised
// to, as a response error carries it.
type sdkcStatusOver struct {
	status int
	err    error
}

func (e *sdkcStatusOver) HTTPStatusCode() int { return e.status }
func (e *sdkcStatusOver) Error() string       { return fmt.Sprintf("status %d: %v", e.status, e.err) }
func (e *sdkcStatusOver) Unwrap() error       { return e.err }

// sdkcCodedResponse is a response error with an error code, which is no
// smithy.APIError.
type sdkcCodedResponse struct {
	*smithyhttp.ResponseError
	code string
}

func (e *sdkcCodedResponse) ErrorCode() string { return e.code }
func (e *sdkcCodedResponse) Error() string     { return e.code + ": " + e.ResponseError.Error() }
func (e *sdkcCodedResponse) Unwrap() error     { return e.ResponseError }

func sdkcBool(v bool) *bool { return &v }

// sdkcShape is how a failed response carries its error code.
type sdkcShape uint8

const (
	sdkcBare     sdkcShape = iota // no code: the response error alone
	sdkcCodeOnly                  // a code on a type that is no smithy.APIError
	sdkcModeled                   // a modelled API error type
	sdkcGeneric                   // a *smithy.GenericAPIError
)

// sdkcReply is one response of a scripted service.
type sdkcReply struct {
	status     int
	shape      sdkcShape
	code       string
	retryAfter string // the x-amz-retry-after header; "" for none
	verdict    *bool  // an explicit RetryableError() over the response error
}

// err is the attempt's error as the retry middleware sees it; nil for a
// success.
func (a sdkcReply) err() error {
	if a.status < 300 {
		return nil
	}
	h := http.Header{}
	if a.retryAfter != "" {
		h.Set("x-amz-retry-after", a.retryAfter)
	}
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: a.status, Header: h, Body: http.NoBody}}
	var err error
	switch a.shape {
	case sdkcCodeOnly:
		err = &sdkcCodedResponse{ResponseError: &smithyhttp.ResponseError{Response: resp}, code: a.code}
	case sdkcModeled:
		err = &smithyhttp.ResponseError{Response: resp, Err: &modeled{a.code}}
	case sdkcGeneric:
		err = &smithyhttp.ResponseError{Response: resp, Err: &smithy.GenericAPIError{Code: a.code, Message: a.code}}
	default:
		err = &smithyhttp.ResponseError{Response: resp}
	}
	if a.verdict != nil {
		err = &sdkcVerdict{err: err, retryable: *a.verdict}
	}
	return err
}

// ---------------------------------------------------------------------------
// The SDK's retry middleware, with the request, the response metadata and the
// Attempt options under the test's control.

// sdkcRun runs one operation through retry.NewAttemptMiddleware with
// retryer r. req is the request (nil: a *smithyhttp.Request); answer gives
// each attempt's response metadata and error by the attempt's 1-based number.
// It returns the attempts made, the operation's metadata and its error.
func sdkcRun(ctx context.Context, r aws.Retryer, req any, answer func(n int, req any) (smithymw.Metadata, error), attemptOpts ...func(*retry.Attempt)) (int, smithymw.Metadata, error) {
	if req == nil {
		req = &smithyhttp.Request{Request: &http.Request{Header: http.Header{}}}
	}
	m := retry.NewAttemptMiddleware(r, func(in any) any { return in }, attemptOpts...)
	attempts := 0
	next := smithymw.FinalizeHandlerFunc(func(_ context.Context, in smithymw.FinalizeInput) (smithymw.FinalizeOutput, smithymw.Metadata, error) {
		attempts++
		md, err := answer(attempts, in.Request)
		return smithymw.FinalizeOutput{}, md, err
	})
	_, md, err := m.HandleFinalize(ctx, smithymw.FinalizeInput{Request: req}, next)
	return attempts, md, err
}

// sdkcNoRewind is a request whose stream cannot be rewound for a retry.
type sdkcNoRewind struct{}

var sdkcErrRewind = errors.New("rewind refused")

func (sdkcNoRewind) RewindStream() error { return sdkcErrRewind }

// sdkcMetaKey keys the test's own values in response metadata.
type sdkcMetaKey struct{ name string }

func sdkcMeta(name string, v any) smithymw.Metadata {
	var md smithymw.Metadata
	md.Set(sdkcMetaKey{name}, v)
	return md
}

// sdkcDated is the metadata the SDK's RecordResponseTiming middleware records
// for a response whose Date header is skew away from now (no Date header
// when dated is false): the candidate clock skew the retry middleware reads.
func sdkcDated(dated bool, skew time.Duration) smithymw.Metadata {
	respond := smithymw.DeserializeHandlerFunc(func(context.Context, smithymw.DeserializeInput) (smithymw.DeserializeOutput, smithymw.Metadata, error) {
		h := http.Header{}
		if dated {
			h.Set("Date", time.Now().Add(skew).UTC().Format(http.TimeFormat))
		}
		return smithymw.DeserializeOutput{RawResponse: &smithyhttp.Response{Response: &http.Response{StatusCode: 403, Header: h}}}, smithymw.Metadata{}, nil
	})
	_, md, _ := awsmiddle.RecordResponseTiming{}.HandleDeserialize(context.Background(), smithymw.DeserializeInput{}, respond)
	return md
}

// sdkcSkewRetried runs one operation that fails with err, its response dated
// skew away from the client's clock (undated when dated is false), with the
// client's recorded skew at clientSkew, and reports whether the middleware
// retried its first attempt.
func sdkcSkewRetried(t *testing.T, err error, dated bool, skew, clientSkew time.Duration, disabled bool) bool {
	t.Helper()
	r := jitterretry.New(sdkcQuick)
	recorded := &atomic.Int64{}
	recorded.Store(int64(clientSkew))
	_, md, opErr := sdkcRun(context.Background(), r, nil, func(int, any) (smithymw.Metadata, error) {
		return sdkcDated(dated, skew), err
	}, func(a *retry.Attempt) {
		a.ClientSkew = recorded
		a.DisableClockSkewCorrection = disabled
	})
	require.Error(t, opErr, "expect the operation to fail, got no error")
	results, found := retry.GetAttemptResults(md)
	require.True(t, found, "expect attempt results in the metadata, got none")
	require.NotEmpty(t, results.Results, "expect at least one attempt result, got none")
	return results.Results[0].Retried
}

// ---------------------------------------------------------------------------
// retry2026_test.go

// sdkcOutcome is what the retryer must decide after one step.
type sdkcOutcome uint8

const (
	sdkcSucceeds      sdkcOutcome = iota // the attempt succeeded
	sdkcRetries                          // retried, after delay
	sdkcMaxAttempts                      // retryable, but no attempt left
	sdkcQuotaExceeded                    // retryable, but the bucket refuses
	sdkcFails                            // not retryable
)

// sdkcAnyQuota: the step does not check the bucket.
const sdkcAnyQuota = -1

type sdkcStep struct {
	reply sdkcReply
	want  sdkcOutcome
	quota int           // tokens left after the step, or sdkcAnyQuota
	delay time.Duration // the wait after the hint (sdkcRetries), or a long-polling backoff (sdkcQuotaExceeded)
}

type sdkcScenario struct {
	maxAttempts  int
	tokens       *uint // the bucket's tokens; nil: the retryer's own bucket of 500
	randomJitter bool  // the SDK's case leaves the jitter random; otherwise a draw of 1
	maxBackoff   time.Duration
	baseDelay    time.Duration // 0: the default
	dynamoDB     bool
	longPolling  bool
	// sdkBucket gives the retryer the SDK's ratelimit.NewTokenRateLimit,
	// of tokens or 500, as the SDK's tests give retry.NewStandard; false,
	// its own bucket (a TokenBucket when tokens is set).
	sdkBucket bool
	steps     []sdkcStep
}

func sdkcTokens(n uint) *uint { return &n }

// build returns the retryer of the scenario, the function that reads its
// bucket, and the retries it reports.
func (sc sdkcScenario) build(t *testing.T, failFast bool) (aws.RetryerV2, func() uint, *[]jitterretry.RetryEvent) {
	events := &[]jitterretry.RetryEvent{}
	var bucket interface {
		retry.RateLimiter
		Remaining() uint
	}
	switch {
	case sc.sdkBucket && sc.tokens != nil:
		bucket = ratelimit.NewTokenRateLimit(*sc.tokens)
	case sc.sdkBucket:
		bucket = ratelimit.NewTokenRateLimit(500)
	case sc.tokens != nil:
		bucket = jitterretry.NewTokenBucket(*sc.tokens, 0)
	}
	r := jitterretry.New(func(o *jitterretry.Options) {
		if sc.dynamoDB {
			jitterretry.DynamoDB(o)
		}
		if sc.maxAttempts != 0 {
			o.MaxAttempts = sc.maxAttempts
		}
		if sc.maxBackoff != 0 {
			o.MaxBackoff = sc.maxBackoff
		}
		if sc.baseDelay != 0 {
			o.BaseDelay = sc.baseDelay
		}
		if !sc.randomJitter {
			sdkcJitter(1)(o)
		}
		if bucket != nil {
			o.RateLimiter = bucket
		}
		o.FailFastOnEmptyBudget = failFast
		o.OnRetry = func(e jitterretry.RetryEvent) { *events = append(*events, e) }
	})
	require.NoError(t, r.Err())
	remaining := func() uint {
		if bucket != nil {
			require.Equal(t, bucket.Remaining(), r.Remaining(), "expect the retryer to report its bucket's tokens")
		}
		return r.Remaining()
	}
	var rv aws.RetryerV2 = r
	if sc.longPolling {
		rv = retry.AddWithLongPolling(r).(aws.RetryerV2)
	}
	return rv, remaining, events
}

// play drives the retryer as the SDK's middleware does, step by step, and
// checks each step's outcome, bucket and wait.
func (sc sdkcScenario) play(t *testing.T, failFast bool) {
	r, remaining, events := sc.build(t, failFast)
	ctx := context.Background()
	attempt := 0
	releaseRetry := func(error) error { return nil }
	for i, st := range sc.steps {
		attempt++
		releaseAttempt, err := r.GetAttemptToken(ctx)
		require.NoError(t, err, "step %d: expect an attempt token, got %v", i, err)
		opErr := st.reply.err()
		// The middleware's order: the retry's token, then the attempt's.
		require.NoError(t, releaseRetry(opErr), "step %d", i)
		releaseRetry = func(error) error { return nil }
		require.NoError(t, releaseAttempt(opErr), "step %d", i)

		switch st.want {
		case sdkcSucceeds:
			require.NoError(t, opErr, "step %d: expect a success", i)
		case sdkcRetries:
			require.True(t, r.IsErrorRetryable(opErr), "step %d: expect retryable, got not retryable: %v", i, opErr)
			require.Less(t, attempt, r.MaxAttempts(), "step %d: expect an attempt left, got max attempts %d", i, r.MaxAttempts())
			before := len(*events)
			releaseRetry, err = r.GetRetryToken(ctx, opErr)
			require.NoError(t, err, "step %d: expect a retry token, got %v", i, err)
			backoff, err := r.RetryDelay(attempt, opErr)
			require.NoError(t, err, "step %d: expect a delay, got %v", i, err)
			require.Len(t, *events, before+1, "step %d: expect one retry reported", i)
			wait := (*events)[before].Delay
			assert.Equal(t, st.delay, wait, "step %d: expect a wait of %v, got %v", i, st.delay, wait)
			assert.LessOrEqual(t, backoff, wait, "step %d: expect the hint never to shorten the backoff %v, got %v", i, backoff, wait)
		case sdkcMaxAttempts:
			require.True(t, r.IsErrorRetryable(opErr), "step %d: expect retryable, got not retryable", i)
			assert.GreaterOrEqual(t, attempt, r.MaxAttempts(), "step %d: expect max attempts %d reached, got attempt %d", i, r.MaxAttempts(), attempt)
		case sdkcQuotaExceeded:
			require.True(t, r.IsErrorRetryable(opErr), "step %d: expect retryable, got not retryable", i)
			start := time.Now()
			_, err := r.GetRetryToken(ctx, opErr)
			inToken := time.Since(start)
			require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted, "step %d: expect the retry quota exceeded, got %v", i, err)
			if sc.longPolling && st.delay > 0 {
				// The middleware asks a long-polling operation's retryer
				// for a delay after the refusal, and sleeps it: in all,
				// the operation must back off the SDK's delay.
				backoff, err := r.RetryDelay(attempt, opErr)
				require.NoError(t, err, "step %d: expect a delay, got %v", i, err)
				total := inToken + backoff
				assert.GreaterOrEqual(t, total, st.delay, "step %d: expect a long-polling backoff of %v, got %v (%v in GetRetryToken, then RetryDelay %v)", i, st.delay, total, inToken, backoff)
				assert.Less(t, total, st.delay+sdkcSlack, "step %d: expect a long-polling backoff of %v, got %v", i, st.delay, total)
			}
		case sdkcFails:
			assert.False(t, r.IsErrorRetryable(opErr), "step %d: expect not retryable, got retryable: %v", i, opErr)
		}
		if st.quota != sdkcAnyQuota {
			got := remaining()
			assert.Equal(t, uint(st.quota), got, "step %d: expect %d tokens left, got %d", i, st.quota, got)
		}
		if st.want == sdkcSucceeds {
			attempt = 0
		}
	}
}

func TestSDKContract_Retry2026StandardMode(t *testing.T) {
	const ms = time.Millisecond
	r200 := sdkcReply{status: 200}
	r500 := sdkcReply{status: 500}
	r502 := sdkcReply{status: 502}
	throttling := sdkcReply{status: 400, shape: sdkcCodeOnly, code: "Throttling"}
	hinted := func(v string) sdkcReply { return sdkcReply{status: 500, retryAfter: v} }
	retried := func(q int, d time.Duration) sdkcStep { return sdkcStep{want: sdkcRetries, quota: q, delay: d} }
	with := func(s sdkcStep, r sdkcReply) sdkcStep { s.reply = r; return s }
	succeeded := func(q int) sdkcStep { return sdkcStep{reply: r200, want: sdkcSucceeds, quota: q} }
	maxed := func(r sdkcReply, q int) sdkcStep { return sdkcStep{reply: r, want: sdkcMaxAttempts, quota: q} }
	refused := func(r sdkcReply, q int, d time.Duration) sdkcStep {
		return sdkcStep{reply: r, want: sdkcQuotaExceeded, quota: q, delay: d}
	}
	failed := func(r sdkcReply, q int) sdkcStep { return sdkcStep{reply: r, want: sdkcFails, quota: q} }

	cases := map[string]sdkcScenario{
		"retry eventually succeeds": {steps: []sdkcStep{
			with(retried(486, 50*ms), r500), with(retried(472, 100*ms), r500), succeeded(486)}},
		"fail due to max attempts reached": {steps: []sdkcStep{
			with(retried(486, 50*ms), r502), with(retried(472, 100*ms), r502), maxed(r502, 472)}},
		"retry quota reached after a single retry": {tokens: sdkcTokens(14), steps: []sdkcStep{
			with(retried(0, 50*ms), r500), refused(r500, 0, 0)}},
		"no retries at all if retry quota is 0": {tokens: sdkcTokens(0), steps: []sdkcStep{
			refused(r500, 0, 0)}},
		"verifying exponential backoff timing": {maxAttempts: 5, steps: []sdkcStep{
			with(retried(486, 50*ms), r500), with(retried(472, 100*ms), r500),
			with(retried(458, 200*ms), r500), with(retried(444, 400*ms), r500), maxed(r500, 444)}},
		"verify max backoff time": {maxAttempts: 5, maxBackoff: 200 * ms, steps: []sdkcStep{
			with(retried(486, 50*ms), r500), with(retried(472, 100*ms), r500),
			with(retried(458, 200*ms), r500), with(retried(444, 200*ms), r500), maxed(r500, 444)}},
		"retry stops after retry quota exhaustion": {maxAttempts: 5, tokens: sdkcTokens(20), steps: []sdkcStep{
			with(retried(6, 50*ms), r500), refused(r502, 6, 0)}},
		"retry quota recovery after successful responses": {maxAttempts: 5, tokens: sdkcTokens(30), steps: []sdkcStep{
			with(retried(16, 50*ms), r500), with(retried(2, 100*ms), r502), succeeded(16),
			with(retried(2, 50*ms), r500), succeeded(16)}},
		"throttling error token bucket drain and backoff duration": {steps: []sdkcStep{
			with(retried(495, time.Second), throttling), succeeded(500)}},
		"429 without error code is a throttling error": {steps: []sdkcStep{
			with(retried(495, time.Second), sdkcReply{status: 429}), succeeded(500)}},
		"429 with unknown error code is a throttling error": {steps: []sdkcStep{
			with(retried(495, time.Second), sdkcReply{status: 429, shape: sdkcCodeOnly, code: "SomeUnmodeledError"}), succeeded(500)}},
		"429 with generic API error is a throttling error": {steps: []sdkcStep{
			with(retried(495, time.Second), sdkcReply{status: 429, shape: sdkcGeneric, code: "SomeUnmodeledError"}), succeeded(500)}},
		"429 with modeled error that is not retryable is not retried": {steps: []sdkcStep{
			failed(sdkcReply{status: 429, shape: sdkcModeled, code: "ConcurrentResourcesLimitExceededException"}, 500)}},
		"429 with modeled throttling error is a throttling error": {steps: []sdkcStep{
			with(retried(495, time.Second), sdkcReply{status: 429, shape: sdkcModeled, code: "ThrottlingException"}), succeeded(500)}},
		"429 explicitly not retryable is not retried": {steps: []sdkcStep{
			failed(sdkcReply{status: 429, verdict: sdkcBool(false)}, 500)}},
		"dynamodb base backoff and increased retries": {dynamoDB: true, steps: []sdkcStep{
			with(retried(486, 25*ms), r500), with(retried(472, 50*ms), r500),
			with(retried(458, 100*ms), r500), maxed(r500, 458)}},
		"long-polling backoff when token bucket empty": {longPolling: true, tokens: sdkcTokens(0), steps: []sdkcStep{
			refused(r500, 0, 50*ms)}},
		"long-polling backoff after throttling error when token bucket empty": {longPolling: true, tokens: sdkcTokens(0), steps: []sdkcStep{
			refused(throttling, 0, time.Second)}},
		"long-polling max attempts exceeded must not delay": {longPolling: true, maxAttempts: 2, steps: []sdkcStep{
			with(retried(486, 50*ms), r500), maxed(r500, 486)}},
		"long-polling success must not delay": {longPolling: true, maxAttempts: 2, steps: []sdkcStep{
			with(retried(486, 50*ms), r500), succeeded(500)}},
		"long-polling non-retriable errors must not delay": {longPolling: true, maxAttempts: 2, steps: []sdkcStep{
			failed(sdkcReply{status: 404}, sdkcAnyQuota)}},
		"honor x-amz-retry-after header": {randomJitter: true, steps: []sdkcStep{
			with(retried(486, 1500*ms), hinted("1500")), succeeded(500)}},
		"x-amz-retry-after minimum is exponential backoff duration": {steps: []sdkcStep{
			with(retried(486, 50*ms), hinted("0")), succeeded(500)}},
		"x-amz-retry-after maximum is 5+exponential backoff duration": {steps: []sdkcStep{
			with(retried(486, 5050*ms), hinted("10000")), succeeded(500)}},
		"invalid x-amz-retry-after falls back to exponential backoff": {steps: []sdkcStep{
			with(retried(486, 50*ms), hinted("invalid")), succeeded(500)}},
	}
	// derived are not the SDK's cases but follow from its rules: a
	// long-polling operation backs off for the attempt that failed
	// (ExponentialBackoff(attempts - 1) in the retry SEP's pseudocode), also
	// when the bucket empties on a later attempt.
	derived := map[string]sdkcScenario{
		"long-polling backoff when the token bucket empties on the second attempt": {longPolling: true, tokens: sdkcTokens(14), steps: []sdkcStep{
			with(retried(0, 50*ms), r500), refused(r500, 0, 100*ms)}},
	}
	// Every case holds both by default and with FailFastOnEmptyBudget, which
	// restores the SDK's immediate refusal of an empty budget.
	for _, failFast := range []bool{false, true} {
		mode := "default"
		if failFast {
			mode = "FailFastOnEmptyBudget"
		}
		for _, sdkBucket := range []bool{false, true} {
			if sdkBucket {
				mode += "/ratelimit.NewTokenRateLimit"
			}
			t.Run(mode, func(t *testing.T) {
				for name, sc := range cases {
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						sc.sdkBucket = sdkBucket
						sc.play(t, failFast)
					})
				}
				for name, sc := range derived {
					t.Run("derived/"+name, func(t *testing.T) {
						t.Parallel()
						sc.sdkBucket = sdkBucket
						sc.play(t, failFast)
					})
				}
			})
		}
	}

	// By default an empty budget waits the first retry's backoff before it
	// refuses, under every operation; the SDK refuses at once, and backs off
	// only for long polling, after the refusal.
	differences := map[string]struct {
		reason      string
		tokens      uint
		paid        []sdkcReply // retries the bucket pays before the refusal
		reply       sdkcReply   // the error whose retry is refused
		longPolling bool
		backoff     time.Duration // the first retry's backoff for reply
	}{
		"retry quota reached after a single retry": {
			reason: "an empty budget waits one backoff before refusing; FailFastOnEmptyBudget restores the SDK's immediate refusal",
			tokens: 14, paid: []sdkcReply{r500}, reply: r500, backoff: 50 * ms},
		"no retries at all if retry quota is 0": {
			reason: "an empty budget waits one backoff before refusing; FailFastOnEmptyBudget restores the SDK's immediate refusal",
			reply:  r500, backoff: 50 * ms},
		"retry stops after retry quota exhaustion": {
			reason: "an empty budget waits one backoff before refusing; FailFastOnEmptyBudget restores the SDK's immediate refusal",
			tokens: 20, paid: []sdkcReply{r500}, reply: r502, backoff: 50 * ms},
		"long-polling backoff when token bucket empty": {
			reason: "the empty-budget backoff is waited inside GetRetryToken, so the RetryDelay the middleware asks for next is 0: the SDK's total wait, in another place",
			reply:  r500, longPolling: true, backoff: 50 * ms},
	}
	for name, d := range differences {
		t.Run("differences/"+name, func(t *testing.T) {
			t.Parallel()
			for _, failFast := range []bool{false, true} {
				if failFast && d.longPolling {
					continue // the SDK's behaviour there is a case of the table above
				}
				sc := sdkcScenario{tokens: sdkcTokens(d.tokens), longPolling: d.longPolling}
				if failFast {
					// A backoff that no descheduling on a busy machine
					// comes near, so that "at once" is told from a wait
					// by the clock.
					sc.baseDelay = 10 * time.Second
				}
				r, _, _ := sc.build(t, failFast)
				ctx := context.Background()
				for _, p := range d.paid {
					_, err := r.GetRetryToken(ctx, p.err())
					require.NoError(t, err, "expect the retry before the refusal paid, got %v", err)
				}
				opErr := d.reply.err()
				start := time.Now()
				_, err := r.GetRetryToken(ctx, opErr)
				inToken := time.Since(start)
				require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted, "expect the retry quota exceeded, got %v", err)
				if failFast {
					assert.Less(t, inToken, sc.baseDelay/2, "FailFastOnEmptyBudget: expect the refusal at once, got it after %v", inToken)
					continue
				}
				assert.GreaterOrEqual(t, inToken, d.backoff, "expect the refusal after the backoff %v, got it after %v", d.backoff, inToken)
				if d.longPolling {
					backoff, err := r.RetryDelay(1, opErr)
					require.NoError(t, err)
					assert.Equal(t, time.Duration(0), backoff, "expect no second backoff, got %v", backoff)
				}
			}
		})
	}
}

// sdkAndOursWithoutBackoff returns retry.NewStandard() and New(), both
// with a backoff of 0, and the SDK's bucket to read.
func sdkAndOursWithoutBackoff() (*ratelimit.TokenRateLimit, *retry.Standard, *jitterretry.Retryer) {
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = sdkBucket
		o.Backoff = fixedBackoff(0)
	})
	return sdkBucket, sdk, jitterretry.New(func(o *jitterretry.Options) { o.Backoff = fixedBackoff(0) })
}

// TestSDKContract_DifferenceRetryAnsweredByAConflict: a retry of a 5xx whose
// answer is a ConditionalCheckFailedException keeps its cost in the SDK's
// bucket and gets it back in ours: the service answered as a healthy one
// does (see lane.retryRelease and the README's side-by-side).
func TestSDKContract_DifferenceRetryAnsweredByAConflict(t *testing.T) {
	sdkBucket, sdk, ours := sdkAndOursWithoutBackoff()
	for _, r := range []aws.RetryerV2{sdk, ours} {
		attempts, err := operation(context.Background(), r, script(serverErr, conflictErr))
		requireAttempts(t, 2, attempts, err)
		require.Error(t, err)
	}
	assert.Equal(t, uint(486), sdkBucket.Remaining(), "expect the SDK to keep the retry's 14 tokens")
	assert.Equal(t, uint(500), ours.Remaining(), "expect ours to give them back")
}

// TestSDKContract_RetriedConflictAnsweredByAConflictKeepsItsCost: a
// conflict the caller made retryable (retry.AddWithErrorCodes) and
// answered by a conflict again keeps its cost, in ours as in the SDK's
// bucket: refunded, the retries of an item that stays hot never drained
// the bucket, and only the attempt limit bounded them (an outside
// review). A retry of another error answered by a conflict is still
// refunded (above).
func TestSDKContract_RetriedConflictAnsweredByAConflictKeepsItsCost(t *testing.T) {
	sdkBucket, sdk, ours := sdkAndOursWithoutBackoff()
	for _, r := range []aws.Retryer{sdk, ours} {
		retried := retry.AddWithErrorCodes(r, "ConditionalCheckFailedException")
		attempts, err := operation(context.Background(), retried, script(conflictErr, conflictErr, conflictErr))
		requireAttempts(t, 3, attempts, err)
		require.Error(t, err)
	}
	assert.Equal(t, uint(472), sdkBucket.Remaining(), "expect the SDK to keep both retries' 14 tokens")
	assert.Equal(t, uint(472), ours.Remaining(), "expect ours to keep them too")
}

// TestSDKContract_LongPollingContextBackoff: a long-polling operation whose
// budget is empty still backs off after a throttle, with the 1 s throttle
// base. The SDK's middleware learns of long polling from the context, which
// only the SDK can mark, so the test follows its protocol: GetRetryToken
// refused, then RetryDelay, whose delay the middleware sleeps.
func TestSDKContract_LongPollingContextBackoff(t *testing.T) {
	cases := map[string]struct{ failFast bool }{
		"default":               {},
		"FailFastOnEmptyBudget": {failFast: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := jitterretry.New(sdkcJitter(1), func(o *jitterretry.Options) {
				o.MaxAttempts = 3
				o.RateLimiter = jitterretry.NewTokenBucket(0, 0)
				o.FailFastOnEmptyBudget = c.failFast
			})
			require.NoError(t, r.Err())
			throttle := sdkcReply{status: 400, shape: sdkcCodeOnly, code: "Throttling"}.err()
			require.True(t, r.IsErrorRetryable(throttle), "expect a throttle to be retryable")
			start := time.Now()
			_, err := r.GetRetryToken(context.Background(), throttle)
			inToken := time.Since(start)
			require.Error(t, err, "expect the empty bucket to refuse, got a token")
			backoff, err := r.RetryDelay(1, throttle)
			require.NoError(t, err)
			total := inToken + backoff
			assert.GreaterOrEqual(t, total, time.Second, "expect a long-polling backoff of 1s, got %v (%v in GetRetryToken, then RetryDelay %v)", total, inToken, backoff)
			assert.Less(t, total, time.Second+sdkcSlack, "expect a long-polling backoff of 1s, got %v", total)
		})
	}
}

// ---------------------------------------------------------------------------
// standard_test.go

// TestSDKContract_Standard_copyOptions: the retryer keeps its own copies of
// the option lists, and building it changes no SDK global. (The SDK's case
// changes Timeouts, a deprecated field we do not have; Throttles takes its
// place.)
func TestSDKContract_Standard_copyOptions(t *testing.T) {
	yes := retry.IsErrorRetryableFunc(func(error) aws.Ternary { return aws.TrueTernary })
	no := retry.IsErrorRetryableFunc(func(error) aws.Ternary { return aws.FalseTernary })
	throttle := retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.TrueTernary })
	notThrottle := retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.FalseTernary })
	plain := errors.New("expected error")

	cases := map[string]struct {
		build func() (*jitterretry.Retryer, func()) // the retryer, and the caller's later change to its list
		check func(t *testing.T, r *jitterretry.Retryer)
	}{
		"Retryables": {
			build: func() (*jitterretry.Retryer, func()) {
				mine := []retry.IsErrorRetryable{yes}
				return jitterretry.New(func(o *jitterretry.Options) { o.Retryables = mine }), func() { mine[0] = no }
			},
			check: func(t *testing.T, r *jitterretry.Retryer) {
				assert.True(t, r.IsErrorRetryable(plain), "expect the retryer's own copy (retryable), got the caller's change")
			},
		},
		"Throttles": {
			build: func() (*jitterretry.Retryer, func()) {
				mine := []retry.IsErrorThrottle{throttle}
				return jitterretry.New(sdkcJitter(1), func(o *jitterretry.Options) {
					o.Retryables = []retry.IsErrorRetryable{yes}
					o.Throttles = mine
				}), func() { mine[0] = notThrottle }
			},
			check: func(t *testing.T, r *jitterretry.Retryer) {
				d, err := r.RetryDelay(1, plain)
				require.NoError(t, err)
				assert.Equal(t, time.Second, d, "expect the retryer's own copy (a throttle, 1s), got %v", d)
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			retryables := append([]retry.IsErrorRetryable(nil), retry.DefaultRetryables...)
			throttles := append([]retry.IsErrorThrottle(nil), retry.DefaultThrottles...)
			r, change := c.build()
			require.NoError(t, r.Err())
			change()
			c.check(t, r)
			assert.Equal(t, len(retryables), len(retry.DefaultRetryables), "expect no change to retry.DefaultRetryables")
			assert.Equal(t, len(throttles), len(retry.DefaultThrottles), "expect no change to retry.DefaultThrottles")
			for i := range retryables {
				assert.NotNil(t, retry.DefaultRetryables[i], "expect no change to retry.DefaultRetryables[%d]", i)
			}
			for i := range throttles {
				assert.NotNil(t, retry.DefaultThrottles[i], "expect no change to retry.DefaultThrottles[%d]", i)
			}
		})
	}
}

func TestSDKContract_Standard_IsErrorRetryable(t *testing.T) {
	cases := map[string]struct {
		verdict aws.Ternary
		want    bool
	}{
		"is retryable":      {verdict: aws.TrueTernary, want: true},
		"is not retryable":  {verdict: aws.FalseTernary, want: false},
		"unknown retryable": {verdict: aws.UnknownTernary, want: false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			opErr := fmt.Errorf("expected error")
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					assert.Same(t, opErr, err, "expect the check to see the operation's error %v, got %v", opErr, err)
					return c.verdict
				})}
			})
			got := r.IsErrorRetryable(opErr)
			assert.Equal(t, c.want, got, "expect retryable %t, got %t", c.want, got)
		})
	}
}

func TestSDKContract_Standard_MaxAttempts(t *testing.T) {
	cases := map[string]struct {
		max  int // 0: leave the default
		want int
	}{
		"defaults": {want: 3},
		"custom":   {max: 10, want: 10},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			seen := 0
			r := jitterretry.New(func(o *jitterretry.Options) {
				seen = o.MaxAttempts
				if c.max != 0 {
					o.MaxAttempts = c.max
				}
			})
			require.NoError(t, r.Err())
			assert.Equal(t, 3, seen, "expect the option function to see the default 3, got %d", seen)
			assert.Equal(t, c.want, r.MaxAttempts(), "expect %d max attempts, got %d", c.want, r.MaxAttempts())
		})
	}

	differences := map[string]struct {
		reason string
		max    int
	}{
		"zero":     {reason: "0 is ambiguous (one attempt? no limit?): an *OptionsError, where the SDK silently uses 3", max: 0},
		"negative": {reason: "a negative count other than UnlimitedAttempts is a mistake: an *OptionsError, where the SDK silently uses 3", max: -5},
	}
	for name, d := range differences {
		t.Run("differences/"+name, func(t *testing.T) {
			sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = d.max })
			assert.Equal(t, 3, sdk.MaxAttempts(), "the SDK: expect 3 max attempts, got %d", sdk.MaxAttempts())

			r := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = d.max })
			var oe *jitterretry.OptionsError
			require.ErrorAs(t, r.Err(), &oe, "expect an *OptionsError, got %v", r.Err())
			assert.Equal(t, "MaxAttempts", oe.Option, "expect the option MaxAttempts named, got %q", oe.Option)
			assert.Equal(t, 1, r.MaxAttempts(), "expect 1 max attempt for an unusable retryer, got %d", r.MaxAttempts())
			attempts, _, err := sdkcRun(context.Background(), r, nil, func(int, any) (smithymw.Metadata, error) { return smithymw.Metadata{}, nil })
			assert.ErrorAs(t, err, &oe, "expect every operation to fail with the *OptionsError, got %v", err)
			assert.Equal(t, 0, attempts, "expect no attempt sent, got %d", attempts)
		})
	}
}

// TestSDKContract_DifferenceNilOptions: an option the retryer calls through
// that holds nil (a nil entry of Retryables, a nil pointer as RateLimiter or
// Backoff, of the SDK's own types) is accepted by the SDK, which then panics
// at the first error; ours refuses it at New with an *OptionsError naming the
// field. (This module's types answer on a nil pointer as their zero values;
// New refuses those too: TestInvalidOptionsFailEveryCallWithoutPanic.)
func TestSDKContract_DifferenceNilOptions(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	cases := map[string]struct {
		sdk    func(*retry.StandardOptions)
		ours   func(*jitterretry.Options)
		option string
	}{
		"nil retryable": {
			sdk:    func(o *retry.StandardOptions) { o.Retryables = []retry.IsErrorRetryable{nil} },
			ours:   func(o *jitterretry.Options) { o.Retryables = []retry.IsErrorRetryable{nil} },
			option: "Retryables[0]",
		},
		"nil pointer as RateLimiter": {
			sdk:    func(o *retry.StandardOptions) { o.RateLimiter = (*ratelimit.TokenRateLimit)(nil) },
			ours:   func(o *jitterretry.Options) { o.RateLimiter = (*ratelimit.TokenRateLimit)(nil) },
			option: "RateLimiter",
		},
		"nil pointer as Backoff": {
			sdk:    func(o *retry.StandardOptions) { o.Backoff = (*retry.ExponentialJitterBackoff)(nil) },
			ours:   func(o *jitterretry.Options) { o.Backoff = (*retry.ExponentialJitterBackoff)(nil) },
			option: "Backoff",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sdk := retry.NewStandard(c.sdk)
			assert.Panics(t, func() {
				if sdk.IsErrorRetryable(throttle) {
					if _, err := sdk.GetRetryToken(context.Background(), throttle); err == nil {
						_, _ = sdk.RetryDelay(1, throttle)
					}
				}
			}, "the SDK: expect a panic at the first error")

			r := jitterretry.New(c.ours)
			var oe *jitterretry.OptionsError
			require.ErrorAs(t, r.Err(), &oe, "expect an *OptionsError, got %v", r.Err())
			assert.Equal(t, c.option, oe.Option)
			assert.NotPanics(t, func() {
				assert.False(t, r.IsErrorRetryable(throttle))
				_, err := r.GetRetryToken(context.Background(), throttle)
				assert.ErrorAs(t, err, &oe)
				_, err = r.RetryDelay(1, throttle)
				assert.ErrorAs(t, err, &oe)
			})
		})
	}
}

// TestSDKContract_DifferenceOptionLists: the SDK's Retryables and Throttles
// start as its default lists, a list set in their place replaces them, and
// checks appended to them come after them; ours start empty, are consulted
// before the built-in rules, which always apply after them. Each case
// asserts both sides (the README's side-by-side, helper-60's review).
func TestSDKContract_DifferenceOptionLists(t *testing.T) {
	myCode := retry.RetryableErrorCode{Codes: map[string]struct{}{"MyCode": {}}}
	no503 := retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
		var status interface{ HTTPStatusCode() int }
		if errors.As(err, &status) && status.HTTPStatusCode() == 503 {
			return aws.FalseTernary
		}
		return aws.UnknownTernary
	})
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	unavailable := sdkcReply{status: 503, shape: sdkcBare}.err()
	t.Run("a list set in place of the defaults", func(t *testing.T) {
		sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Retryables = []retry.IsErrorRetryable{myCode} })
		ours := jitterretry.New(func(o *jitterretry.Options) { o.Retryables = []retry.IsErrorRetryable{myCode} })
		assert.False(t, sdk.IsErrorRetryable(unavailable), "the SDK: expect its defaults gone")
		assert.True(t, ours.IsErrorRetryable(unavailable), "expect the built-in rules still to retry a 503")
		assert.True(t, sdk.IsErrorRetryable(&sdkcCoded{code: "MyCode"}))
		assert.True(t, ours.IsErrorRetryable(&sdkcCoded{code: "MyCode"}))
	})
	t.Run("an appended check that refuses a 503", func(t *testing.T) {
		sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Retryables = append(o.Retryables, no503) })
		ours := jitterretry.New(func(o *jitterretry.Options) { o.Retryables = append(o.Retryables, no503) })
		assert.True(t, sdk.IsErrorRetryable(unavailable), "the SDK: expect its defaults to answer first")
		assert.False(t, ours.IsErrorRetryable(unavailable), "expect the caller's check to answer first")
	})
	t.Run("Throttles set to nil", func(t *testing.T) {
		sdkBucket := ratelimit.NewTokenRateLimit(500)
		sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Throttles = nil; o.RateLimiter = sdkBucket })
		ours := jitterretry.New(func(o *jitterretry.Options) { o.Throttles = nil })
		_, err := sdk.GetRetryToken(context.Background(), throttle)
		require.NoError(t, err)
		_, err = ours.GetRetryToken(context.Background(), throttle)
		require.NoError(t, err)
		assert.Equal(t, uint(486), sdkBucket.Remaining(), "the SDK: expect no throttle left, 14 tokens")
		assert.Equal(t, uint(495), ours.Remaining(), "expect the built-in throttle rules, 5 tokens")
	})
	t.Run("an option function that edits the default list in place", func(t *testing.T) {
		edit := func(list []retry.IsErrorRetryable) { list[0] = retry.NoRetryCanceledError{} }
		assert.NotPanics(t, func() { retry.NewStandard(func(o *retry.StandardOptions) { edit(o.Retryables) }) })
		assert.Panics(t, func() { jitterretry.New(func(o *jitterretry.Options) { edit(o.Retryables) }) },
			"expect the caller's function to index an empty list")
	})
}

// TestSDKContract_DifferenceBackoffError: a Backoff that fails makes the
// middleware return its error without the retry: the SDK keeps the retry's
// tokens (no release ever comes), ours gives them back.
func TestSDKContract_DifferenceBackoffError(t *testing.T) {
	failing := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, errors.New("no delay") })
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = failing; o.RateLimiter = sdkBucket })
	ours := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = failing })
	for _, r := range []aws.RetryerV2{sdk, ours} {
		attempts, err := operation(context.Background(), r, script(serverErr, ok))
		requireAttempts(t, 1, attempts, err)
		require.ErrorContains(t, err, "no delay")
	}
	assert.Equal(t, uint(486), sdkBucket.Remaining(), "the SDK: expect the retry's 14 tokens kept")
	assert.Equal(t, uint(500), ours.Remaining(), "expect them given back")
}

// TestSDKContract_DifferenceIncrementOutsideTheMiddleware: a loop of the
// caller's own, without the SDK middleware's context: the SDK adds
// NoRetryIncrement on every successful attempt (it reads the attempt's
// number from its middleware's context, so every attempt is a first one);
// ours counts a successful retry in the bucket and adds nothing for the
// next successful attempt, the one the middleware releases right after it.
func TestSDKContract_DifferenceIncrementOutsideTheMiddleware(t *testing.T) {
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = sdkBucket })
	ours := jitterretry.New()
	for _, r := range []aws.RetryerV2{sdk, ours} {
		release, err := r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(serverErr()))
		retryRelease, err := r.GetRetryToken(context.Background(), serverErr())
		require.NoError(t, err)
		require.NoError(t, retryRelease(nil)) // refunds the 14
		release, err = r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	assert.Equal(t, uint(500), sdkBucket.Remaining(), "the SDK: expect the refund and +1, capped at 500")
	assert.Equal(t, uint(500), ours.Remaining())
	// Below the cap the +1 shows: take some tokens from both first.
	sdkBucket = ratelimit.NewTokenRateLimit(500)
	sdk = retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = sdkBucket })
	ours = jitterretry.New()
	for _, r := range []aws.RetryerV2{sdk, ours} {
		_, err := r.GetRetryToken(context.Background(), serverErr()) // 14 never released
		require.NoError(t, err)
		retryRelease, err := r.GetRetryToken(context.Background(), serverErr())
		require.NoError(t, err)
		require.NoError(t, retryRelease(nil))
		release, err := r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	assert.Equal(t, uint(487), sdkBucket.Remaining(), "the SDK: expect +1 for the attempt")
	assert.Equal(t, uint(486), ours.Remaining(), "expect nothing for the attempt after a successful retry")
}

// TestSDKContract_DifferenceIncrementUnderAWrapperThatRetriesFree: the
// same difference under the middleware, reached as the SDK's
// TestStandard_GetAttemptToken_retryAttemptNoIncrement reaches it (an
// attempt numbered 2 with no retry token released before it): a wrapper
// whose GetRetryToken hands the middleware a release of its own, without
// asking the retryer, retries for free. The SDK reads the attempt's number
// from its middleware's context, which only its package can, and adds
// nothing for the retry's success; ours never saw the retry, takes its
// success for a first attempt's, and adds NoRetryIncrement (helper-247).
func TestSDKContract_DifferenceIncrementUnderAWrapperThatRetriesFree(t *testing.T) {
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	sdk := retry.NewStandard(func(o *retry.StandardOptions) {
		o.RateLimiter = sdkBucket
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
	ourBucket := jitterretry.NewTokenBucket(500, 0)
	ours := jitterretry.New(sdkcQuick, func(o *jitterretry.Options) { o.RateLimiter = ourBucket })
	for _, take := range []func(context.Context, uint) (func() error, error){sdkBucket.GetToken, ourBucket.GetToken} {
		_, err := take(context.Background(), 10) // below the cap, so that an increment shows
		require.NoError(t, err)
	}
	for _, r := range []aws.RetryerV2{sdk, ours} {
		attempts, err := operation(context.Background(), freeRetries{r}, script(serverErr, ok))
		requireAttempts(t, 2, attempts, err)
		require.NoError(t, err)
	}
	assert.Equal(t, uint(490), sdkBucket.Remaining(), "the SDK: expect nothing added for the retry's success")
	assert.Equal(t, uint(491), ourBucket.Remaining(), "expect the retry's success taken for a first attempt's")
}

// freeRetries retries without asking the retryer it wraps for a token.
type freeRetries struct{ aws.RetryerV2 }

func (freeRetries) GetRetryToken(context.Context, error) (func(error) error, error) {
	return func(error) error { return nil }, nil
}

// TestSDKContract_DifferenceCanceledAnywhere: an error whose chain holds a
// context.Canceled is not retried, whatever else it holds; the SDK retries
// it when a 5xx or a send error is in it too.
func TestSDKContract_DifferenceCanceledAnywhere(t *testing.T) {
	unavailable := sdkcReply{status: 503, shape: sdkcBare}.err()
	for name, err := range map[string]error{
		"in a send error":    &smithyhttp.RequestSendError{Err: context.Canceled},
		"joined with a 503":  errors.Join(context.Canceled, unavailable),
		"wrapped with a 503": fmt.Errorf("%w, then %w", unavailable, context.Canceled),
		// The S3 client's errors have an As method, for which the
		// retryer asks the SDK's checks: a cancel in them is asked first.
		"in an S3 client's send error":   &sdkcPosing{&smithyhttp.RequestSendError{Err: context.Canceled}},
		"joined with an S3 client's 503": errors.Join(context.Canceled, &sdkcPosing{unavailable}),
		"in an S3 client's wrapped 503":  &sdkcPosing{fmt.Errorf("%w, then %w", unavailable, context.Canceled)},
	} {
		t.Run(name, func(t *testing.T) {
			assert.True(t, retry.NewStandard().IsErrorRetryable(err), "the SDK: expect a retry")
			assert.False(t, jitterretry.New().IsErrorRetryable(err), "expect no retry")
		})
	}
}

// sdkcPosing is an error with an As method of its own, as the S3 client's
// response errors have (s3shared.ResponseError poses as the SDK's
// response error types).
type sdkcPosing struct{ err error }

func (e *sdkcPosing) Error() string      { return e.err.Error() }
func (e *sdkcPosing) Unwrap() error      { return e.err }
func (e *sdkcPosing) As(target any) bool { return errors.As(e.err, target) }

// TestSDKContract_ConflictCodesOnA5xxAreRetried: DynamoDB answers its
// conflicts with a 400, which neither retryer retries; a conflict's code on
// a 5xx, or beside a connection failure, is retried as the SDK retries it
// (helper-149: a ConditionalCheckFailedException on a 503 got 3 attempts
// from the SDK's retryer and 1 from ours, which took the code first).
func TestSDKContract_ConflictCodesOnA5xxAreRetried(t *testing.T) {
	reset := &smithyhttp.RequestSendError{Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}
	for name, c := range map[string]struct {
		err   error
		retry bool
	}{
		"ConditionalCheckFailed on a 400":    {sdkcReply{status: 400, shape: sdkcModeled, code: "ConditionalCheckFailedException"}.err(), false},
		"ConditionalCheckFailed on a 503":    {sdkcReply{status: 503, shape: sdkcModeled, code: "ConditionalCheckFailedException"}.err(), true},
		"TransactionConflict on a 500":       {sdkcReply{status: 500, shape: sdkcGeneric, code: "TransactionConflictException"}.err(), true},
		"ConditionalCheckFailed and a reset": {errors.Join(sdkcReply{status: 400, shape: sdkcModeled, code: "ConditionalCheckFailedException"}.err(), reset), true},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, c.retry, retry.NewStandard().IsErrorRetryable(c.err), "the SDK")
			assert.Equal(t, c.retry, jitterretry.New().IsErrorRetryable(c.err))
			want := jitterretry.ClassNotRetryable
			if c.retry {
				want = jitterretry.ClassTransient
			} else {
				want = jitterretry.ClassConflict
			}
			assert.Equal(t, want, jitterretry.Classify(c.err), "Do retries the 400 as a conflict, the rest as transient")
		})
	}
}

// TestSDKContract_DifferenceResetBehindAQuietWrapper: a connection reset
// whose wrapper's message does not quote it is retried; the SDK searches
// the message only (helper-149). A reset is a reset whatever wraps it; the
// SDK's own send errors quote it, and both retry those. So is a refused
// connection under a *url.Error (helper-250), where nothing was sent.
func TestSDKContract_DifferenceResetBehindAQuietWrapper(t *testing.T) {
	for name, err := range map[string]error{
		"ECONNRESET":    &sdkcQuiet{os.NewSyscallError("read", syscall.ECONNRESET)},
		"net.ErrClosed": &sdkcQuiet{net.ErrClosed},
		"ECONNREFUSED under a *url.Error": &url.Error{Op: "Post", URL: "https://dynamodb.us-east-1.amazonaws.com/",
			Err: &sdkcQuiet{os.NewSyscallError("connect", syscall.ECONNREFUSED)}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.False(t, retry.NewStandard().IsErrorRetryable(err), "the SDK: expect no retry")
			assert.True(t, jitterretry.New().IsErrorRetryable(err), "expect a retry")
		})
	}
}

// sdkcQuiet wraps an error without quoting it.
type sdkcQuiet struct{ err error }

func (e *sdkcQuiet) Error() string { return "request failed" }
func (e *sdkcQuiet) Unwrap() error { return e.err }

// TestSDKContract_DifferenceZeroOptions: option values the SDK reads as
// something else are an *OptionsError here (option functions see the
// defaults filled in, so a zero was set, and says nothing clear), and -1
// attempts is unlimited.
func TestSDKContract_DifferenceZeroOptions(t *testing.T) {
	sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.BaseDelay = 0 })
	for range 20 {
		d, err := sdk.RetryDelay(1, serverErr())
		require.NoError(t, err)
		assert.LessOrEqual(t, d, 50*time.Millisecond, "the SDK: expect BaseDelay 0 to mean 50 ms")
	}
	sdk = retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 0 })
	d, err := sdk.RetryDelay(3, serverErr())
	require.NoError(t, err)
	assert.Zero(t, d, "the SDK: expect MaxBackoff 0 to mean no backoff")
	for _, n := range []int{0, -1, -5} {
		assert.Equal(t, 3, retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = n }).MaxAttempts(), "the SDK: expect MaxAttempts %d to mean 3", n)
	}
	assert.NotPanics(t, func() { retry.NewStandard(func(o *retry.StandardOptions) { o.ThrottlingRetryCost = 501 }) })

	for name, c := range map[string]struct {
		set    func(*jitterretry.Options)
		option string
	}{
		"MaxAttempts 0":                    {func(o *jitterretry.Options) { o.MaxAttempts = 0 }, "MaxAttempts"},
		"MaxAttempts -5":                   {func(o *jitterretry.Options) { o.MaxAttempts = -5 }, "MaxAttempts"},
		"BaseDelay 0":                      {func(o *jitterretry.Options) { o.BaseDelay = 0 }, "BaseDelay"},
		"MaxBackoff 0":                     {func(o *jitterretry.Options) { o.MaxBackoff = 0 }, "MaxBackoff"},
		"ThrottlingRetryCost above bucket": {func(o *jitterretry.Options) { o.ThrottlingRetryCost = 501 }, "ThrottlingRetryCost"},
	} {
		t.Run(name, func(t *testing.T) {
			var oe *jitterretry.OptionsError
			require.ErrorAs(t, jitterretry.New(c.set).Err(), &oe)
			assert.Equal(t, c.option, oe.Option)
		})
	}
	unlimited := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = -1 })
	require.NoError(t, unlimited.Err())
	assert.Equal(t, 0, unlimited.MaxAttempts(), "expect -1 to be UnlimitedAttempts (0 to the middleware)")
}

func TestSDKContract_Standard_RetryDelay(t *testing.T) {
	cases := map[string]struct {
		backoff   retry.BackoffDelayerFunc
		wantDelay time.Duration
		wantErr   string
	}{
		"success": {
			backoff:   func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil },
			wantDelay: 10 * time.Millisecond,
		},
		"error": {
			backoff: func(int, error) (time.Duration, error) { return 0, fmt.Errorf("failed get delay") },
			wantErr: "failed get delay",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			opErr := fmt.Errorf("expected error")
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
					assert.Same(t, opErr, err, "expect the backoff to see %v, got %v", opErr, err)
					assert.Equal(t, 2, attempt, "expect attempt 2, got %d", attempt)
					return c.backoff(attempt, err)
				})
			})
			d, err := r.RetryDelay(2, opErr)
			if c.wantErr != "" {
				require.Error(t, err, "expect error %q, got none", c.wantErr)
				assert.Equal(t, c.wantErr, err.Error(), "expect error %q, got %q", c.wantErr, err.Error())
			} else {
				require.NoError(t, err, "expect no error, got %v", err)
			}
			assert.Equal(t, c.wantDelay, d, "expect delay %v, got %v", c.wantDelay, d)
		})
	}
}

// sdkcBuckets are the buckets of 500 tokens a port runs with: the
// retryer's own, and the SDK's ratelimit.NewTokenRateLimit(500), which the
// SDK's tests give retry.NewStandard.
func sdkcBuckets() map[string]func(o *jitterretry.Options) {
	return map[string]func(o *jitterretry.Options){
		"own bucket":                       func(*jitterretry.Options) {},
		"ratelimit.NewTokenRateLimit(500)": func(o *jitterretry.Options) { o.RateLimiter = ratelimit.NewTokenRateLimit(500) },
	}
}

// TestSDKContract_Standard_retryEventuallySucceeds: the default backoff with
// the jitter fixed at half the window, and the bucket through two retried
// operations and a first-attempt success, with each bucket.
func TestSDKContract_Standard_retryEventuallySucceeds(t *testing.T) {
	for name, bucket := range sdkcBuckets() {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(sdkcJitter(0.5), bucket, func(o *jitterretry.Options) { o.MaxAttempts = 3 })
			require.NoError(t, r.Err())
			retryEventuallySucceeds(t, r)
		})
	}
}

func retryEventuallySucceeds(t *testing.T, r *jitterretry.Retryer) {
	status500 := sdkcReply{status: 500}
	steps := []struct {
		attempt   int
		opErr     error
		retryable bool
		quota     uint
		delay     time.Duration
	}{
		{attempt: 1, opErr: status500.err(), retryable: true, quota: 486, delay: 25 * time.Millisecond},
		{attempt: 2, opErr: status500.err(), retryable: true, quota: 472, delay: 50 * time.Millisecond},
		{attempt: 3, quota: 486}, // the retry's 14 back, no increment for a retry
		{attempt: 1, opErr: status500.err(), retryable: true, quota: 472, delay: 25 * time.Millisecond},
		{attempt: 2, opErr: sdkcTimeout(true), retryable: true, quota: 458, delay: 50 * time.Millisecond}, // a timeout costs 14 too
		{attempt: 3, quota: 472},
		{attempt: 1, quota: 473}, // +1 for a first-attempt success
	}
	ctx := context.Background()
	releaseRetry := func(error) error { return nil }
	for i, st := range steps {
		t.Run(itoa(i+1), func(t *testing.T) {
			releaseAttempt, err := r.GetAttemptToken(ctx)
			require.NoError(t, err)
			require.NoError(t, releaseRetry(st.opErr))
			require.NoError(t, releaseAttempt(st.opErr))
			releaseRetry = func(error) error { return nil }
			if st.opErr != nil {
				retryable := r.IsErrorRetryable(st.opErr)
				assert.Equal(t, st.retryable, retryable, "expect retryable %t, got %t", st.retryable, retryable)
				if retryable {
					releaseRetry, err = r.GetRetryToken(ctx, st.opErr)
					require.NoError(t, err, "expect a retry token, got %v", err)
				}
				d, err := r.RetryDelay(st.attempt, st.opErr)
				require.NoError(t, err)
				assert.Equal(t, st.delay, d, "expect delay %v, got %v", st.delay, d)
			}
			assert.Equal(t, st.quota, r.Remaining(), "expect %d tokens left, got %d", st.quota, r.Remaining())
		})
	}
}

func TestSDKContract_Standard_defaultRetryQuota(t *testing.T) {
	r := jitterretry.New()
	opErr := fmt.Errorf("generic error")
	granted := 0
	for range 1000 {
		_, err := r.GetRetryToken(context.Background(), opErr)
		if err != nil {
			var quota ratelimit.QuotaExceededError
			require.ErrorAs(t, err, &quota, "expect a QuotaExceededError, got %v", err)
			break
		}
		granted++
	}
	assert.Equal(t, 35, granted, "expect 35 retries from 500 tokens at 14, got %d", granted)
}

func TestSDKContract_Standard_defaultRetryCosts(t *testing.T) {
	cases := map[string]struct {
		opErr error
		cost  uint
	}{
		"generic":   {opErr: fmt.Errorf("generic error"), cost: 14},
		"timeout":   {opErr: sdkcTimeout(true), cost: 14},
		"5xx":       {opErr: sdkcReply{status: 500}.err(), cost: 14},
		"429":       {opErr: sdkcReply{status: 429}.err(), cost: 5},
		"throttle":  {opErr: &sdkcCoded{code: "ThrottlingException"}, cost: 5},
		"throttle2": {opErr: &sdkcCoded{code: "SlowDown"}, cost: 5},
	}
	for name, c := range cases {
		for bucketName, bucket := range sdkcBuckets() {
			t.Run(name+"/"+bucketName, func(t *testing.T) {
				r := jitterretry.New(bucket)
				release, err := r.GetRetryToken(context.Background(), c.opErr)
				require.NoError(t, err, "expect a retry token, got %v", err)
				assert.Equal(t, 500-c.cost, r.Remaining(), "expect %d tokens left, got %d", 500-c.cost, r.Remaining())
				require.NoError(t, release(nil))
				assert.Equal(t, uint(500), r.Remaining(), "expect the cost refunded, 500 tokens, got %d", r.Remaining())
			})
		}
	}
}

// TestSDKContract_Standard_GetAttemptToken_retryAttemptNoIncrement: only a
// first attempt's success adds NoRetryIncrement. The SDK's test marks the
// attempt number in the context, which only its package can; here the
// middleware runs the attempts, from a bucket drained to 490.
func TestSDKContract_Standard_GetAttemptToken_retryAttemptNoIncrement(t *testing.T) {
	cases := map[string]struct {
		answers []func() error
		want    uint
	}{
		"a retry's success adds nothing":               {answers: []func() error{serverErr, ok}, want: 490},
		"a first attempt's success adds the increment": {answers: []func() error{ok}, want: 491},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			bucket := jitterretry.NewTokenBucket(500, 0)
			_, err := bucket.GetToken(context.Background(), 10)
			require.NoError(t, err)
			r := jitterretry.New(sdkcQuick, func(o *jitterretry.Options) { o.RateLimiter = bucket })
			_, err = operation(context.Background(), r, script(c.answers...))
			require.NoError(t, err)
			assert.Equal(t, c.want, bucket.Remaining(), "expect %d tokens left, got %d", c.want, bucket.Remaining())
		})
	}
}

// ---------------------------------------------------------------------------
// middleware_test.go

func TestSDKContract_AttemptMiddleware(t *testing.T) {
	flag := sdkcRetryableFlag(true)
	someErr := fmt.Errorf("some error")
	raw := func(n int, err error) smithymw.Metadata {
		if err != nil {
			return smithymw.Metadata{}
		}
		return sdkcMeta("raw", "mockResponse")
	}
	headers := func(n int) []string {
		var h []string
		for i := 1; i <= n; i++ {
			h = append(h, fmt.Sprintf("attempt=%d; max=3", i))
		}
		return h
	}
	cases := map[string]struct {
		request     any     // nil: a *smithyhttp.Request
		answers     []error // by attempt; nil is a success
		meta        func(n int, err error) smithymw.Metadata
		wantErr     string
		wantHeaders []string // the Amz-Sdk-Request header of each attempt: its number and MaxAttempts
		wantResults []retry.AttemptResult
	}{
		"no error, no response in a single attempt": {
			answers:     []error{nil},
			wantHeaders: headers(1),
			wantResults: []retry.AttemptResult{{}},
		},
		"no error in a single attempt": {
			answers:     []error{nil},
			meta:        raw,
			wantHeaders: headers(1),
			wantResults: []retry.AttemptResult{{ResponseMetadata: sdkcMeta("raw", "mockResponse")}},
		},
		"retries errors": {
			answers:     []error{flag, flag, nil},
			wantHeaders: headers(3),
			wantResults: []retry.AttemptResult{
				{Err: flag, Retryable: true, Retried: true},
				{Err: flag, Retryable: true, Retried: true},
				{},
			},
		},
		"stops after max attempts": {
			answers:     []error{flag, flag, flag},
			wantErr:     "exceeded maximum number of attempts",
			wantHeaders: headers(3),
			wantResults: []retry.AttemptResult{
				{Err: flag, Retryable: true, Retried: true},
				{Err: flag, Retryable: true, Retried: true},
				{Err: &retry.MaxAttemptsError{Attempt: 3, Err: flag}, Retryable: true},
			},
		},
		"stops on rewind error": {
			request: sdkcNoRewind{},
			answers: []error{flag},
			wantErr: "failed to rewind transport stream for retry",
			wantResults: []retry.AttemptResult{
				{Err: flag, Retryable: true, Retried: true},
				{Err: fmt.Errorf("failed to rewind transport stream for retry, %w", sdkcErrRewind)},
			},
		},
		"stops on non-retryable errors": {
			answers:     []error{someErr},
			wantErr:     "some error",
			wantHeaders: headers(1),
			wantResults: []retry.AttemptResult{{Err: someErr}},
		},
		"nested metadata and valid response": {
			answers: []error{flag, nil},
			meta: func(n int, err error) smithymw.Metadata {
				if err != nil {
					return sdkcMeta("testKey", "testValue")
				}
				return sdkcMeta("raw", "mockResponse")
			},
			wantHeaders: headers(2),
			wantResults: []retry.AttemptResult{
				{Err: flag, Retryable: true, Retried: true, ResponseMetadata: sdkcMeta("testKey", "testValue")},
				{ResponseMetadata: sdkcMeta("raw", "mockResponse")},
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(sdkcQuick, func(o *jitterretry.Options) { o.MaxAttempts = 3 })
			var gotHeaders []string
			attempts, md, err := sdkcRun(context.Background(), r, c.request, func(n int, req any) (smithymw.Metadata, error) {
				if hr, isHTTP := req.(*smithyhttp.Request); isHTTP {
					gotHeaders = append(gotHeaders, hr.Header.Get("Amz-Sdk-Request"))
				}
				if n > len(c.answers) {
					return smithymw.Metadata{}, fmt.Errorf("more attempts than expected")
				}
				ansErr := c.answers[n-1]
				if c.meta != nil {
					return c.meta(n, ansErr), ansErr
				}
				return smithymw.Metadata{}, ansErr
			})
			if c.wantErr == "" {
				assert.NoError(t, err, "expect no error, got %v", err)
			} else {
				require.Error(t, err, "expect error %q, got none", c.wantErr)
				assert.Contains(t, err.Error(), c.wantErr, "expect error %q, got %q", c.wantErr, err.Error())
			}
			assert.Equal(t, c.wantHeaders, gotHeaders, "expect attempt headers %q, got %q (after %d attempts)", c.wantHeaders, gotHeaders, attempts)
			results, found := retry.GetAttemptResults(md)
			require.True(t, found, "expect attempt results in the metadata, got none")
			assert.Equal(t, c.wantResults, results.Results, "expect results %v, got %v", c.wantResults, results.Results)
			for i, res := range results.Results {
				_, nested := retry.GetAttemptResults(res.ResponseMetadata)
				assert.False(t, nested, "expect no attempt results inside attempt %d's metadata, got some", i)
			}
		})
	}
}

// TestSDKContract_MetricsHeaderMiddleware: the Amz-Sdk-Request header the
// attempt middleware sets (in v1.48.0 itself, where the SDK's test drives
// the deprecated MetricsHeader middleware with its package's own attempt
// metadata): the attempt's number, the retryer's MaxAttempts, and, with a
// deadline and a clock skew, the deadline on the server's clock. The
// SDK's other two cases (attempt 0, a request of an unknown transport)
// test that middleware alone and never reach a retryer.
func TestSDKContract_MetricsHeaderMiddleware(t *testing.T) {
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	cases := map[string]struct {
		skew     time.Duration
		deadline bool
		want     string
	}{
		"no deadline":           {skew: time.Second, want: "attempt=1; max=5"},
		"a deadline, no skew":   {deadline: true, want: "attempt=1; max=5"},
		"a deadline and a skew": {skew: time.Second, deadline: true, want: "attempt=1; max=5; ttl=" + deadline.Add(time.Second).UTC().Format("20060102T150405Z")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = 5 })
			ctx := context.Background()
			if c.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
			skew := &atomic.Int64{}
			skew.Store(int64(c.skew))
			m := retry.NewAttemptMiddleware(r, func(in any) any { return in }, func(a *retry.Attempt) { a.ClientSkew = skew })
			var header string
			next := smithymw.FinalizeHandlerFunc(func(_ context.Context, in smithymw.FinalizeInput) (smithymw.FinalizeOutput, smithymw.Metadata, error) {
				header = in.Request.(*smithyhttp.Request).Header.Get("Amz-Sdk-Request")
				return smithymw.FinalizeOutput{}, smithymw.Metadata{}, nil
			})
			in := smithymw.FinalizeInput{Request: &smithyhttp.Request{Request: &http.Request{Header: http.Header{}}}}
			_, _, err := m.HandleFinalize(ctx, in, next)
			require.NoError(t, err)
			assert.Equal(t, c.want, header)
		})
	}
}

// TestSDKContract_AttemptReleaseRetryLock: a retry that succeeds gives its
// whole cost back, so a bucket of exactly one retry pays the next one. Run
// with each kind of bucket the retryer can have.
func TestSDKContract_AttemptReleaseRetryLock(t *testing.T) {
	buckets := map[string]func(o *jitterretry.Options){
		"own bucket":                  func(o *jitterretry.Options) { o.BucketCapacity = 10 },
		"jitterretry.NewTokenBucket":  func(o *jitterretry.Options) { o.RateLimiter = jitterretry.NewTokenBucket(10, 0) },
		"ratelimit.NewTokenRateLimit": func(o *jitterretry.Options) { o.RateLimiter = ratelimit.NewTokenRateLimit(10) },
	}
	for name, bucket := range buckets {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(sdkcQuick, bucket, func(o *jitterretry.Options) { o.MaxAttempts, o.RetryCost = 3, 10 })
			require.NoError(t, r.Err())
			_, err := operation(context.Background(), r, script(fail(sdkcRetryableFlag(true)), ok))
			require.NoError(t, err, "expect the retried operation to succeed, got %v", err)
			_, err = r.GetRetryToken(context.Background(), errors.New("retryme"))
			assert.NoError(t, err, "expect the refunded tokens to pay another retry, got %v", err)
		})
	}
}

func TestSDKContract_ClockSkew(t *testing.T) {
	cases := map[string]struct {
		clientSkew time.Duration
		observed   time.Duration
		opErr      error
		disabled   bool
		retried    bool
	}{
		"no skew and any error no retry":                           {opErr: fmt.Errorf("any error")},
		"no skew wrong error code no retry":                        {opErr: &sdkcCoded{code: "any"}},
		"skewed retryable error code does retry":                   {observed: 5 * time.Minute, opErr: &sdkcCoded{code: "SignatureDoesNotMatch"}, retried: true},
		"low skew retryable error code no retry":                   {observed: 3 * time.Minute, opErr: &sdkcCoded{code: "SignatureDoesNotMatch"}},
		"stale offset retries when candidate diverges from server": {clientSkew: 5 * time.Minute, opErr: &sdkcCoded{code: "SignatureDoesNotMatch"}, retried: true},
		"matching offset does not retry":                           {clientSkew: 5 * time.Minute, observed: 5 * time.Minute, opErr: &sdkcCoded{code: "SignatureDoesNotMatch"}},
		"disabled does not retry skew error":                       {observed: 5 * time.Minute, opErr: &sdkcCoded{code: "SignatureDoesNotMatch"}, disabled: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := sdkcSkewRetried(t, c.opErr, true, c.observed, c.clientSkew, c.disabled)
			assert.Equal(t, c.retried, got, "expect retried %t, got %t", c.retried, got)
		})
	}
}

func TestSDKContract_RetryDelayAttemptValue(t *testing.T) {
	var recorded []int
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MaxAttempts = 4
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			recorded = append(recorded, attempt)
			return 0, nil
		})
	})
	flag := fail(sdkcRetryableFlag(true))
	_, err := operation(context.Background(), r, script(flag, flag, flag, ok))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3}, recorded, "expect RetryDelay given the failed attempts 1, 2, 3, got %v", recorded)
}

// TestSDKContract_AttemptMiddleware_adaptiveMode ports the retry-quota part
// of the SDK's adaptive-mode middleware test, which is standard-mode
// accounting: only the last retry's tokens come back, and only a
// first-attempt success adds the increment. Its rate-limiter updates are
// adaptive mode's own.
func TestSDKContract_AttemptMiddleware_adaptiveMode(t *testing.T) {
	throttling := func() error { return sdkcReply{status: 400, shape: sdkcCodeOnly, code: "Throttling"}.err() }
	cases := map[string]struct {
		drain   uint
		answers []func() error
		want    uint
	}{
		"throttle, throttle, success": {answers: []func() error{throttling, throttling, ok}, want: 495},
		"first attempt success":       {drain: 14, answers: []func() error{ok}, want: 487},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			bucket := jitterretry.NewTokenBucket(500, 0)
			if c.drain > 0 {
				_, err := bucket.GetToken(context.Background(), c.drain)
				require.NoError(t, err)
			}
			r := jitterretry.New(sdkcQuick, func(o *jitterretry.Options) { o.RateLimiter = bucket })
			attempts, err := operation(context.Background(), r, script(c.answers...))
			require.NoError(t, err, "expect no error, got %v", err)
			assert.Equal(t, len(c.answers), attempts, "expect %d attempts, got %d", len(c.answers), attempts)
			assert.Equal(t, c.want, bucket.Remaining(), "expect %d tokens left, got %d", c.want, bucket.Remaining())
		})
	}
}

// ---------------------------------------------------------------------------
// clockskew_test.go

// TestSDKContract_WrapAsClockSkew: the middleware marks a clock-skew error
// retryable only above the 4-minute threshold; the retryer must then retry
// it, and leave every other case alone. Driven through the middleware, with
// the response's Date header giving the candidate skew.
func TestSDKContract_WrapAsClockSkew(t *testing.T) {
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "x"} }
	above, below, threshold := 5*time.Minute, 2*time.Minute, 4*time.Minute
	cases := map[string]struct {
		opErr       error
		candidate   time.Duration
		dated       bool
		attemptSkew time.Duration
		retried     bool
	}{
		"InvalidSignatureException above threshold":  {api("InvalidSignatureException"), above, true, 0, true},
		"SignatureDoesNotMatch above threshold":      {api("SignatureDoesNotMatch"), above, true, 0, true},
		"AuthFailure above threshold":                {api("AuthFailure"), above, true, 0, true},
		"RequestTimeTooSkewed above threshold":       {api("RequestTimeTooSkewed"), above, true, 0, true},
		"AccessDeniedException above threshold":      {api("AccessDeniedException"), above, true, 0, true},
		"negative skew above threshold":              {api("InvalidSignatureException"), -above, true, 0, true},
		"skew below threshold":                       {api("InvalidSignatureException"), below, true, 0, false},
		"skew exactly at threshold":                  {api("InvalidSignatureException"), threshold, true, 0, false},
		"no candidate skew":                          {api("InvalidSignatureException"), 0, false, 0, false},
		"unknown code above threshold":               {api("ValidationException"), above, true, 0, false},
		"non-api error above threshold":              {errors.New("boom"), above, true, 0, false},
		"RequestExpired not skew":                    {api("RequestExpired"), above, true, 0, false},
		"RequestInTheFuture not skew":                {api("RequestInTheFuture"), above, true, 0, false},
		"stale offset heals when clocks realign":     {api("RequestTimeTooSkewed"), 0, true, above, true},
		"stale offset with low candidate not enough": {api("InvalidSignatureException"), below, true, above, false},
		"stale offset no date header":                {api("RequestTimeTooSkewed"), 0, false, above, false},
		"stale offset small attempt skew":            {api("RequestTimeTooSkewed"), 0, true, below, false},
		"stale offset unknown code":                  {api("ValidationException"), 0, true, above, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := sdkcSkewRetried(t, c.opErr, c.dated, c.candidate, c.attemptSkew, false)
			assert.Equal(t, c.retried, got, "expect retried %t, got %t", c.retried, got)
		})
	}
}

// ---------------------------------------------------------------------------
// retryable_error_test.go, timeout_error_test.go, retry_test.go

// sdkcCheckRetryable asserts that a Retryer built with opts, and Classify
// when there are no opts, find err retryable or not, as the SDK's checks do.
func sdkcCheckRetryable(t *testing.T, err error, retryable bool, opts ...func(*jitterretry.Options)) {
	t.Helper()
	r := jitterretry.New(opts...)
	require.NoError(t, r.Err())
	got := r.IsErrorRetryable(err)
	assert.Equal(t, retryable, got, "New().IsErrorRetryable: expect %t, got %t for %v", retryable, got, err)
	if len(opts) == 0 {
		class := jitterretry.Classify(err)
		assert.Equal(t, retryable, class != jitterretry.ClassNotRetryable, "Classify: expect retryable %t, got class %v for %v", retryable, class, err)
	}
}

func TestSDKContract_RetryConnectionErrors(t *testing.T) {
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"nested connection reset":      {opErr: fmt.Errorf("serialization error, %w", fmt.Errorf("connection reset")), retryable: true},
		"top level connection reset":   {opErr: fmt.Errorf("connection reset"), retryable: true},
		"wrapped connection reset":     {opErr: fmt.Errorf("some error: %w", fmt.Errorf("connection reset")), retryable: true},
		"url.Error connection refused": {opErr: fmt.Errorf("some error, %w", &url.Error{Err: fmt.Errorf("connection refused")}), retryable: true},
		"other connection refused":     {opErr: fmt.Errorf("connection refused")},
		"nil error connection reset":   {opErr: nil},
		"some other error":             {opErr: fmt.Errorf("some error: %w", fmt.Errorf("something bad"))},
		"request send error": {opErr: fmt.Errorf("some error: %w", &sdkcSendFailure{err: &url.Error{Err: fmt.Errorf("another error")}}),
			retryable: true},
		"temporary error":     {opErr: &sdkcCoded{code: "SomeCode", err: sdkcTemporary(true)}, retryable: true},
		"timeout error":       {opErr: fmt.Errorf("some error: %w", sdkcTimeout(true)), retryable: true},
		"timeout false error": {opErr: fmt.Errorf("some error: %w", sdkcTimeout(false))},
		"net.OpError dial":    {opErr: &net.OpError{Op: "dial", Err: sdkcTimeout(false)}, retryable: true},
		"net.OpError nested":  {opErr: &net.OpError{Op: "read", Err: fmt.Errorf("some error %w", sdkcTimeout(true))}, retryable: true},
		"net.ErrClosed":       {opErr: net.ErrClosed, retryable: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sdkcCheckRetryable(t, c.opErr, c.retryable)
			if c.retryable {
				class := jitterretry.Classify(c.opErr)
				assert.Equal(t, jitterretry.ClassTransient, class, "expect a connection error to be transient, got %v", class)
			}
		})
	}
}

func TestSDKContract_RetryHTTPStatusCodes(t *testing.T) {
	cases := map[string]struct{ opErr error }{
		"top level":      {opErr: sdkcStatus(500)},
		"nested":         {opErr: fmt.Errorf("some error, %w", sdkcStatus(500))},
		"response error": {opErr: fmt.Errorf("some error, %w", &sdkcCoded{code: "SomeCode", err: sdkcStatus(502)})},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, c.opErr, true) })
	}
}

// TestSDKContract_RetryErrorCodes: the SDK's RetryableErrorCode check, given
// in Options.Retryables, finds a code through a *retry.MaxAttemptsError.
func TestSDKContract_RetryErrorCodes(t *testing.T) {
	codes := func(o *jitterretry.Options) {
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableErrorCode{Codes: map[string]struct{}{"ErrorCode1": {}, "ErrorCode2": {}}}}
	}
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"retryable code":     {opErr: &retry.MaxAttemptsError{Err: &sdkcCoded{code: "ErrorCode1"}}, retryable: true},
		"not retryable code": {opErr: &retry.MaxAttemptsError{Err: &sdkcCoded{code: "SomeErroCode"}}},
		"other error":        {opErr: fmt.Errorf("some other error")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, c.opErr, c.retryable, codes) })
	}
}

func TestSDKContract_CanceledError(t *testing.T) {
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"canceled error":           {opErr: fmt.Errorf("some error, %w", &aws.RequestCanceledError{Err: fmt.Errorf(":(")})},
		"canceled retryable error": {opErr: fmt.Errorf("some error, %w", &aws.RequestCanceledError{Err: sdkcRetryableFlag(true)})},
		"not canceled error":       {opErr: fmt.Errorf("some error, %w", sdkcCanceledFlag(false))},
		"retryable error":          {opErr: fmt.Errorf("some error, %w", sdkcRetryableFlag(true)), retryable: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, c.opErr, c.retryable) })
	}
}

func TestSDKContract_DNSError(t *testing.T) {
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"IsNotFound":                                {opErr: &net.DNSError{IsNotFound: true}},
		"Temporary (IsTimeout)":                     {opErr: &net.DNSError{IsTimeout: true}, retryable: true},
		"Temporary (IsTemporary)":                   {opErr: &net.DNSError{IsTemporary: true}, retryable: true},
		"Temporary() == false but it falls through": {opErr: &net.OpError{Op: "dial", Err: &net.DNSError{}}, retryable: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, c.opErr, c.retryable) })
	}
}

func TestSDKContract_DefaultRetryables_HTTPStatusCode429(t *testing.T) {
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"429":                          {opErr: sdkcStatus(429), retryable: true},
		"429 with unknown code":        {opErr: &sdkcCoded{code: "SomeUnmodeledError", err: sdkcStatus(429)}, retryable: true},
		"429 explicitly not retryable": {opErr: &sdkcVerdict{err: sdkcStatus(429), retryable: false}},
		"429 generic API error": {opErr: fmt.Errorf("some error, %w", &sdkcStatusOver{status: 429, err: &smithy.GenericAPIError{Code: "SomeUnmodeledError"}}),
			retryable: true},
		"429 modeled error": {opErr: &sdkcModeledOver{code: "ConcurrentResourcesLimitExceededException", err: sdkcStatus(429)}},
		"429 modeled error explicitly retryable": {opErr: &sdkcVerdict{err: &sdkcModeledOver{code: "ModeledRetryableException", err: sdkcStatus(429)}, retryable: true},
			retryable: true},
		"429 modeled throttle error code": {opErr: &sdkcModeledOver{code: "TooManyRequestsException", err: sdkcStatus(429)}, retryable: true},
		"500 modeled error":               {opErr: &sdkcModeledOver{code: "InternalServerException", err: sdkcStatus(500)}, retryable: true},
		"400":                             {opErr: sdkcStatus(400)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, c.opErr, c.retryable) })
	}
}

// TestSDKContract_ExplicitlyRetryableConflict: an error that says itself it
// may be retried (RetryableError() true) is retried by the SDK whatever it
// wraps, a conflict included, and by ours under the middleware too; unmarked,
// or marked not retryable, a conflict is retried by neither there (Do's).
func TestSDKContract_ExplicitlyRetryableConflict(t *testing.T) {
	for _, code := range []string{"ConditionalCheckFailedException", "TransactionConflictException"} {
		conflict := &sdkcModeledOver{code: code, err: sdkcStatus(400)}
		for _, c := range []struct {
			name string
			err  error
			want bool
		}{
			{"unmarked", conflict, false},
			{"marked retryable", &sdkcVerdict{err: conflict, retryable: true}, true},
			{"marked not retryable", &sdkcVerdict{err: conflict, retryable: false}, false},
		} {
			t.Run(code+"/"+c.name, func(t *testing.T) {
				assert.Equal(t, c.want, retry.NewStandard().IsErrorRetryable(c.err), "the SDK")
				assert.Equal(t, c.want, jitterretry.New().IsErrorRetryable(c.err), "ours")
			})
		}
	}
}

// TestSDKContract_RetryableHTTPStatusCode_customer429: a caller's own 429
// check retries every 429, modelled or not.
func TestSDKContract_RetryableHTTPStatusCode_customer429(t *testing.T) {
	mine := func(o *jitterretry.Options) {
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableHTTPStatusCode{Codes: map[int]struct{}{429: {}}}}
	}
	cases := map[string]error{
		"429":               sdkcStatus(429),
		"429 modeled error": &sdkcModeledOver{code: "ThrottledClientException", err: sdkcStatus(429)},
	}
	for name, opErr := range cases {
		t.Run(name, func(t *testing.T) { sdkcCheckRetryable(t, opErr, true, mine) })
	}
}

// TestSDKContract_DefaultThrottles_HTTPStatusCode429: a throttle is
// ClassThrottle and takes the 1 s throttle base; anything else takes 50 ms.
func TestSDKContract_DefaultThrottles_HTTPStatusCode429(t *testing.T) {
	cases := map[string]struct {
		opErr    error
		throttle bool
	}{
		"429":                             {opErr: sdkcStatus(429), throttle: true},
		"nested 429 with unknown code":    {opErr: fmt.Errorf("some error, %w", &sdkcCoded{code: "SomeUnmodeledError", err: sdkcStatus(429)}), throttle: true},
		"429 generic API error":           {opErr: &sdkcStatusOver{status: 429, err: &smithy.GenericAPIError{Code: "SomeUnmodeledError"}}, throttle: true},
		"429 modeled error":               {opErr: &sdkcModeledOver{code: "TooManyLabelsException", err: sdkcStatus(429)}},
		"429 modeled throttle error code": {opErr: &sdkcModeledOver{code: "ThrottlingException", err: sdkcStatus(429)}, throttle: true},
		"500":                             {opErr: sdkcStatus(500)},
		"other error":                     {opErr: fmt.Errorf("some other error")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			class := jitterretry.Classify(c.opErr)
			assert.Equal(t, c.throttle, class == jitterretry.ClassThrottle, "expect throttle %t, got class %v", c.throttle, class)
			r := jitterretry.New(sdkcJitter(1))
			d, err := r.RetryDelay(1, c.opErr)
			require.NoError(t, err)
			want := 50 * time.Millisecond
			if c.throttle {
				want = time.Second
			}
			assert.Equal(t, want, d, "expect the first backoff %v, got %v", want, d)
		})
	}
}

// TestSDKContract_IsTimeoutError: the SDK's deprecated timeout check, as the
// retryer sees the same errors: a timeout is an ordinary transient error.
func TestSDKContract_IsTimeoutError(t *testing.T) {
	cases := map[string]struct {
		opErr     error
		retryable bool
	}{
		"TimeouterError true":  {opErr: fmt.Errorf("nested error, %w", sdkcTimeout(true)), retryable: true},
		"TimeouterError false": {opErr: fmt.Errorf("nested error, %w", sdkcTimeout(false))},
		"other error":          {opErr: fmt.Errorf("some other error")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			sdkcCheckRetryable(t, c.opErr, c.retryable)
			if c.retryable {
				assert.Equal(t, jitterretry.ClassTransient, jitterretry.Classify(c.opErr), "expect a timeout to be transient, not a throttle")
			}
		})
	}
}

func TestSDKContract_AddWithErrorCodes(t *testing.T) {
	r := retry.AddWithErrorCodes(jitterretry.New(), "Error1", "Error2")
	cases := map[string]struct {
		opErr error
		want  bool
	}{
		"retryable":     {opErr: &sdkcCoded{code: "Error1"}, want: true},
		"not retryable": {opErr: &sdkcCoded{code: "Error3"}, want: false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := r.IsErrorRetryable(c.opErr)
			assert.Equal(t, c.want, got, "expect retryable %t, got %t", c.want, got)
		})
	}
}

// TestSDKContract_AddWithErrorCodesOnAThrottleCode: a code the caller's
// Throttles call a throttle, made retryable by retry.AddWithErrorCodes (the
// retryer's own rules do not retry it), is priced and backed off as a
// throttle, as the SDK does by its throttle checks alone: 5 tokens and the
// 1 s base. It was priced as any other error (14 tokens, 50 ms), and the
// send-rate limiter did not learn from it.
func TestSDKContract_AddWithErrorCodesOnAThrottleCode(t *testing.T) {
	code := retry.ThrottleErrorCode{Codes: map[string]struct{}{"MyThrottle": {}}}
	sdkBucket := ratelimit.NewTokenRateLimit(500)
	sdkStd := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Throttles = append(o.Throttles, code)
		o.RateLimiter = sdkBucket
		o.Backoff = retry.NewExponentialJitterBackoff(o.MaxBackoff)
	})
	ours := jitterretry.New(sdkcJitter(1), func(o *jitterretry.Options) { o.Throttles = append(o.Throttles, code) })
	require.NoError(t, ours.Err())
	opErr := &sdkcCoded{code: "MyThrottle"}
	sdk := retry.AddWithErrorCodes(sdkStd, "MyThrottle").(aws.RetryerV2)
	wrapped := retry.AddWithErrorCodes(ours, "MyThrottle").(aws.RetryerV2)
	require.True(t, sdk.IsErrorRetryable(opErr))
	require.True(t, wrapped.IsErrorRetryable(opErr))

	_, err := sdk.GetRetryToken(context.Background(), opErr)
	require.NoError(t, err)
	_, err = wrapped.GetRetryToken(context.Background(), opErr)
	require.NoError(t, err)
	assert.Equal(t, uint(495), sdkBucket.Remaining(), "expect the SDK to take a throttle's 5 tokens")
	assert.Equal(t, uint(495), ours.Remaining(), "expect a throttle's 5 tokens, as the SDK's")
	d, err := wrapped.RetryDelay(1, opErr)
	require.NoError(t, err)
	assert.Equal(t, time.Second, d, "expect the throttle base (exponential: 1s at the first retry), got %v", d)
	d, err = wrapped.RetryDelay(1, &sdkcCoded{code: "MyThrottle"}) // no hand-off: classified again
	require.NoError(t, err)
	assert.Equal(t, time.Second, d, "expect the throttle base without a hand-off too, got %v", d)
}

// ---------------------------------------------------------------------------
// jitter_backoff_test.go

func TestSDKContract_ExponentialJitterBackoff_retries2026AttemptDelay(t *testing.T) {
	throttle := &sdkcCoded{code: "Throttling"}
	cases := map[string]struct {
		fraction float64
		attempt  int
		opErr    error
		want     time.Duration
	}{
		"first retry":                       {fraction: 0.5, attempt: 1, want: 25 * time.Millisecond},
		"third retry":                       {fraction: 0.5, attempt: 3, want: 100 * time.Millisecond},
		"max backoff applied before jitter": {fraction: 0.5, attempt: 21, want: 10 * time.Second},
		"throttle uses 1s base":             {fraction: 0.5, attempt: 1, opErr: throttle, want: 500 * time.Millisecond},
		"throttle second retry":             {fraction: 1, attempt: 2, opErr: throttle, want: 2 * time.Second},
		"429 uses 1s base":                  {fraction: 1, attempt: 1, opErr: sdkcStatus(429), want: time.Second},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(sdkcJitter(c.fraction))
			d, err := r.RetryDelay(c.attempt, c.opErr)
			require.NoError(t, err)
			assert.Equal(t, c.want, d, "expect delay %v, got %v", c.want, d)
		})
	}
}

// TestSDKContract_ExponentialJitterBackoff_AttemptDelay: the legacy delayer
// of retry.NewExponentialJitterBackoff, which retry.NewStandard no longer
// uses (only retry.AddWithMaxBackoffDelay does), has the window 1 s * 2^attempt:
// our window with a 2 s base. Its cases, at that base.
func TestSDKContract_ExponentialJitterBackoff_AttemptDelay(t *testing.T) {
	largest := 1 - math.Ldexp(1, -53) // the largest float64 below 1
	legacy := func(o *jitterretry.Options) { o.BaseDelay, o.MaxBackoff = 2*time.Second, 20*time.Second }
	cases := map[string]struct {
		fraction float64
		attempt  int
		want     time.Duration
	}{
		"min delay floor":   {fraction: 0, attempt: 1, want: 0},
		"min delay ceiling": {fraction: largest, attempt: 1, want: 1_999_999_999}, // largest * 2 s, truncated
		"attempt delay":     {fraction: 0.5, attempt: 2, want: 2 * time.Second},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(legacy, sdkcJitter(c.fraction))
			d, err := r.RetryDelay(c.attempt, nil)
			require.NoError(t, err)
			assert.Equal(t, c.want, d, "expect delay %v, got %v", c.want, d)
		})
	}

	differences := map[string]struct {
		reason   string
		fraction float64
		attempt  int
		want     time.Duration
	}{
		"max delay": {
			reason:   "behaviour 2.1 (ours and retry.NewStandard's) caps the window before jitter, so the cap stays jittered; the legacy delayer returns the cap itself (20s)",
			fraction: largest, attempt: 2147483647, want: 19_999_999_999,
		},
	}
	for name, d := range differences {
		t.Run("differences/"+name, func(t *testing.T) {
			r := jitterretry.New(legacy, sdkcJitter(d.fraction))
			got, err := r.RetryDelay(d.attempt, nil)
			require.NoError(t, err)
			assert.Equal(t, d.want, got, "expect delay %v, got %v", d.want, got)
		})
	}
}

// ---------------------------------------------------------------------------
// ratelimit: token_bucket_test.go, token_rate_limit_test.go. Each runs with
// our TokenBucket used directly as a retry.RateLimiter, and plugged into
// retry.NewStandard through StandardOptions.RateLimiter.

// sdkcBucketWay is one way to use a TokenBucket: take cost tokens for a
// retry, and give n back.
type sdkcBucketWay struct {
	take func(ctx context.Context, b *jitterretry.TokenBucket, cost uint) (func() error, error)
	give func(ctx context.Context, b *jitterretry.TokenBucket, n uint)
}

func sdkcBucketWays() map[string]sdkcBucketWay {
	return map[string]sdkcBucketWay{
		"as a retry.RateLimiter": {
			take: func(ctx context.Context, b *jitterretry.TokenBucket, cost uint) (func() error, error) {
				return b.GetToken(ctx, cost)
			},
			give: func(_ context.Context, b *jitterretry.TokenBucket, n uint) { _ = b.AddTokens(n) },
		},
		"in retry.NewStandard": {
			// A retry after an error that is no throttle costs RetryCost; a
			// first attempt's success adds NoRetryIncrement.
			take: func(ctx context.Context, b *jitterretry.TokenBucket, cost uint) (func() error, error) {
				std := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter, o.RetryCost = b, cost })
				release, err := std.GetRetryToken(ctx, errors.New("a transient error"))
				if err != nil {
					return nil, err
				}
				return func() error { return release(nil) }, nil
			},
			give: func(ctx context.Context, b *jitterretry.TokenBucket, n uint) {
				std := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter, o.NoRetryIncrement = b, n })
				release, _ := std.GetAttemptToken(ctx)
				_ = release(nil)
			},
		},
	}
}

// TestSDKContract_TokenBucket ports the SDK's token bucket walk-through up to
// its Resize steps: our bucket's capacity is fixed when it is made.
func TestSDKContract_TokenBucket(t *testing.T) {
	steps := []struct {
		take, give uint
		taken      bool
		left       uint // after a take; what was available, after a refusal
	}{
		{take: 10, taken: true, left: 90},
		{take: 91, left: 90},
		{give: 1},
		{take: 92, left: 91},
		{take: 91, taken: true, left: 0},
		{take: 1, left: 0},
		{give: 1},
		{take: 1, taken: true, left: 0},
	}
	for way, use := range sdkcBucketWays() {
		t.Run(way, func(t *testing.T) {
			ctx := context.Background()
			b := jitterretry.NewTokenBucket(100, 0)
			for i, st := range steps {
				if st.give > 0 {
					use.give(ctx, b, st.give)
					continue
				}
				release, err := use.take(ctx, b, st.take)
				if st.taken {
					require.NoError(t, err, "step %d: expect %d tokens taken, got %v", i, st.take, err)
					require.NotNil(t, release)
					assert.Equal(t, st.left, b.Remaining(), "step %d: expect %d left, got %d", i, st.left, b.Remaining())
					continue
				}
				require.Error(t, err, "step %d: expect %d tokens refused, got them", i, st.take)
				var quota ratelimit.QuotaExceededError
				require.ErrorAs(t, err, &quota, "step %d: expect a QuotaExceededError, got %v", i, err)
				assert.Equal(t, st.left, quota.Available, "step %d: expect %d available, got %d", i, st.left, quota.Available)
				assert.Equal(t, st.take, quota.Requested, "step %d: expect %d requested, got %d", i, st.take, quota.Requested)
				assert.Equal(t, st.left, b.Remaining(), "step %d: expect %d left, got %d", i, st.left, b.Remaining())
			}
		})
	}
}

// TestSDKContract_TokenBucketParallel: takes, gives and reads at once (the
// SDK's third goroutine resizes; ours reads), race-free and within bounds.
func TestSDKContract_TokenBucketParallel(t *testing.T) {
	for way, use := range sdkcBucketWays() {
		t.Run(way, func(t *testing.T) {
			ctx := context.Background()
			b := jitterretry.NewTokenBucket(100, 0)
			const count = 1000
			var wg sync.WaitGroup
			var over atomic.Int64
			wg.Add(3)
			go func() {
				defer wg.Done()
				for range count {
					_, _ = use.take(ctx, b, 1)
				}
			}()
			go func() {
				defer wg.Done()
				for range count {
					use.give(ctx, b, 1)
				}
			}()
			go func() {
				defer wg.Done()
				for range count {
					if b.Remaining() > 100 {
						over.Add(1)
					}
				}
			}()
			wg.Wait()
			assert.Equal(t, int64(0), over.Load(), "expect the bucket never above its capacity 100, got above %d times", over.Load())
			assert.LessOrEqual(t, b.Remaining(), uint(100), "expect at most 100 tokens, got %d", b.Remaining())
		})
	}
}

func TestSDKContract_TokenRateLimit(t *testing.T) {
	usages := []struct {
		cost    uint
		release bool
		wantErr string
		add     uint
	}{
		{cost: 5, release: true},
		{cost: 5},
		{cost: 5},
		{cost: 5, wantErr: "retry quota exceeded"},
		{add: 5},
		{cost: 5},
	}
	for way, use := range sdkcBucketWays() {
		t.Run(way, func(t *testing.T) {
			ctx := context.Background()
			b := jitterretry.NewTokenBucket(10, 0)
			for i, u := range usages {
				if u.cost != 0 {
					release, err := use.take(ctx, b, u.cost)
					if u.wantErr != "" {
						require.Error(t, err, "usage %d: expect error %q, got none", i, u.wantErr)
						assert.Contains(t, err.Error(), u.wantErr, "usage %d: expect error %q, got %q", i, u.wantErr, err.Error())
					} else {
						require.NoError(t, err, "usage %d: expect no error, got %v", i, err)
					}
					if u.release {
						assert.NoError(t, release(), "usage %d: expect the release to succeed", i)
					}
				}
				if u.add != 0 {
					use.give(ctx, b, u.add)
				}
			}
		})
	}
}

func TestSDKContract_TokenRateLimit_canceled(t *testing.T) {
	for way, use := range sdkcBucketWays() {
		t.Run(way, func(t *testing.T) {
			b := jitterretry.NewTokenBucket(10, 0)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			release, err := use.take(ctx, b, 1)
			require.Error(t, err, "expect an error for a cancelled context, got none")
			assert.Nil(t, release, "expect no release for a refused token")
			var canceled interface{ CanceledError() bool }
			assert.ErrorAs(t, err, &canceled, "expect an error with CanceledError() bool, as the SDK's bucket gives, got %T: %v", err, err)
			assert.Equal(t, uint(10), b.Remaining(), "expect no token taken, got %d left", b.Remaining())
		})
	}
}

// ---------------------------------------------------------------------------
// The contract items of issue 11 that the SDK's tests do not state as cases.

// TestSDKContract_RetryAfterOverflow: the middleware converts the
// x-amz-retry-after milliseconds to a Duration without a check, so from
// 9,223,372,036,855 ms up the value wraps around, and the clamp to
// [backoff, backoff+5s] acts on the wrapped value. OnRetry and the deadline
// check must report that wait, the one the middleware sleeps.
func TestSDKContract_RetryAfterOverflow(t *testing.T) {
	const backoff = 50 * time.Millisecond
	cases := map[string]struct {
		hint int64
		wait time.Duration // what the SDK's middleware sleeps
	}{
		// 9,223,372,036,854,000,000 ns fits: clamped to backoff + 5 s.
		"the largest hint that does not wrap": {hint: 9_223_372_036_854, wait: 5*time.Second + backoff},
		// 9,223,372,036,855,000,000 ns wraps to a negative: the backoff.
		"the first hint that wraps": {hint: 9_223_372_036_855, wait: backoff},
		// wraps to 1,448,384 ns, below the backoff: the backoff.
		"a hint that wraps below the backoff": {hint: 18_446_744_073_711, wait: backoff},
		// wraps to 3,000,448,384 ns, inside the clamp: slept as it is.
		"a hint that wraps inside the clamp": {hint: 18_446_744_076_710, wait: 3_000_448_384},
		// wraps to -1 ms: the backoff.
		"math.MaxInt64": {hint: math.MaxInt64, wait: backoff},
	}
	deadlines := map[string]time.Duration{"no deadline": 0, "a 2s deadline": 2 * time.Second, "a 4s deadline": 4 * time.Second}
	for name, c := range cases {
		for dname, deadline := range deadlines {
			t.Run(name+"/"+dname, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				if deadline > 0 {
					ctx, cancel = context.WithTimeout(context.Background(), deadline)
				}
				defer cancel()
				var waits []time.Duration
				var gaveUp []*jitterretry.GiveUpError
				r := jitterretry.New(sdkcJitter(1), func(o *jitterretry.Options) {
					// The middleware sleeps right after this call: cancel
					// it, so the test reads the wait without sleeping it.
					o.OnRetry = func(e jitterretry.RetryEvent) { waits = append(waits, e.Delay); cancel() }
					o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e) }
				})
				hinted := asResponse(500, &modeled{"InternalServerError"}, "X-Amz-Retry-After", fmt.Sprint(c.hint))
				_, err := operation(ctx, r, script(fail(hinted), ok))
				require.Error(t, err)
				if deadline > 0 && c.wait > deadline {
					var gu *jitterretry.GiveUpError
					require.ErrorAs(t, err, &gu, "expect a give-up at the deadline, got %v", err)
					assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason, "expect reason deadline, got %v", gu.Reason)
					// Refused by GetRetryToken, before the backoff is drawn,
					// the refused wait is the shortest the hint allows: the
					// hint clamped to [0, 5 s], as over a backoff of 0.
					shortest := min(c.wait, 5*time.Second)
					assert.Equal(t, shortest, gu.Delay, "expect the shortest refused wait %v, got %v", shortest, gu.Delay)
					assert.Empty(t, waits, "expect no retry reported, got %v", waits)
					return
				}
				require.Len(t, waits, 1, "expect one retry reported, got %v (err %v, gave up %v)", waits, err, gaveUp)
				assert.Equal(t, c.wait, waits[0], "expect the wait %v, got %v", c.wait, waits[0])
			})
		}
	}
}

// TestSDKContract_SideBySide runs the SDK's retry.NewStandard and our New
// on the same inputs. sameAsSDK holds what issue 11 names as like the SDK;
// differences holds the README's deliberate differences in classification.
func TestSDKContract_SideBySide(t *testing.T) {
	t.Run("plain aws.Retryer decorator", func(t *testing.T) {
		// A decorator that hides the RetryerV2 methods makes the middleware
		// call GetInitialToken, whose release adds 1 on every success:
		// 400 - 14 + 14 + 1 = 401.
		sdkBucket := ratelimit.NewTokenRateLimit(500)
		_, err := sdkBucket.GetToken(context.Background(), 100)
		require.NoError(t, err)
		_, err = operation(context.Background(), struct{ aws.Retryer }{retry.NewStandard(sdkFast(sdkBucket))}, script(serverErr, ok))
		require.NoError(t, err)
		require.Equal(t, uint(401), sdkBucket.Remaining(), "the SDK: expect 401 tokens left, got %d", sdkBucket.Remaining())

		buckets := map[string]func() (*jitterretry.Retryer, func() uint){
			"a shared TokenBucket": func() (*jitterretry.Retryer, func() uint) {
				b := jitterretry.NewTokenBucket(500, 0)
				_, _ = b.GetToken(context.Background(), 100)
				return jitterretry.New(sdkcQuick, func(o *jitterretry.Options) { o.RateLimiter = b }), b.Remaining
			},
			"the retryer's own bucket": func() (*jitterretry.Retryer, func() uint) {
				r := jitterretry.New(sdkcQuick)
				for range 20 { // 20 throttled retries at 5: 400 left
					_, _ = r.GetRetryToken(context.Background(), throttleErr())
				}
				return r, r.Remaining
			},
		}
		for name, build := range buckets {
			t.Run(name, func(t *testing.T) {
				r, remaining := build()
				require.Equal(t, uint(400), remaining(), "expect the bucket at 400 to start, got %d", remaining())
				attempts, err := operation(context.Background(), struct{ aws.Retryer }{r}, script(serverErr, ok))
				require.NoError(t, err)
				requireAttempts(t, 2, attempts, err)
				assert.Equal(t, uint(401), remaining(), "expect 401 tokens left, as the SDK, got %d", remaining())
			})
		}
	})

	t.Run("a BaseDelay above MaxBackoff is capped", func(t *testing.T) {
		sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.BaseDelay, o.MaxBackoff = 100*time.Millisecond, 50*time.Millisecond })
		for range 20 {
			d, err := sdk.RetryDelay(1, serverErr())
			require.NoError(t, err)
			require.Less(t, d, 50*time.Millisecond, "the SDK: expect a delay below the 50ms cap, got %v", d)
		}
		capped := func(o *jitterretry.Options) { o.BaseDelay, o.MaxBackoff = 100*time.Millisecond, 50*time.Millisecond }
		for fraction, want := range map[float64]time.Duration{1: 50 * time.Millisecond, 0.5: 25 * time.Millisecond} {
			r := jitterretry.New(capped, sdkcJitter(fraction))
			require.NoError(t, r.Err(), "expect a base above the cap accepted, as the SDK, got %v", r.Err())
			d, err := r.RetryDelay(1, serverErr())
			require.NoError(t, err)
			assert.Equal(t, want, d, "jitter %v: expect delay %v, got %v", fraction, want, d)
		}
	})

	cancelledSend := &smithyhttp.RequestSendError{Err: context.Canceled}
	cancelledDial := &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "https://dynamodb.us-east-1.amazonaws.com/", Err: context.Canceled}}
	sameAsSDK := map[string]struct {
		opErr     error
		retryable bool
		attempts  int // through the middleware, MaxAttempts 3
	}{
		"a ConditionalCheckFailedException is not retried":         {opErr: conflictErr(), attempts: 1},
		"a TransactionConflictException is not retried":            {opErr: asResponse(400, &modeled{"TransactionConflictException"}), attempts: 1},
		"an error saying connection reset, with no status or code": {opErr: fmt.Errorf("read tcp: %w", errors.New("connection reset by peer")), retryable: true, attempts: 3},
		"a send error that is no cancellation":                     {opErr: &smithyhttp.RequestSendError{Err: errors.New("dial tcp: i/o timeout")}, retryable: true, attempts: 3},
	}
	differences := map[string]struct {
		reason       string
		opErr        error
		sdkRetryable bool
		ourRetryable bool
		sdkAttempts  int
		ourAttempts  int
	}{
		"a bare context.Canceled inside a send error": {
			reason: "a cancelled caller never wants another attempt; the SDK retries it as a connection error",
			opErr:  cancelledSend, sdkRetryable: true, sdkAttempts: 3, ourAttempts: 1},
		"a context.Canceled in a url.Error inside a send error": {
			reason: "a cancelled caller never wants another attempt; the SDK retries it as a connection error",
			opErr:  cancelledDial, sdkRetryable: true, sdkAttempts: 3, ourAttempts: 1},
		"a 400 API error whose message says connection reset": {
			reason: "we search the text only of errors with no status and no code; the SDK searches every error's text",
			opErr:  asResponse(400, &smithy.GenericAPIError{Code: "ValidationException", Message: "connection reset by peer"}), sdkRetryable: true, sdkAttempts: 3, ourAttempts: 1},
		"an HTTP status error whose text says connection reset": {
			reason: "we search the text only of errors with no status and no code; the SDK searches every error's text",
			opErr:  &sdkcStatusOver{status: 400, err: errors.New("connection reset")}, sdkRetryable: true, sdkAttempts: 3, ourAttempts: 1},
		"a coded error whose text says connection reset": {
			reason: "we search the text only of errors with no status and no code; the SDK searches every error's text",
			opErr:  &sdkcCoded{code: "SomeCode", err: errors.New("connection reset")}, sdkRetryable: true, sdkAttempts: 3, ourAttempts: 1},
	}
	side := func(t *testing.T, opErr error) (sdkRetryable, ourRetryable bool, sdkAttempts, ourAttempts int) {
		sdk := retry.NewStandard(sdkFast(ratelimit.NewTokenRateLimit(500)))
		ours := jitterretry.New(sdkcQuick)
		sdkAttempts, _ = operation(context.Background(), sdk, script(fail(opErr)))
		ourAttempts, _ = operation(context.Background(), ours, script(fail(opErr)))
		return sdk.IsErrorRetryable(opErr), ours.IsErrorRetryable(opErr), sdkAttempts, ourAttempts
	}
	for name, c := range sameAsSDK {
		t.Run("sameAsSDK/"+name, func(t *testing.T) {
			sdkR, ourR, sdkA, ourA := side(t, c.opErr)
			assert.Equal(t, c.retryable, sdkR, "the SDK: expect retryable %t, got %t", c.retryable, sdkR)
			assert.Equal(t, c.retryable, ourR, "expect retryable %t, as the SDK, got %t", c.retryable, ourR)
			assert.Equal(t, c.attempts, sdkA, "the SDK: expect %d attempts, got %d", c.attempts, sdkA)
			assert.Equal(t, c.attempts, ourA, "expect %d attempts, as the SDK, got %d", c.attempts, ourA)
		})
	}
	for name, d := range differences {
		t.Run("differences/"+name, func(t *testing.T) {
			sdkR, ourR, sdkA, ourA := side(t, d.opErr)
			assert.Equal(t, d.sdkRetryable, sdkR, "the SDK: expect retryable %t, got %t", d.sdkRetryable, sdkR)
			assert.Equal(t, d.ourRetryable, ourR, "expect retryable %t, got %t", d.ourRetryable, ourR)
			assert.Equal(t, d.sdkAttempts, sdkA, "the SDK: expect %d attempts, got %d", d.sdkAttempts, sdkA)
			assert.Equal(t, d.ourAttempts, ourA, "expect %d attempts, got %d", d.ourAttempts, ourA)
			class := jitterretry.Classify(d.opErr)
			assert.Equal(t, jitterretry.ClassNotRetryable, class, "expect Classify not retryable, got %v", class)
		})
	}
}

// TestSDKContract_DeadlineBackoff: a wait that would end past the context's
// deadline. The SDK sleeps into the deadline and returns the cancelled sleep;
// we refuse at once with a *GiveUpError that keeps the cause.
func TestSDKContract_DeadlineBackoff(t *testing.T) {
	// A deadline a stalled goroutine cannot miss by itself: at 200 ms, one
	// run of make test with two busy loops beside it (load average 5.3)
	// returned our refusal past it (2026-12-07). The waits stay far past
	// it, and the SDK's side sleeps into it.
	const deadline = 2 * time.Second
	differences := map[string]struct {
		reason  string
		answer  func() error
		backoff time.Duration // every backoff, both retryers
		wait    time.Duration // the wait we refuse
	}{
		"a backoff past the deadline": {
			reason: "we give up at once with a *GiveUpError wrapping the cause, tokens refunded; the SDK sleeps until the deadline and returns only the context's error, as an *aws.RequestCanceledError",
			answer: throttleErr, backoff: 10 * time.Second, wait: 10 * time.Second},
		"an x-amz-retry-after hint past the deadline": {
			reason: "we give up at once with a *GiveUpError wrapping the cause, tokens refunded; the SDK sleeps until the deadline and returns only the context's error, as an *aws.RequestCanceledError",
			answer: func() error { return retryAfter(4000) }, backoff: time.Millisecond, wait: 4 * time.Second},
	}
	for name, d := range differences {
		t.Run("differences/"+name, func(t *testing.T) {
			t.Parallel()
			fixed := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return d.backoff, nil })
			cause := d.answer()

			sdkCtx, sdkCancel := context.WithTimeout(context.Background(), deadline)
			defer sdkCancel()
			sdk := retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = fixed })
			_, sdkErr := operation(sdkCtx, sdk, script(fail(cause), ok))
			var cancelled *aws.RequestCanceledError
			assert.ErrorAs(t, sdkErr, &cancelled, "the SDK: expect the cancelled sleep, got %v", sdkErr)
			assert.Error(t, sdkCtx.Err(), "the SDK: expect it to sleep into the deadline")
			var sdkTimeout net.Error
			assert.True(t, errors.As(sdkErr, &sdkTimeout) && sdkTimeout.Timeout(), "the SDK: expect a timeout to code that asks for a net.Error")

			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			r := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = fixed })
			attempts, err := operation(ctx, r, script(fail(cause), ok))
			requireAttempts(t, 1, attempts, err)
			assert.NoError(t, ctx.Err(), "expect the refusal before the deadline, not a sleep into it")
			var gu *jitterretry.GiveUpError
			require.ErrorAs(t, err, &gu, "expect a *GiveUpError, got %v", err)
			assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason, "expect reason deadline, got %v", gu.Reason)
			assert.Equal(t, d.wait, gu.Delay, "expect the refused wait %v, got %v", d.wait, gu.Delay)
			assert.ErrorIs(t, err, context.DeadlineExceeded, "expect it to match context.DeadlineExceeded")
			// Code written for the SDK's error keeps matching.
			var ours *aws.RequestCanceledError
			if assert.ErrorAs(t, err, &ours, "expect it to match the SDK's *aws.RequestCanceledError") {
				assert.ErrorIs(t, ours, context.DeadlineExceeded)
			}
			// And code that tells a timeout by its Timeout method, as
			// net/http's callers do (helper-250: errors.As found none).
			var timeout net.Error
			assert.True(t, errors.As(err, &timeout) && timeout.Timeout(), "expect a timeout to code that asks for a net.Error, as the SDK's error is")
			var timeoutOnly interface{ Timeout() bool }
			assert.True(t, errors.As(err, &timeoutOnly) && timeoutOnly.Timeout(), "expect a timeout to code that asks for Timeout() alone")
			assert.ErrorIs(t, err, cause, "expect the cause kept, got %v", err)
			assert.Equal(t, uint(500), r.Remaining(), "expect the refused retry's tokens back, got %d", r.Remaining())
		})
	}
}

// TestSDKContract_DifferenceLearntMargin: by default a retry must leave,
// after its backoff, twice the attempt time learnt for the operation before
// the deadline. A retry with between one and two attempt times left may
// still win, and the SDK makes it; we refuse it, keeping the cause, and
// DisableDeadlineGiveUp (or a small DeadlineMargin) makes it as the SDK.
// The attempts take 200 ms of the retryers' clock, not of the wall clock:
// with real sleeps, a first one 60 ms late taught a margin that refused the
// first retry. The clock runs an hour ahead of the wall clock and the
// deadline is set on it, so the context's real timer cannot end an
// operation (the SDK, which reads no clock, runs against it too).
func TestSDKContract_DifferenceLearntMargin(t *testing.T) {
	t.Parallel()
	const attempt, deadline = 200 * time.Millisecond, 750 * time.Millisecond
	var elapsed atomic.Int64
	start := time.Now().Add(time.Hour)
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	zero := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	cause := serverErr()
	slow := func(answer func() error) func() error {
		return func() error {
			elapsed.Add(int64(attempt))
			if answer == nil {
				return nil
			}
			return answer()
		}
	}
	answers := func() func(int) error { return script(slow(fail(cause)), slow(fail(cause)), slow(ok)) }
	run := func(r aws.Retryer) (int, error) {
		ctx, cancel := context.WithDeadline(context.Background(), clock().Add(deadline))
		defer cancel()
		return operation(ctx, r, answers())
	}

	attempts, err := run(retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = zero }))
	require.NoError(t, err, "the SDK: expect its third attempt, 600 ms in, to win")
	requireAttempts(t, 3, attempts, err)

	attempts, err = run(jitterretry.New(func(o *jitterretry.Options) { o.Backoff, o.Clock = zero, clock }))
	requireAttempts(t, 2, attempts, err)
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu, "expect a *GiveUpError, got %v", err)
	assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason, "expect the margin's refusal: 350 ms or less left, 400 ms or more kept")
	assert.ErrorIs(t, err, cause)

	attempts, err = run(jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff, o.Clock = zero, clock
		o.DisableDeadlineGiveUp = true
	}))
	require.NoError(t, err, "expect DisableDeadlineGiveUp to retry as the SDK")
	requireAttempts(t, 3, attempts, err)
}

// TestSDKContract_DifferencePackageLevelLists: retry.NewStandard()'s checks
// read the SDK's package-level maps at every call, so a program that edits
// them changes a standard retryer built before; New copies the error-code
// maps when it is called and holds the 5xx statuses itself (an outside
// review). The edits run in a child process, where no parallel test reads
// the maps.
func TestSDKContract_DifferencePackageLevelLists(t *testing.T) {
	if !runInChild(t) {
		return
	}
	retry.DefaultRetryableErrorCodes["ReviewRetryable"] = struct{}{}
	retry.DefaultRetryableHTTPStatusCodes[408] = struct{}{}
	sdk, ours := retry.NewStandard(), jitterretry.New()
	require.NoError(t, ours.Err())
	retry.DefaultThrottleErrorCodes["ReviewThrottle"] = struct{}{}

	codeBefore := asResponse(400, &modeled{"ReviewRetryable"})
	assert.True(t, sdk.IsErrorRetryable(codeBefore), "expect the SDK to retry a code added before it was built")
	assert.True(t, ours.IsErrorRetryable(codeBefore), "expect ours to retry a code added before New")

	status := asResponse(408, &modeled{"ReviewStatus"})
	assert.True(t, sdk.IsErrorRetryable(status), "expect the SDK to retry a status added to its map")
	assert.False(t, ours.IsErrorRetryable(status), "expect ours to keep the 5xx statuses it holds")

	codeAfter := asResponse(400, &modeled{"ReviewThrottle"})
	assert.True(t, sdk.IsErrorRetryable(codeAfter), "expect the SDK to read its map at the call")
	assert.False(t, ours.IsErrorRetryable(codeAfter), "expect ours to keep the copy New took")
}
