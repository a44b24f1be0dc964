package jitterretry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// ErrRetryBudgetExhausted matches, with errors.Is, every *BudgetError: a
// retry refused because the client-side retry token bucket was empty.
var ErrRetryBudgetExhausted = errors.New("jitterretry: client-side retry budget exhausted")

// BudgetError reports a retry refused by the client-side retry token bucket.
// It is not an AWS throttle: the service may be healthy, but this client has
// spent its retry budget on recent failures. It wraps the operation's last
// error, matches ErrRetryBudgetExhausted with errors.Is, and matches the
// SDK's ratelimit.QuotaExceededError with errors.As, so code written for
// retry.Standard keeps working.
type BudgetError struct {
	// Available is the number of tokens left in the bucket.
	Available uint
	// Requested is the cost of the refused retry.
	Requested uint
	// Partition is the bucket's partition key; empty when not partitioned.
	Partition string
	// Err is the failed attempt's error, the one that would have been
	// retried. Nil when the bucket is used on its own as a RateLimiter.
	Err error
}

func (e *BudgetError) Error() string {
	msg := fmt.Sprintf("jitterretry: client-side retry budget exhausted (%d tokens left, %d needed)", e.Available, e.Requested)
	if e.Partition != "" {
		msg += " in partition " + e.Partition
	}
	msg += "; this is not an AWS throttle, see the README on the retry token bucket"
	if e.Err != nil {
		msg += ": last error: " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the failed attempt's error.
func (e *BudgetError) Unwrap() error { return e.Err }

// Is reports whether target is ErrRetryBudgetExhausted.
func (e *BudgetError) Is(target error) bool { return target == ErrRetryBudgetExhausted }

// As fills a *ratelimit.QuotaExceededError target with Available and
// Requested, so errors.As(err, &ratelimit.QuotaExceededError{}) matches as it
// does for the SDK's own bucket.
func (e *BudgetError) As(target any) bool {
	if q, ok := target.(*ratelimit.QuotaExceededError); ok {
		*q = ratelimit.QuotaExceededError{Available: e.Available, Requested: e.Requested}
		return true
	}
	return false
}

// GiveUpReason says why the retryer stopped retrying an operation.
type GiveUpReason uint8

const (
	// GiveUpNotRetryable: the error is not retryable.
	GiveUpNotRetryable GiveUpReason = iota + 1
	// GiveUpMaxAttempts: the operation used all its attempts.
	GiveUpMaxAttempts
	// GiveUpBudget: the client-side retry token bucket is empty.
	GiveUpBudget
	// GiveUpDeadline: the next backoff, or the wait for the send-rate
	// limiter, would end past the context's deadline.
	GiveUpDeadline
	// GiveUpCanceled: the context was cancelled or its deadline passed.
	GiveUpCanceled
)

func (r GiveUpReason) String() string {
	switch r {
	case GiveUpNotRetryable:
		return "not retryable"
	case GiveUpMaxAttempts:
		return "max attempts"
	case GiveUpBudget:
		return "retry budget exhausted"
	case GiveUpDeadline:
		return "wait past deadline"
	case GiveUpCanceled:
		return "context done"
	}
	return fmt.Sprintf("GiveUpReason(%d)", uint8(r))
}

// GiveUpError reports a retry, or with the send-rate limiter an attempt, the
// retryer refused to start because of the operation's context: its deadline
// is too close for the backoff or the limiter's wait (GiveUpDeadline), or it
// is done (GiveUpCanceled). It wraps the failed attempt's error, if there is
// one, so the real cause is never lost.
//
// With GiveUpDeadline, errors.Is(err, context.DeadlineExceeded) is true, so
// callers that handle timeouts keep working; with GiveUpCanceled it matches
// the context's own error.
type GiveUpError struct {
	// Reason is GiveUpDeadline or GiveUpCanceled.
	Reason GiveUpReason
	// Attempt is the 1-based number of the attempt that failed; 0 when the
	// send-rate limiter refused to wait before an attempt (then Err is nil:
	// the limiter does not know which operation's error slowed it down).
	Attempt int
	// Delay is the backoff, or the send-rate wait, that was refused
	// (GiveUpDeadline).
	Delay time.Duration
	// Remaining is the time that was left until the deadline (GiveUpDeadline).
	Remaining time.Duration
	// Context is the context's error (GiveUpCanceled), or nil.
	Context error
	// Err is the failed attempt's error.
	Err error
}

func (e *GiveUpError) Error() string {
	var msg string
	switch e.Reason {
	case GiveUpDeadline:
		if e.Attempt == 0 {
			msg = fmt.Sprintf("jitterretry: gave up before sending: the send-rate limiter's wait %v would end past the context deadline (%v left)",
				e.Delay, e.Remaining.Round(time.Millisecond))
			break
		}
		msg = fmt.Sprintf("jitterretry: gave up after attempt %d: backoff %v would end past the context deadline (%v left)",
			e.Attempt, e.Delay, e.Remaining.Round(time.Millisecond))
	case GiveUpCanceled:
		msg = fmt.Sprintf("jitterretry: gave up: context done (%v)", e.Context)
	default:
		msg = "jitterretry: gave up: " + e.Reason.String()
	}
	if e.Err != nil {
		msg += ": last error: " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the failed attempt's error.
func (e *GiveUpError) Unwrap() error { return e.Err }

// Is matches context.DeadlineExceeded for GiveUpDeadline, and the context's
// error for GiveUpCanceled.
func (e *GiveUpError) Is(target error) bool {
	switch e.Reason {
	case GiveUpDeadline:
		return target == context.DeadlineExceeded
	case GiveUpCanceled:
		return e.Context != nil && target == e.Context
	}
	return false
}

// MaxAttemptsError is returned by Do when the loop used all its attempts. It
// wraps the last error and matches the SDK's *retry.MaxAttemptsError with
// errors.As. (Under the SDK's retry middleware, the middleware itself returns
// *retry.MaxAttemptsError.)
type MaxAttemptsError struct {
	// Attempt is the number of attempts made.
	Attempt int
	// Err is the last attempt's error.
	Err error
}

func (e *MaxAttemptsError) Error() string {
	return fmt.Sprintf("jitterretry: exceeded maximum number of attempts, %d: %v", e.Attempt, e.Err)
}

// Unwrap returns the last attempt's error.
func (e *MaxAttemptsError) Unwrap() error { return e.Err }

// As fills a **retry.MaxAttemptsError target.
func (e *MaxAttemptsError) As(target any) bool {
	if t, ok := target.(**retry.MaxAttemptsError); ok {
		*t = &retry.MaxAttemptsError{Attempt: e.Attempt, Err: e.Err}
		return true
	}
	return false
}

// OptionsError reports Options that cannot be used. New returns a Retryer
// that fails every operation with it; Err reports it at construction.
type OptionsError struct {
	// Option is the name of the offending Options field.
	Option string
	// Reason says what is wrong and what to use instead.
	Reason string
	// Err is an underlying error, such as a *delayers.OptionError.
	Err error
}

func (e *OptionsError) Error() string {
	msg := "jitterretry: invalid " + e.Option + ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *OptionsError) Unwrap() error { return e.Err }
