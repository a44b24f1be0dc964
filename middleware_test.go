package jitterretry_test

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/require"
)

// The library's own tests drive the SDK's retry middleware itself
// (retry.NewAttemptMiddleware, v1.48.0), with each attempt answered by the
// error a service client's deserialiser would give it. Tests through a real
// dynamodb.Client over HTTP live in internal/clienttest.

// asResponse wraps apiErr as the retry middleware sees a failed response: an
// API error inside the SDK's and smithy's response errors, with the HTTP
// status and headers.
func asResponse(status int, apiErr error, header ...string) error {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	resp := &http.Response{StatusCode: status, Header: h}
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: apiErr},
		RequestID:     "req",
	}
}

// modeled is a modelled API error, as a service's generated error types are
// (a smithy.APIError that is not a *smithy.GenericAPIError).
type modeled struct{ code string }

func (e *modeled) Error() string                 { return e.code + ": scripted" }
func (e *modeled) ErrorCode() string             { return e.code }
func (e *modeled) ErrorMessage() string          { return "scripted" }
func (e *modeled) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

func throttleErr() error   { return asResponse(400, &modeled{"ProvisionedThroughputExceededException"}) }
func serverErr() error     { return asResponse(500, &modeled{"InternalServerError"}) }
func validationErr() error { return asResponse(400, &modeled{"ValidationException"}) }
func conflictErr() error   { return asResponse(400, &modeled{"ConditionalCheckFailedException"}) }

// retryAfter is a throttle whose response carries x-amz-retry-after ms.
func retryAfter(ms int64) error {
	return asResponse(400, &modeled{"ThrottlingException"}, "X-Amz-Retry-After", strconv.FormatInt(ms, 10))
}

// operation runs one operation through the SDK's retry middleware with
// retryer r. answer gives each attempt's result (nil for success) by its
// 1-based number. It returns the attempts made and the operation's error.
func operation(ctx context.Context, r aws.Retryer, answer func(attempt int) error) (int, error) {
	m := retry.NewAttemptMiddleware(r, func(in any) any { return in })
	var mu sync.Mutex
	attempts := 0
	next := smithymiddle.FinalizeHandlerFunc(func(context.Context, smithymiddle.FinalizeInput) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, answer(n)
	})
	in := smithymiddle.FinalizeInput{Request: &smithyhttp.Request{Request: &http.Request{Header: http.Header{}}}}
	_, _, err := m.HandleFinalize(ctx, in, next)
	mu.Lock()
	defer mu.Unlock()
	return attempts, err
}

// script answers attempts in order, then repeats its last answer.
func script(answers ...func() error) func(int) error {
	return func(n int) error {
		f := answers[min(n, len(answers))-1]
		if f == nil {
			return nil
		}
		return f()
	}
}

// ok is the answer of a successful attempt.
var ok func() error

// fail returns an answer that is always err itself: a shared error value.
func fail(err error) func() error { return func() error { return err } }

func requireAttempts(t *testing.T, want, got int, err error) {
	t.Helper()
	if want != got {
		t.Fatalf("expect %d attempts, got %d (err %v)", want, got, err)
	}
}

func smithyGeneric(code string) smithy.GenericAPIError {
	return smithy.GenericAPIError{Code: code, Message: "scripted"}
}

func itoa(i int) string { return strconv.Itoa(i) }

// runtimeHeap is the live heap after a collection.
type runtimeHeap struct{ inUse int64 }

func (h *runtimeHeap) read() {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h.inUse = int64(m.HeapInuse)
}

// spendTokens takes n tokens (a multiple of the throttle cost, 5) from r's
// bucket with throttles' retries that are never released.
func spendTokens(t *testing.T, r aws.RetryerV2, n int) {
	t.Helper()
	for range n / 5 {
		_, err := r.GetRetryToken(context.Background(), throttleErr())
		require.NoError(t, err)
	}
}

// concurrently runs fn(0) to fn(n-1) on n goroutines and waits for them
// all.
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
