package jitterretry

// This file owns the per-attempt timeout: an SDK middleware that gives each
// attempt of an operation its own deadline, so that a stalled connection is
// cut and retried instead of eating the whole operation's deadline.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// ErrAttemptTimeout matches, with errors.Is, the error of an attempt cut by
// AttemptTimeout: at its own timeout, or at the operation's deadline less
// the reserve for the retry decision, whichever came first. The error's
// message says which.
var ErrAttemptTimeout = errors.New("jitterretry: attempt timed out")

// attemptReserve is what an attempt leaves of the operation's deadline, so
// that the retry decision after a cut attempt still runs before the
// deadline and reports the cause, rather than the caller seeing only its
// context's error.
const attemptReserve = 5 * time.Millisecond

// errAttemptCut is the cause of an attempt's context that AttemptTimeout
// ended, told from its caller's context ending.
var errAttemptCut = errors.New("jitterretry: attempt cut")

// AttemptTimeout returns an SDK API option that gives every attempt of an
// operation at most d: the smaller of d and what is left of the operation's
// context deadline less a 5 ms reserve for the retry decision (half of what
// is left, when that is less than twice the reserve). An attempt
// still running then is cut, and fails with an error that matches
// ErrAttemptTimeout and context.DeadlineExceeded, is retryable under the
// SDK's rules for timeouts (and the retryer's) when cut at d, and says which
// timeout it was. A cut at the deadline less the reserve is not retryable
// under the SDK's rules (no retry fits; retry.NewStandard() lost a retry's
// tokens to each), and this module's Retryer refuses its retry with a
// GiveUpDeadline that wraps it. An attempt that had the service's answer (an API error) when its
// time ran out keeps that answer as its error. An operation whose own
// context ends first fails as before, with the context's error.
//
// Add it to a client's Options.APIOptions (dynamodb.NewFromConfig(cfg,
// func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, ...) })),
// not with config.WithAPIOptions: every client made from the config gets
// them, those that fetch credentials too (an STS client made from it for
// AssumeRole; those the config builds for a profile's role, a web identity,
// SSO, IMDS, ECS), whose attempts it would cut at d as well. It is a
// middleware at the end of the Finalize step,
// where the request is signed and about to be sent, within each attempt
// of the SDK's retry middleware, so it works with any retryer. It bounds
// the send, the wait for the answer and the reading of it, not what the
// attempt does before: fetching credentials (a cold client's AssumeRole,
// SSO or IMDS fetch, which the operation's context bounds), resolving or
// discovering the endpoint, signing. A middleware added to the Finalize
// step after it (a later API option's) runs within its time. Every service
// client's operation stack has that middleware; a presign client's has
// not (its stacks send nothing, they sign a request for someone else to
// send), and there the option adds nothing: options given with
// config.WithAPIOptions reach the presign clients made from that config
// too, and an error there failed every presign (STS's
// PresignGetCallerIdentity, which EKS tokens use; S3's presigned URLs).
// Added again,
// for one call (dynamodb.WithAPIOptions, after the client's), it replaces
// the earlier one, so a call can have longer or shorter than the client's
// default. A d of zero or less adds nothing (and leaves an earlier one). A
// d shorter than a round trip cuts every attempt before its answer (1 µs:
// four attempts of the DynamoDB preset, none answered, after three
// backoffs drawn from windows of 25, 50 and 100 ms, some 90 ms on
// average): give it a few times the operation's usual latency.
//
// The attempt's context ends when the attempt fails; after a success, when
// the HTTP response body is closed (a middleware in the Deserialize step,
// next to the transport, watches it): at once for an operation whose
// response the SDK reads in the attempt, or that has no response body
// (http.NoBody, a transport of its own), when the caller closes it for a
// body streamed to the caller, whose reads d (or the caller's context)
// still bounds. A streamed body never closed keeps its attempt's context,
// attached to the caller's, until d or the caller's context ends. It is
// for operations whose response is read in the attempt (DynamoDB, SQS,
// most APIs), not for long downloads; a long poll (SQS ReceiveMessage
// with WaitTimeSeconds) needs a d of its own, longer than its wait.
func AttemptTimeout(d time.Duration) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		if d <= 0 {
			return nil
		}
		if stack == nil {
			return errors.New("jitterretry.AttemptTimeout: nil stack")
		}
		m := attemptTimeout{d: d}
		if _, ok := stack.Finalize.Get(m.ID()); ok {
			_, err := stack.Finalize.Swap(m.ID(), m)
			return err
		}
		if _, ok := stack.Finalize.Get(retryMiddlewareID); !ok {
			return nil // no attempts to time: a presign stack, say
		}
		// Last in the Finalize step, after the credentials, the endpoint
		// (and its discovery) and the signature: a cold client's
		// credential fetch (AssumeRole, SSO, IMDS), which no retry speeds
		// up, goes on in the SDK's cache whatever the attempt does, and
		// cut by the attempt's timeout it cost every attempt and 42
		// tokens without a request sent (an outside review). The
		// operation's middlewares are all in place when API options run.
		if err := stack.Finalize.Add(m, middleware.After); err != nil {
			return err
		}
		// Last in the Deserialize step, next to the transport, so that the
		// operation's deserializers and the caller get the watched body.
		if _, ok := stack.Deserialize.Get(bodyWatch{}.ID()); ok {
			return nil
		}
		return stack.Deserialize.Add(bodyWatch{}, middleware.After)
	}
}

// retryMiddlewareID is the ID of the SDK's retry middleware
// (retry.Attempt), in the Finalize step of every service client's stack.
const retryMiddlewareID = "Retry"

