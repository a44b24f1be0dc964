package delayers

import (
	"errors"
	"net/http"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"
)

// responseError wraps apiErr the way the SDK's deserialisers hand it to the
// retry middleware: an API error inside the smithy HTTP response error inside
// the AWS one.
func responseError(status int, apiErr error) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      apiErr,
		},
		RequestID: "test-request",
	}
}

// throttleErr is a DynamoDB-style throttle as the middleware sees it: HTTP 400
// with the ThrottlingException code, which retry.DefaultThrottles matches.
func throttleErr() error {
	return responseError(http.StatusBadRequest, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "rate exceeded"})
}

// tooManyRequestsErr is an unmodeled HTTP 429, which retry.DefaultThrottles
// also counts as a throttle.
func tooManyRequestsErr() error {
	return responseError(http.StatusTooManyRequests, &smithy.GenericAPIError{Code: "SlowDown"})
}

// serverErr is a retryable error that is not a throttle.
func serverErr() error {
	return responseError(http.StatusInternalServerError, &smithy.GenericAPIError{Code: "InternalServerError"})
}

// errorCases are the errors every strategy must handle, with whether the
// default classification counts them as throttles.
var errorCases = map[string]struct {
	err      error
	throttle bool
}{
	"nil error":     {err: nil},
	"plain error":   {err: errors.New("connection reset")},
	"server error":  {err: serverErr()},
	"throttle 400":  {err: throttleErr(), throttle: true},
	"throttle 429":  {err: tooManyRequestsErr(), throttle: true},
	"bare throttle": {err: &smithy.GenericAPIError{Code: "ThrottlingException"}, throttle: true},
}

// edgeAttempts are the attempt numbers every strategy must handle.
var edgeAttempts = map[string]int{
	"0":      0,
	"-1":     -1,
	"1":      1,
	"2":      2,
	"63":     63,
	"64":     64,
	"1000":   1000,
	"MaxInt": int(^uint(0) >> 1),
	"MinInt": -int(^uint(0)>>1) - 1,
}

// mustNew builds the strategy's delayer or fails the test.
func mustNew(t testing.TB, strategy Strategy, optFns ...func(*Options)) Delayer {
	t.Helper()
	d, err := New(strategy, optFns...)
	require.NoError(t, err, "expect no error building %s, got %v", strategy, err)
	require.NotNil(t, d, "expect a %s delayer, got nil", strategy)
	return d
}

// withSeed sets Options.Source to NewSource(seed).
func withSeed(seed uint64) func(*Options) {
	return func(o *Options) { o.Source = NewSource(seed) }
}

// withBounds sets the three durations of Options.
func withBounds(base, throttleBase, cap time.Duration) func(*Options) {
	return func(o *Options) { o.Base, o.ThrottleBase, o.Cap = base, throttleBase, cap }
}
