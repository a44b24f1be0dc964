package jitterretry

// This file owns the package's error types: GiveUpError, the one error for
// every retry the retryer refuses, and OptionsError, for options it cannot
// use.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// ErrRetryBudgetExhausted matches, with errors.Is, a *GiveUpError whose
// Reason is GiveUpBudget: a retry refused because the client-side retry token
// bucket held too few tokens.
var ErrRetryBudgetExhausted = errors.New("jitterretry: retry quota exceeded")

// GiveUpReason says why the retryer stopped retrying.
type GiveUpReason uint8

const (
	// GiveUpNotRetryable: the error is not retryable. Reported to OnGiveUp
	// only; the operation returns the error itself. Conflicts under the
	// SDK's middleware are not reported: Do retries them.
	GiveUpNotRetryable GiveUpReason = iota + 1
	// GiveUpMaxAttempts: the loop used all its attempts (Do). Under the SDK's
	// retry middleware the middleware itself returns *retry.MaxAttemptsError
	// and reports nothing; a Do loop whose fn returns that error reports it
	// with this reason, and returns fn's error.
	GiveUpMaxAttempts
	// GiveUpBudget: the client-side retry token bucket held fewer tokens
	// than the retry costs.
	GiveUpBudget
	// GiveUpDeadline: the backoff plus the deadline margin, or the wait for
	// the send-rate limiter plus the attempt's time, would end past the
	// context's deadline. It
	// matches context.DeadlineExceeded and, as the SDK's cancelled sleep
	// does, *aws.RequestCanceledError; the context itself has not ended
	// yet (its Err is nil), since the retryer refuses before it does.
	GiveUpDeadline
	// GiveUpCanceled: the context was done: cancelled, or its deadline
	// passed before the retry was decided (errors.Is(err,
	// context.DeadlineExceeded) holds then, as for GiveUpDeadline).
	GiveUpCanceled
	// GiveUpConflicts: Do's conflict budget (DoOptions.MaxConflicts) ran out.
	GiveUpConflicts
)

// String returns the reason as a short identifier, also used as the value of
// the "reason" attribute of the retryer's metrics: "not_retryable",
// "max_attempts", "budget", "deadline", "canceled" or "conflicts".
func (r GiveUpReason) String() string {
	switch r {
	case GiveUpNotRetryable:
		return "not_retryable"
	case GiveUpMaxAttempts:
		return "max_attempts"
	case GiveUpBudget:
		return "budget"
	case GiveUpDeadline:
		return "deadline"
	case GiveUpCanceled:
		return "canceled"
	case GiveUpConflicts:
		return "conflicts"
	}
	return fmt.Sprintf("GiveUpReason(%d)", uint8(r))
}

