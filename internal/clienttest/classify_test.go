package clienttest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"

	"github.com/jitterretry/jitterretry"
)

// asResponse wraps err as the retry middleware sees a failed response: an
// API error inside the SDK's and smithy's response errors.
func asResponse(status int, err error) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
		RequestID:     "req",
	}
}

func apiErr(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }

func sendErr(err error) error { return &smithyhttp.RequestSendError{Err: err} }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestClassificationAgreesWithSDK compares Classify with the SDK's
// retry.DefaultRetryables and retry.DefaultThrottles on errors as the retry
// middleware sees them. Conflicts, a class the SDK does not have, are not
// retryable to it, and to the Retryer under its middleware: only Do retries
// them.
func TestClassificationAgreesWithSDK(t *testing.T) {
	corpus := map[string]error{
		"nil":                       nil,
		"plain error":               errors.New("boom"),
		"500 internal server error": asResponse(500, &types.InternalServerError{Message: aws.String("x")}),
		"502":                       asResponse(502, apiErr("BadGateway")),
		"503":                       asResponse(503, apiErr("ServiceUnavailable")),
		"504":                       asResponse(504, apiErr("GatewayTimeout")),
		"400 validation":            asResponse(400, apiErr("ValidationException")),
		"429 unmodelled":            asResponse(429, apiErr("")),
		"429 modelled non-throttle": asResponse(429, &types.ResourceInUseException{Message: aws.String("x")}),
		"conditional check failed":  asResponse(400, &types.ConditionalCheckFailedException{Message: aws.String("x")}),
		"transaction conflict":      asResponse(400, &types.TransactionConflictException{Message: aws.String("x")}),
		"transaction canceled":      asResponse(400, &types.TransactionCanceledException{Message: aws.String("x")}),
		"PTEE modelled":             asResponse(400, &types.ProvisionedThroughputExceededException{Message: aws.String("x")}),
		"request limit exceeded":    asResponse(400, &types.RequestLimitExceeded{Message: aws.String("x")}),
		"throttling generic":        asResponse(400, apiErr("ThrottlingException")),
		"connection reset":          sendErr(&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}),
		"connection refused":        sendErr(&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}),
		"closed network connection": &smithy.DeserializationError{Err: fmt.Errorf("read body: %w", net.ErrClosed)},
		"reset while reading body":  &smithy.DeserializationError{Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}},
		"unexpected EOF in body":    &smithy.DeserializationError{Err: io.ErrUnexpectedEOF},
		"dns not found":             sendErr(&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}}}),
		"dns not found bare":        &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true},
		"dns temporary":             &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true},
		"timeout":                   sendErr(&url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}),
		"bare timeout":              timeoutErr{},
		"aws request canceled":      &aws.RequestCanceledError{Err: context.Canceled},
		"smithy canceled":           &smithy.CanceledError{Err: context.Canceled},
		"deadline exceeded in send": sendErr(context.DeadlineExceeded),
		"joined throttle":           errors.Join(errors.New("other"), asResponse(400, apiErr("SlowDown"))),
		"request timeout code":      asResponse(400, apiErr("RequestTimeout")),
	}
	// Deliberate differences, each with its reason.
	differ := map[string]jitterretry.ErrorClass{
		// A bare context.Canceled inside a send error is a caller that gave
		// up; the SDK retries it as a connection error and then fails to get
		// a token; we stop at once.
		"bare canceled in send": jitterretry.ClassNotRetryable,
		// The SDK retries any error whose message mentions "connection
		// reset"; we look for the syscall error itself, so a service message
		// that merely says so is not retried.
		"400 whose message mentions connection reset": jitterretry.ClassNotRetryable,
	}
	// Not retryable to the SDK; ClassConflict, for Do.
	conflicts := map[string]bool{"conditional check failed": true, "transaction conflict": true}
	corpus["bare canceled in send"] = sendErr(context.Canceled)
	corpus["400 whose message mentions connection reset"] = asResponse(400, &smithy.GenericAPIError{Code: "ValidationException", Message: "upstream connection reset"})

	sdkRetryable := retry.IsErrorRetryables(retry.DefaultRetryables)
	sdkThrottle := retry.IsErrorThrottles(retry.DefaultThrottles)
	r := jitterretry.New()
	for name, err := range corpus {
		t.Run(name, func(t *testing.T) {
			want := jitterretry.ClassNotRetryable
			if sdkRetryable.IsErrorRetryable(err).Bool() {
				want = jitterretry.ClassTransient
				if sdkThrottle.IsErrorThrottle(err).Bool() {
					want = jitterretry.ClassThrottle
				}
			}
			got := jitterretry.Classify(err)
			deliberate, differs := differ[name]
			if differs {
				assert.NotEqual(t, want, got, "expect this case to differ from the SDK")
				assert.Equal(t, deliberate, got)
				return
			}
			assert.Equal(t, want != jitterretry.ClassNotRetryable, r.IsErrorRetryable(err),
				"expect the Retryer to retry what the SDK retries")
			if conflicts[name] {
				assert.Equal(t, jitterretry.ClassNotRetryable, want, "expect the SDK not to retry a conflict")
				assert.Equal(t, jitterretry.ClassConflict, got)
				return
			}
			assert.Equal(t, want, got, "expect the SDK's class %v, got %v", want, got)
		})
	}
	// The corpus must exercise every class, or agreement proves little.
	seen := map[jitterretry.ErrorClass]int{}
	for _, err := range corpus {
		seen[jitterretry.Classify(err)]++
	}
	assert.Len(t, seen, 4)
}
