package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithymiddle "github.com/aws/smithy-go/middleware"
)

// The SDK's retry middleware tells a retryer which attempt it is through a
// context value that only the middleware can set: retry.Standard's
// GetAttemptToken reads it to give the first attempt its +1 token and later
// attempts nothing. To drive a retryer exactly as the middleware does, the
// throttled scenario passes, for attempt n, a context minted by the SDK's own
// retry.Attempt middleware for its attempt n. Minting runs that middleware
// once, with a stub retryer that always retries after zero delay and a next
// handler that records each attempt's context and fails.

var (
	attemptCtxMu sync.Mutex
	attemptCtxs  []context.Context // attemptCtxs[n-1] is attempt n's context
)

// attemptContexts returns the middleware's contexts for attempts 1..n. The
// slice is shared and must not be modified.
func attemptContexts(n int) ([]context.Context, error) {
	attemptCtxMu.Lock()
	defer attemptCtxMu.Unlock()
	if n <= len(attemptCtxs) {
		return attemptCtxs[:n], nil
	}
	want := max(n, 2*len(attemptCtxs), 16)
	var got []context.Context
	next := smithymiddle.FinalizeHandlerFunc(func(ctx context.Context, _ smithymiddle.FinalizeInput) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
		got = append(got, ctx)
		return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, errMintAttempt
	})
	m := retry.NewAttemptMiddleware(mintRetryer{attempts: want}, func(r interface{}) interface{} { return r },
		func(a *retry.Attempt) { a.DisableClockSkewCorrection = true })
	_, _, err := m.HandleFinalize(context.Background(), smithymiddle.FinalizeInput{}, next)
	if !errors.Is(err, errMintAttempt) || len(got) != want {
		return nil, fmt.Errorf("sim: minting attempt contexts: got %d of %d, err %v", len(got), want, err)
	}
	attemptCtxs = got
	return attemptCtxs[:n], nil
}

var errMintAttempt = errors.New("sim: minting attempt context")

// mintRetryer retries every error, attempts times, without delay or tokens.
type mintRetryer struct{ attempts int }

var _ aws.RetryerV2 = mintRetryer{}

func (r mintRetryer) IsErrorRetryable(error) bool                  { return true }
func (r mintRetryer) MaxAttempts() int                             { return r.attempts }
func (r mintRetryer) RetryDelay(int, error) (time.Duration, error) { return 0, nil }
func (r mintRetryer) GetRetryToken(context.Context, error) (func(error) error, error) {
	return nopRelease, nil
}
func (r mintRetryer) GetInitialToken() func(error) error { return nopRelease }
func (r mintRetryer) GetAttemptToken(context.Context) (func(error) error, error) {
	return nopRelease, nil
}

func nopRelease(error) error { return nil }