// GiveUpError reports a retry the retryer refused, and why. It wraps the
// failed attempt's error, so errors.As still finds the service's own error
// (a *types.ProvisionedThroughputExceededException, say) through it.
//
// It matches, by Reason:
//   - GiveUpBudget: errors.Is(err, ErrRetryBudgetExhausted), and errors.As
//     to the SDK's ratelimit.QuotaExceededError, filled with the tokens
//     available and requested, as the SDK's own bucket reports them; when
//     a custom Options.RateLimiter refused, errors.Is and errors.As also
//     reach its error (after the failed attempt's; Unwrap returns only
//     the latter);
//   - GiveUpDeadline: errors.Is(err, context.DeadlineExceeded), and errors.As
//     to a net.Error (or any interface context.DeadlineExceeded has) whose
//     Timeout() is true, so code that handles timeouts keeps working;
//   - GiveUpCanceled: errors.Is with the context's own error (and, as every
//     reason, with what the failed attempt's error matches: after an
//     attempt AttemptTimeout cut, context.DeadlineExceeded too, whatever
//     ended the context; test for context.Canceled first, or read Reason);
//   - GiveUpMaxAttempts: errors.As to the SDK's *retry.MaxAttemptsError.
type GiveUpError struct {
	// Reason says why the retry was refused. The retryer always sets it;
	// only a GiveUpError built by hand has the zero value, which matches
	// nothing and prints as "gave up (no reason set)".
	Reason GiveUpReason

	// Attempt is the 1-based number of the attempt that failed. Under the
	// SDK's retry middleware it is set only for RetryDelay's refusals (a
	// GiveUpDeadline: the drawn backoff would end past the deadline; or a
	// GiveUpCanceled after its hold) and for the send-rate limiter's
	// refusal of a retry whose failed attempt it knows (see Err); it is 0
	// for every other refusal there, GetRetryToken's (which is not told the
	// number) and the limiter's of a first attempt included.
	Attempt int

	// Partition is the partition key of the retry token bucket (see
	// Options.PartitionKey); "" when not partitioned.
	Partition string

	// Delay is the refused backoff, after the service's x-amz-retry-after
	// hint, or the refused wait of the send-rate limiter (GiveUpDeadline).
	// Refused by GetRetryToken, before the backoff is drawn, it is the
	// shortest wait the hint allows. The message also says how much time
	// was left.
	Delay time.Duration

	// Err is the failed attempt's error. For a refusal of the send-rate
	// limiter's wait, it is the error of the attempt the retry follows
	// when RetryDelay scheduled the retry, its backoff had ended, and no
	// other retry of the same context's Done channel had ended its backoff
	// too (operations sharing a context share that channel, by which and
	// by the backoff's end the limiter knows the retry; of two due at once,
	// either may ask first, and another operation's first attempt asking
	// between the end of the backoff and the retry's own attempt takes the
	// retry's place and cause); nil otherwise (a first attempt's wait, a Do
	// loop's retry, a retry not known so).
	Err error

	remaining time.Duration // GiveUpDeadline: time left until the deadline
	margin    time.Duration // GiveUpDeadline: the time kept for the attempt after the wait
	cutMargin bool          // GiveUpDeadline: margin is as long as the attempt AttemptTimeout cut at the deadline ran
	sendWait  bool          // GiveUpDeadline: the refused wait is the send-rate limiter's (Delay; 0 for a turn that came too late)
	// GiveUpDeadline of a retry: drawn, the backoff was drawn (RetryDelay),
	// and backoff is what it was before the service's x-amz-retry-after;
	// not drawn (GetRetryToken), Delay is the shortest wait the hint allows.
	drawn   bool
	backoff time.Duration
	// GiveUpDeadline of a Do loop's conflict: the backoff would have been
	// drawn again within the time left before the margin, had there been
	// any, so the margin, not the backoff, refused it.
	fits                 bool
	floored              bool          // GiveUpDeadline of a Do loop's conflict whose wait was the throttle floor: held as after a throttle
	waited               time.Duration // GiveUpBudget: the backoff waited before refusing; a limiter's GiveUpDeadline: the time held in its queue; a throttle's GiveUpDeadline: the hold before the refusal
	available, requested uint          // GiveUpBudget
	limiterErr           error         // GiveUpBudget: a custom RateLimiter's refusal
	ctxErr               error         // GiveUpCanceled: the context's error
	// counted is what a Do loop's budget counted when it ran out, which
	// the message (and, for GiveUpMaxAttempts, *retry.MaxAttemptsError)
	// gives: for GiveUpMaxAttempts the failures MaxAttempts counts (fn's
	// transient and throttling errors, not its conflicts), for
	// GiveUpConflicts the conflicts MaxConflicts counts, the last one
	// included (not the failures between them); 0 elsewhere, where they
	// give Attempt.
	counted int
	// notRetried is set by a Do loop that did not retry Err as it is (not
	// retryable, or a request the caller's context ended), and so returns
	// Err itself rather than this error.
	notRetried bool
	// joined is set when the SDK's middleware joins this error with Err:
	// the message then leaves Err out, so that the cause is printed once.
	joined bool
}

// canceledGiveUp returns the GiveUpError of an operation whose context
// ended (ctxErr) after attempt attempts in partition key, its last error
// opErr; joined as for GiveUpError.joined.
func canceledGiveUp(attempt int, key string, opErr, ctxErr error, joined bool) *GiveUpError {
	return &GiveUpError{Reason: GiveUpCanceled, Attempt: attempt, Partition: key, Err: opErr, ctxErr: ctxErr, joined: joined}
}