type attemptTimeout struct{ d time.Duration }

func (attemptTimeout) ID() string { return "jitterretry.AttemptTimeout" }

func (m attemptTimeout) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	limit, byDeadline, reserve := m.d, false, time.Duration(0)
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		// With less than twice the reserve left (a retry whose backoff's
		// sleep ran late), half of what is left, so that the cut still
		// comes first and names the cause.
		left := time.Until(deadline)
		if byLeft := max(left-attemptReserve, left/2); byLeft < limit {
			limit, byDeadline, reserve = byLeft, true, left-byLeft
		}
	}
	if limit <= 0 {
		return next.HandleFinalize(ctx, in) // the deadline has passed: the caller's context decides
	}
	// The context package runs the cut: its timer ends the attempt's
	// context at the limit, with errAttemptCut as the cause, and stops
	// when ctx ends first.
	attemptCtx, cancel := context.WithDeadlineCause(ctx, time.Now().Add(limit), errAttemptCut)
	succeeded := false
	defer func() {
		if !succeeded {
			cancel()
		}
	}()
	out, md, err := next.HandleFinalize(attemptCtx, in)
	body := takeWatchedBody(&md)
	if err == nil {
		succeeded = true
		// Ended when the response body is closed: at once for an
		// operation whose deserializer read it in the attempt (DynamoDB's
		// all do), when the caller closes it for one streamed to the
		// caller, whose reads the limit still bounds. Cancelling it here
		// would cut that read; leaving it to its timer kept it, and the
		// operation's input it reaches, attached to a ctx that lives on
		// for the whole of d (300 PutItems of 64 KiB at d = 1 h: 20 MB).
		if body != nil {
			body.endOnClose(cancel)
		} else {
			cancel() // no body to read later
		}
		return out, md, nil
	}
	// The cut comes before ctx's deadline (limit leaves at least half of
	// what was left): an attempt that ctx's deadline ended was cut too.
	// On a machine that wakes late both timers are overdue and either may
	// run first (make test beside two others, twice in one run: the
	// attempt's "canceled, context deadline exceeded" went to the caller,
	// neither retried nor refused, where the retryer's refusal with the
	// cause comes when the cut runs first).
	cut := context.Cause(attemptCtx) == errAttemptCut || hasDeadline && ctx.Err() == context.DeadlineExceeded
	// The cut decides, not ctx: when the transport takes longer than the
	// reserve to return after the cut, ctx's deadline has passed too, and
	// the SDK's error for the cut would then say "canceled", hiding the
	// deadline. An answer the attempt had when the timer fired is the
	// attempt's outcome, though: the cut interrupted nothing.
	if cut && !answered(err) {
		err = &attemptTimeoutError{timeout: limit, byDeadline: byDeadline, reserve: reserve, cause: err}
	}
	return out, md, err
}

// attemptTimeoutError is an attempt cut by AttemptTimeout. It replaces the
// SDK's error for the cut, a *smithy.CanceledError that no retryer retries,
// and keeps it only in the message.
type attemptTimeoutError struct {
	timeout    time.Duration
	byDeadline bool          // the operation's deadline, less reserve, set the limit
	reserve    time.Duration // what the limit left of the operation's deadline
	cause      error
}

func (e *attemptTimeoutError) Error() string {
	which := "the attempt timeout"
	if e.byDeadline {
		which = fmt.Sprintf("the operation's deadline less %v for the retry decision", readable(e.reserve))
	}
	return fmt.Sprintf("jitterretry: attempt cut after %v, at %s: %v", readable(e.timeout), which, e.cause)
}

// Unwrap returns context.DeadlineExceeded, not the SDK's cancellation
// error, so that the SDK's rules see a timeout.
func (e *attemptTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Is matches ErrAttemptTimeout.
func (e *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }

// Timeout and RetryableError make the SDK's rules retry an attempt cut at
// d. A cut at the deadline less the reserve leaves no time for a retry: to
// them it is not retryable. Retryable, it cost retry.NewStandard() a retry's
// tokens that its middleware, its sleep cut by the deadline, never gave
// back (helper-257: 490 of 500 held after 40 slow calls). This module's
// retryer reads the cut itself (see classifier), and refuses such a
// retry for the deadline, with the cut as its cause.
func (e *attemptTimeoutError) Timeout() bool        { return true }
func (e *attemptTimeoutError) RetryableError() bool { return !e.byDeadline }

// wasCut reports whether err is an attempt AttemptTimeout cut, at its own
// limit or at the operation's deadline less attemptReserve. It walks the
// chain with inChain rather than call errors.As, whose As calls could
// dereference a nil pointer.
func wasCut(err error) bool {
	return inChain(err, func(e error) bool {
		_, ok := e.(*attemptTimeoutError)
		return ok
	})
}

// endedByDeadline reports whether an attempt under the operation's context
// ctx, which ended with err, was ended by ctx's deadline: ctx's own timer,
// or AttemptTimeout's cut at that deadline less attemptReserve. A
// cancelled context or a cut at AttemptTimeout's own limit is not.
func endedByDeadline(ctx context.Context, err error) bool {
	return ctx.Err() == context.DeadlineExceeded || inChain(err, func(e error) bool {
		c, ok := e.(*attemptTimeoutError)
		return ok && c.byDeadline
	})
}

// answered reports whether err holds the service's answer (a smithy API
// error), which came whole whenever the attempt's context ended.
func answered(err error) bool {
	return inChain(err, func(e error) bool {
		_, ok := e.(smithy.APIError)
		return ok
	})
}