// Error describes the refusal and, unless the SDK's middleware prints it
// already, the failed attempt's error. A nil *GiveUpError (a typed nil in an
// error interface) prints as such rather than panic.
func (e *GiveUpError) Error() string {
	if e == nil {
		return "jitterretry: <nil *GiveUpError>"
	}
	var msg string
	switch e.Reason {
	case GiveUpBudget:
		if e.limiterErr != nil {
			msg = "jitterretry: failed to get rate limit token, " + errorText(e.limiterErr)
			break
		}
		msg = fmt.Sprintf("jitterretry: retry quota exceeded, %d available, %d requested", e.available, e.requested)
		if e.Partition != "" {
			msg += " in partition " + e.Partition
		}
		msg += " (client-side retry budget, not an AWS throttle)"
	case GiveUpDeadline:
		left := "no time left"
		if e.remaining > 0 {
			left = fmt.Sprintf("%v left", readable(e.remaining))
		}
		switch {
		case e.sendWait && e.waited > 0:
			left += fmt.Sprintf(", after %v held in the send queue", readable(e.waited))
		case e.waited > 0 && e.floored:
			// The SDK retries no conflict: the hold is the throttle's.
			left += fmt.Sprintf("; held %v before refusing, as after a throttle", readable(e.waited))
		case e.waited > 0:
			left += fmt.Sprintf("; held %v before refusing, as the SDK's sleep would", readable(e.waited))
		}
		if what := e.deadlineWhat(); what != "" {
			msg = fmt.Sprintf("jitterretry: gave up: %s would end past the context deadline (%s)", what, left)
		} else {
			msg = "jitterretry: gave up: no time left before the context deadline for a retry"
		}
	case GiveUpCanceled:
		msg = "jitterretry: gave up: context done"
		if e.ctxErr != nil {
			msg += " (" + errorText(e.ctxErr) + ")"
		}
	case GiveUpMaxAttempts:
		msg = fmt.Sprintf("jitterretry: exceeded maximum number of attempts, %d", e.attempts())
	case GiveUpConflicts:
		n, conflicts := e.attempts(), "conflicts"
		if n == 1 {
			conflicts = "conflict" // MaxConflicts 0: the first conflict
		}
		msg = fmt.Sprintf("jitterretry: conflict budget exhausted after %d %s", n, conflicts)
	case 0:
		msg = "jitterretry: gave up (no reason set)" // a GiveUpError built by hand
	default:
		msg = "jitterretry: gave up: " + e.Reason.String()
	}
	if e.Err != nil && !e.joined {
		msg += ": " + errorText(e.Err)
	}
	return msg
}

// errorText returns err's message; "<nil T>" for a nil pointer of type T
// in the interface, whose Error may dereference it; and, when its Error
// method panics (a typed nil deeper in a join, a user's bug), a text that
// says so: the retryer reads the text of errors it did not make, and
// printing one of its own errors must not crash the caller. A join whose
// Error panics prints its elements, one per line, so that only the
// panicky one is lost, not the cause beside it.
func errorText(err error) string {
	budget := maxJoinText
	return errorTextWithin(err, &budget)
}

// maxJoinText is how many elements, all joins together, errorText prints
// one by one when joins' Error methods panic; past it, a join only says it
// panicked. It bounds the walk of a join that holds itself, or shares an
// element widely, whose text grew as its width to the power of its depth
// (94 MB for six wide and eight deep, an outside review).
const maxJoinText = 32

// errorTextWithin is errorText, printing at most *budget elements of joins
// whose Error panics, and taking those it prints from *budget.
func errorTextWithin(err error, budget *int) (text string) {
	if holdsNil(err) {
		return fmt.Sprintf("<nil %T>", err)
	}
	defer func() {
		if r := recover(); r != nil {
			if text = joinedText(err, budget); text == "" {
				text = fmt.Sprintf("<%T whose Error method panicked: %s>", err, panicText(r))
			}
		}
	}()
	return err.Error()
}

// panicText prints a recovered panic's value, or only its type when
// printing it panics too: fmt recovers a panic in the value's Error or
// String method, but re-raises one met while printing that panic's own
// value (an Error method that panics with an error whose Error panics).
func panicText(r any) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("a %T that panics when printed", r)
		}
	}()
	return fmt.Sprint(r)
}

// joinedText returns the texts of a join's elements (of an error with an
// Unwrap() []error method) one per line, as errors.Join prints them, the
// last line saying so when *budget ran out before the end; "" when err is
// no join, *budget is spent, or its Unwrap panics too.
func joinedText(err error, budget *int) (text string) {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || *budget <= 0 {
		return ""
	}
	defer func() {
		if recover() != nil {
			text = ""
		}
	}()
	var texts []string
	for _, e := range j.Unwrap() {
		if e == nil {
			continue
		}
		if *budget <= 0 {
			texts = append(texts, "<more errors, not printed>")
			break
		}
		*budget--
		texts = append(texts, errorTextWithin(e, budget))
	}
	return strings.Join(texts, "\n")
}

// deadlineWhat says what a GiveUpDeadline refused: the wait (the send-rate
// limiter's, the backoff, after the service's x-amz-retry-after when that
// changed it; before a backoff was drawn, only the hint's shortest wait),
// and the margin kept for the attempt after it when the wait alone fits or
// is a conflict backoff Do fits into the time left (an outside review
// read "backoff 20s would end past the context deadline (6ms left)" for a
// conflict that a margin of 0 would have retried); "" when there was
// neither.
func (e *GiveUpError) deadlineWhat() string {
	var what string
	switch {
	case e.sendWait:
		what = fmt.Sprintf("send-rate wait %v", readable(e.Delay))
	case e.drawn && e.Delay != e.backoff:
		what = fmt.Sprintf("backoff %v, %v after the service's x-amz-retry-after,", readable(e.backoff), readable(e.Delay))
	case e.drawn:
		what = fmt.Sprintf("backoff %v", readable(e.Delay))
	case e.Delay > 0:
		what = fmt.Sprintf("the service's x-amz-retry-after (a wait of %v at least)", readable(e.Delay))
	case e.margin > 0:
		return fmt.Sprintf("%v kept for the attempt after the backoff%s", readable(e.margin), e.marginSource())
	default:
		return "" // no wait and no margin: the deadline is here
	}
	if e.margin > 0 && (e.Delay < e.remaining || e.fits && e.remaining > 0) {
		// The wait alone would fit, or would have been fitted into the
		// time left: say what does not.
		what = strings.TrimSuffix(what, ",") + fmt.Sprintf(", and %v kept for the attempt after it%s,", readable(e.margin), e.marginSource())
	}
	return what
}

// marginSource says where a margin that is not the attempt time came from.
func (e *GiveUpError) marginSource() string {
	if e.cutMargin {
		return " (as long as the attempt AttemptTimeout cut at the deadline ran)"
	}
	return ""
}

// Unwrap returns the failed attempt's error; nil for a nil *GiveUpError.
func (e *GiveUpError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is matches ErrRetryBudgetExhausted for GiveUpBudget (and what a custom
// RateLimiter's refusal matches), context.DeadlineExceeded for
// GiveUpDeadline, and the context's error for GiveUpCanceled. A nil
// *GiveUpError matches nothing.
func (e *GiveUpError) Is(target error) bool {
	if e == nil {
		return false
	}
	switch e.Reason {
	case GiveUpBudget:
		return target == ErrRetryBudgetExhausted || e.limiterErr != nil && errors.Is(e.limiterErr, target)
	case GiveUpDeadline:
		return target == context.DeadlineExceeded
	case GiveUpCanceled:
		return e.ctxErr != nil && target == e.ctxErr
	}
	return false
}

// attempts is the count a GiveUpMaxAttempts or GiveUpConflicts reports:
// what a Do loop's budget counted, or Attempt.
func (e *GiveUpError) attempts() int {
	if e.counted > 0 {
		return e.counted
	}
	return e.Attempt
}

// As fills a *ratelimit.QuotaExceededError target for GiveUpBudget (a
// custom RateLimiter's own, when its refusal holds one, and any other
// target that refusal fills), a **retry.MaxAttemptsError target for
// GiveUpMaxAttempts, and, for GiveUpCanceled and GiveUpDeadline, a target
// of the SDK's cancellation types (**aws.RequestCanceledError, or the
// interface with CanceledError() bool), wrapping the context's error, or
// context.DeadlineExceeded for a deadline the retryer saw coming (the SDK
// sleeps into it and returns that type), and then any target that
// context error fills (a net.Error, whose Timeout() is true for a
// deadline), ahead of the failed attempt's error, as in the SDK's error,
// so code written for the SDK's retry.Standard keeps working. A nil
// *GiveUpError fills nothing; nor does a target errors.As refuses itself
// (not a non-nil pointer to an interface or to an error type), and As then
// returns false.
func (e *GiveUpError) As(target any) bool {
	if e == nil {
		return false
	}
	switch t := target.(type) {
	case **aws.RequestCanceledError:
		if c := e.requestCanceled(); c != nil && t != nil {
			*t = c
			return true
		}
	case *interface{ CanceledError() bool }:
		if c := e.requestCanceled(); c != nil && t != nil {
			*t = c
			return true
		}
	case *ratelimit.QuotaExceededError:
		// A nil target, which errors.As refuses before asking, is no
		// match here either: called directly, it panicked (helper-200).
		if t == nil {
			return false
		}
		if e.Reason == GiveUpBudget && !(e.limiterErr != nil && errors.As(e.limiterErr, t)) {
			*t = ratelimit.QuotaExceededError{Available: e.available, Requested: e.requested}
		}
		return e.Reason == GiveUpBudget
	case **retry.MaxAttemptsError:
		if e.Reason == GiveUpMaxAttempts && t != nil {
			*t = &retry.MaxAttemptsError{Attempt: e.attempts(), Err: e.Err}
			return true
		}
	}
	// A refusal for the context stands for the SDK's cancellation, whose
	// chain holds the context's error: code that tells a timeout by its
	// Timeout method (a net.Error target) finds context.DeadlineExceeded,
	// as in the SDK's error, before the failed attempt's (helper-250).
	if c := e.requestCanceled(); c != nil && validTarget(target) && errors.As(c.Err, target) {
		return true
	}
	// A custom RateLimiter's refusal: its own types too, after the failed
	// attempt's, which errors.As would reach next through Unwrap.
	if e.Reason != GiveUpBudget || e.limiterErr == nil || !validTarget(target) {
		return false
	}
	return e.Err != nil && errors.As(e.Err, target) || errors.As(e.limiterErr, target)
}

// validTarget reports whether errors.As takes target: a non-nil pointer to
// an interface or to a type that implements error. errors.As checks it
// before it asks an error's As, and panics otherwise; a caller of As
// itself gets false (helper-200, helper-201).
func validTarget(target any) bool {
	v := reflect.ValueOf(target)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	elem := v.Type().Elem()
	return elem.Kind() == reflect.Interface || elem.Implements(reflect.TypeFor[error]())
}

// requestCanceled is the SDK's error for the cancelled or timed-out
// request e stands for, or nil.
func (e *GiveUpError) requestCanceled() *aws.RequestCanceledError {
	switch e.Reason {
	case GiveUpCanceled:
		return &aws.RequestCanceledError{Err: e.ctxErr}
	case GiveUpDeadline:
		return &aws.RequestCanceledError{Err: context.DeadlineExceeded}
	}
	return nil
}

// OptionsError reports options that cannot be used, by the name the caller
// wrote. New returns a Retryer whose Err reports it and whose every operation
// fails with it.
type OptionsError struct {
	// Option is the name of the field, as written in Options or DoOptions,
	// such as "BaseDelay" or "SendRate.MaxRate".
	Option string
	// Reason says what is wrong and what to use instead.
	Reason string
}

// Error names the option and the reason; a nil *OptionsError prints as
// such rather than panic.
func (e *OptionsError) Error() string {
	if e == nil {
		return "jitterretry: <nil *OptionsError>"
	}
	switch {
	case e.Option == "" && e.Reason == "":
		return "jitterretry: invalid options" // a zero OptionsError
	case e.Option == "":
		return "jitterretry: invalid options: " + e.Reason
	}
	return "jitterretry: invalid " + e.Option + ": " + e.Reason
}

// readable rounds d for a message: to the millisecond from 10 ms up, where
// more digits say nothing, to the microsecond below, and not at all under
// a microsecond, which would read 0s. A d that rounding would overflow
// (Round saturates, leaving every digit) is truncated instead.
func readable(d time.Duration) time.Duration {
	unit := time.Duration(1)
	switch {
	case d >= 10*time.Millisecond || d <= -10*time.Millisecond:
		unit = time.Millisecond
	case d >= time.Microsecond || d <= -time.Microsecond:
		unit = time.Microsecond
	}
	if r := d.Round(unit); r != math.MaxInt64 && r != math.MinInt64 {
		return r
	}
	return d.Truncate(unit)
}
