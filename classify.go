package jitterretry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ErrorClass is how the retryer classifies a failed attempt's error.
type ErrorClass uint8

const (
	// ClassNotRetryable is an error that is not retried: a client error such
	// as a ValidationException, or a cancelled context.
	ClassNotRetryable ErrorClass = iota
	// ClassTransient is a retryable error that is not a throttle: a 5xx
	// response, a dropped or refused connection, a timeout.
	ClassTransient
	// ClassThrottle is a throttling error, which retries with
	// ThrottleBaseDelay and the cheaper ThrottlingRetryCost.
	ClassThrottle
	// ClassConflict is an optimistic-concurrency conflict that the
	// application retries after reading again: a
	// ConditionalCheckFailedException or TransactionConflictException, a
	// TransactionCanceledException whose cancellation reasons are only
	// ConditionalCheckFailed, TransactionConflict and None, or an error
	// marked with Conflict, that the SDK's rules would not retry (the
	// 400 DynamoDB answers with; on a 5xx, or beside a connection
	// failure, the same code is ClassTransient, as retry.Standard retries
	// it). Only Do retries conflicts, with a budget of their own
	// (DoOptions.MaxConflicts); under the SDK's middleware they are not
	// retryable, as in retry.Standard.
	ClassConflict
)

// String returns the class as a short identifier, also used as the value of
// the "class" attribute of the retryer's metrics: "not_retryable",
// "transient", "throttle" or "conflict"; "ErrorClass(n)" for any other
// value, which Do treats as not retryable.
func (c ErrorClass) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassThrottle:
		return "throttle"
	case ClassConflict:
		return "conflict"
	case ClassNotRetryable:
		return "not_retryable"
	}
	return fmt.Sprintf("ErrorClass(%d)", uint8(c))
}

// Classify reports the class of err under the default rules: the SDK's
// retry.DefaultRetryables and retry.DefaultThrottles, with the differences
// the README lists, and ClassConflict for the conflicts Do retries. A nil
// error is ClassNotRetryable. It is the class under the SDK's middleware:
// a DynamoDB transaction cancelled for throttles only is ClassNotRetryable
// here, though Do's default classification retries it as a throttle (a
// DoOptions.Classify built on Classify loses that; build it on the
// default Do hands the option functions instead).
//
// API and HTTP errors cost one walk of the error chain and no allocation;
// connection-level errors take the SDK's errors.As checks; only an error
// that carries neither an HTTP status nor an error code, and passes no
// other check, is formatted to look for "connection reset" and "use of
// closed network connection", as the SDK does.
func Classify(err error) ErrorClass {
	return defaultClassifier.classify(err)
}

// classifier decides retryability and throttling the way the SDK's default
// checks do, by one walk over the error chain instead of a chain of errors.As
// calls and string searches.
type classifier struct {
	// codes are the error codes the rules know, looked up once per error.
	codes map[string]codeKind
	// extra checks given in Options, consulted before the built-in rules.
	retryables retry.IsErrorRetryables
	throttles  retry.IsErrorThrottles
}

// codeKind is what the rules know of an error code.
type codeKind uint8

const (
	codeRetryable codeKind = 1 << iota // retry.DefaultRetryableErrorCodes
	codeThrottle                       // retry.DefaultThrottleErrorCodes
	codeConflict                       // conflictCodes
)

// conflictCodes are the DynamoDB error codes of a lost optimistic-concurrency
// race, which Do retries after the application reads again.
var conflictCodes = []string{"ConditionalCheckFailedException", "TransactionConflictException"}

var defaultClassifier = newClassifier(nil, nil)

func newClassifier(retryables []retry.IsErrorRetryable, throttles []retry.IsErrorThrottle) *classifier {
	codes := map[string]codeKind{}
	for code := range retry.DefaultRetryableErrorCodes {
		codes[code] |= codeRetryable
	}
	for code := range retry.DefaultThrottleErrorCodes {
		codes[code] |= codeThrottle
	}
	for _, code := range conflictCodes {
		codes[code] |= codeConflict
	}
	return &classifier{
		codes:      codes,
		retryables: append(retry.IsErrorRetryables(nil), retryables...),
		throttles:  append(retry.IsErrorThrottles(nil), throttles...),
	}
}

// facts walks err's chain once and looks its error code up.
func (c *classifier) facts(err error) errorFacts {
	var f errorFacts
	var w chainWalk
	w.visit(err, 0, f.sees)
	f.typedNil, f.partial = w.typedNil, w.partial
	if w.partial {
		// An error larger than the walk reads (a batch's errors joined):
		// what it read decides, unless a cycle or a nil pointer lies past
		// it, on which the checks that follow (errors.As, Error) would
		// recurse for ever or panic.
		f.truncated, f.typedNil = scanWhole(err)
	}
	if f.code.seen {
		f.kind = c.codes[f.code.value]
	}
	return f
}

func (c *classifier) classify(err error) ErrorClass {
	return c.inspect(err).class
}

// errorInfo is what the retry decision needs to know of a failed attempt's
// error, found in one walk of its chain.
type errorInfo struct {
	class ErrorClass
	hint  retryAfter // the response's x-amz-retry-after
	// cut: how long the attempt ran before AttemptTimeout cut it at the
	// operation's deadline (less its reserve), which leaves no time for a
	// retry; 0 if it was not cut there. A cut at the attempt's own limit
	// (a stall) says nothing of the next attempt, and is not counted.
	cut time.Duration
	// stalled: AttemptTimeout cut the attempt at its own limit, so it
	// bounds the next one too, which needs its reserve before the deadline.
	stalled bool
	// forDo: not retryable here, but Do's default retries it (a
	// transaction cancelled for throttles; see doClass), as it does a
	// conflict
	forDo bool
	// ended is the caller's context error the chain shows (a cancelled
	// request, context.Canceled or context.DeadlineExceeded), nil if none
	ended error
	// outOfAttempts: the SDK's middleware ran out of attempts after this
	// many (a *retry.MaxAttemptsError is in the chain: its Attempt, at
	// least 1); 0 when it did not
	outOfAttempts int
}

// refused reports whether IsErrorRetryable reports the error as a refusal:
// one not retried, and not left to Do (a conflict, a transaction cancelled
// for throttles).
func (i errorInfo) refused() bool {
	switch i.class {
	case ClassTransient, ClassThrottle, ClassConflict:
		return false
	}
	return !i.forDo
}

// inspect returns what the retry decision needs to know of err.
func (c *classifier) inspect(err error) errorInfo {
	if err == nil {
		return errorInfo{}
	}
	f := c.facts(err)
	if f.unreadable() {
		return errorInfo{class: ClassNotRetryable} // see classOf
	}
	info := errorInfo{class: c.classOf(err, &f), hint: retryAfterOf(f.httpResponse(err)), cut: f.cut, stalled: f.stalled, ended: f.contextEnded(), outOfAttempts: f.outOfAttempts}
	if info.class == ClassNotRetryable {
		// Asked only where it tells: the caller's checks it consults
		// were asked by classOf already.
		doClass, ok := c.throttledTransactionClass(err, &f)
		info.forDo = ok && doClass != ClassNotRetryable
	}
	return info
}

func (c *classifier) classOf(err error, f *errorFacts) ErrorClass {
	if f.unreadable() {
		// A function returned a nil *T as an error, or an error whose
		// chain has a cycle: a bug of the caller's, not an answer to
		// retry; the checks below (the SDK's, a caller's) would call its
		// methods, or, with errors.As, follow the cycle for ever.
		return ClassNotRetryable
	}
	v := c.callersRetryable(c.retryables, err, f)
	if v != aws.UnknownTernary {
		if !v.Bool() {
			return ClassNotRetryable
		}
	} else if !c.builtinRetryable(err, f) {
		// A conflict is what the SDK's rules would not retry: a conflict's
		// code on a 5xx, or beside a connection failure, is retried as
		// the SDK retries it (helper-149: a ConditionalCheckFailedException
		// with a 503 got 3 attempts under retry.NewStandard(), 1 here).
		if f.loopsConflict() {
			return ClassConflict
		}
		return ClassNotRetryable
	}
	if c.throttle(err, f) {
		return ClassThrottle
	}
	return ClassTransient
}

// callersRetryable asks the caller's checks (nested lists too) in order, as
// retry.IsErrorRetryables does, but for one answer: the SDK's own
// retry.RetryableError check's refusal of a cut at the deadline whose first
// mark is the cut's is read as the mark said before the cut marked itself
// not retryable (see attemptTimeoutError): read as a refusal, the call ended
// with the bare cut, not the deadline's refusal it gets without the list
// (helper-258). Any other check's refusal stands (helper-259, helper-260:
// ignored, or asked again of a wrapped error a check that type-asserts the
// error did not know, a request the caller's check refused was sent again
// where the deadline check was off).
func (c *classifier) callersRetryable(checks retry.IsErrorRetryables, err error, f *errorFacts) aws.Ternary {
	for _, check := range checks {
		var v aws.Ternary
		switch ch := check.(type) {
		case retry.IsErrorRetryables:
			v = c.callersRetryable(ch, err, f)
		case *retry.IsErrorRetryables: // never nil: see Options.validate
			v = c.callersRetryable(*ch, err, f)
		case retry.RetryableError, *retry.RetryableError:
			v = ch.IsErrorRetryable(err)
			// Not when an error's own As method may have answered
			// the SDK's check with a mark the walk did not read.
			if v == aws.FalseTernary && f.cut > 0 && f.retryableErr.value && !f.foreignAs {
				v = aws.TrueTernary
			}
		default:
			v = ch.IsErrorRetryable(err)
		}
		if v != aws.UnknownTernary {
			return v
		}
	}
	return aws.UnknownTernary
}

// doClass is Do's default classification: conflicts are ClassConflict; an
// error a retry machinery already gave up on (a *retry.MaxAttemptsError, the
// SDK bucket's ratelimit.QuotaExceededError, a *GiveUpError) is not retried
// again, unless it wraps a conflict (see below), and a Do loop's that ran
// out of conflicts never is; a transaction cancelled for throttles only,
// which the SDK's middleware does not retry, is a throttle; the rest follows
// the retryer's rules. So a Do loop around SDK calls retries conflicts (and
// throttled transactions) only, and around plain functions what the SDK
// would.
func (c *classifier) doClass(err error) ErrorClass {
	if err == nil {
		return ClassNotRetryable
	}
	f := c.facts(err)
	// A retry machinery gives up on a conflict only when the caller made
	// conflicts retryable to the SDK's middleware (retry.AddWithErrorCodes),
	// when the conflict's error marks itself retryable, or when a Do loop
	// ran out of its conflict budget. The loop retries the first as
	// conflicts; the others are final (the middleware retried a marked
	// one already; a loop around an inner Do would run it again for each
	// of its own conflicts). A give-up for a deadline or a cancel is final
	// whatever it wraps: the time was up (an inner Do's, with a shorter
	// timeout, was run again for each of the outer loop's conflicts).
	if f.conflictsGaveUp || f.timeGaveUp || f.gaveUp && !f.loopsConflict() {
		return ClassNotRetryable
	}
	if class, ok := c.throttledTransactionClass(err, &f); ok {
		return class
	}
	return c.classOf(err, &f)
}

// throttledTransactionClass returns Do's class of a transaction cancelled
// for throttles only, which the SDK's middleware does not retry (its code is
// no throttle's), and false for any other error: a throttle, unless the
// caller's checks say it is no throttle (transient) or not retryable.
func (c *classifier) throttledTransactionClass(err error, f *errorFacts) (ErrorClass, bool) {
	if !f.throttledTransaction() {
		return 0, false
	}
	switch {
	case c.retryables.IsErrorRetryable(err) == aws.FalseTernary:
		return ClassNotRetryable, true
	case c.throttles.IsErrorThrottle(err) == aws.FalseTernary:
		return ClassTransient, true
	}
	return ClassThrottle, true
}

// retryClass returns the class a retry after err is priced and backed off
// by, class being err's class under these rules. An error they do not
// retry is retried only when something else answered IsErrorRetryable (a
// decorator such as retry.AddWithErrorCodes): the SDK prices and backs off
// such a retry by its throttle checks alone, and so does this.
func (c *classifier) retryClass(err error, class ErrorClass) ErrorClass {
	switch {
	case class != ClassNotRetryable:
		return class
	case c.isThrottle(err) == aws.TrueTernary:
		return ClassThrottle
	}
	return ClassTransient
}

// isThrottle is the retry.IsErrorThrottle the delayers use.
func (c *classifier) isThrottle(err error) aws.Ternary {
	if err == nil {
		return aws.UnknownTernary
	}
	f := c.facts(err)
	return aws.BoolTernary(!f.unreadable() && c.throttle(err, &f))
}

// rateSignal returns what a failed attempt's error err tells the send-rate
// limiter: throttled, under the throttle checks alone, as the SDK's
// adaptive mode (a throttle that only a decorator retries is one all the
// same), or a transaction cancelled for throttles only (which the SDK's
// middleware does not retry, but a table at capacity answers); otherwise a
// conflict, the service's answer at its usual load (the request was taken,
// and DynamoDB spent its capacity), is counted as not throttled (left out,
// a hot item's conditional writes were no answers at all, and the rate
// could not grow past twice the few accepted: 32 writers on an item of a
// table of 100 writes a second ran at 78 requests a second, unthrottled).
// Anything else (a 5xx, a transaction cancelled for races and throttles at
// once, a timeout) is not counted: it says nothing of the rate. The
// caller's throttle checks come first, also for a conflict's code, and a
// transaction they say is no throttle is not counted.
func (c *classifier) rateSignal(err error) (throttled, counted bool) {
	f := c.facts(err)
	switch {
	case f.unreadable():
		return false, false
	case c.throttle(err, &f):
		return true, true
	case f.throttledTransaction():
		// As Do classes it: a throttle, unless the caller's checks say no.
		class, _ := c.throttledTransactionClass(err, &f)
		return class == ClassThrottle, class == ClassThrottle
	case f.isConflict():
		return false, true
	}
	return false, false
}

// builtinRetryable applies the SDK's default retryable checks, in their
// order, to what the walk found.
func (c *classifier) builtinRetryable(err error, f *errorFacts) bool {
	switch {
	case f.contextCanceled:
		// Deliberate: the SDK retries a bare context.Canceled inside a send
		// error; a cancelled caller never wants another attempt. Asked
		// before the SDK's checks below are, so that an S3 client's
		// errors are judged so too (helper-149: a cancelled S3 send got 3
		// attempts, another client's 1).
		return false
	case f.canceled.seen && f.canceled.value:
		return false
	case f.foreignAs:
		// An error with its own As method (the S3 client's response
		// errors) can pose as any type, which only errors.As sees; defer
		// to the SDK's own checks for it.
		return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool()
	case f.retryableErr.seen:
		return f.retryableErr.value
	}
	if f.network {
		if v := connectionRetryable(err, maxErrorDepth, true, !f.partial); v != aws.UnknownTernary {
			return v.Bool()
		}
	}
	switch f.status {
	case 500, 502, 503, 504:
		return true
	case 429:
		if !f.modeled {
			return true
		}
	}
	if f.kind&(codeRetryable|codeThrottle) != 0 {
		return true
	}
	// Deliberate: the SDK searches the text of every error, API errors
	// included, for "connection reset"; only an error that is no API or
	// HTTP error has its text searched here, and only now that the cheap
	// checks have failed.
	if !f.statusSeen && !f.code.seen {
		return brokenConnectionText(errorText(err))
	}
	return false
}

// brokenConnectionText reports whether an error message says that a
// connection broke, as the SDK's RetryableConnectionError looks for it.
func brokenConnectionText(msg string) bool {
	return strings.Contains(msg, "connection reset") || strings.Contains(msg, "use of closed network connection")
}

func (c *classifier) throttle(err error, f *errorFacts) bool {
	if v := c.throttles.IsErrorThrottle(err); v != aws.UnknownTernary {
		return v.Bool()
	}
	if f.foreignAs {
		return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool()
	}
	return f.kind&codeThrottle != 0 || f.status == 429 && !f.modeled
}

type seenBool struct{ seen, value bool }

type seenString struct {
	seen  bool
	value string
}

// errorFacts is what one depth-first walk of an error chain finds, in the
// order errors.As would find it: the first node implementing each behaviour.
type errorFacts struct {
	canceled     seenBool   // CanceledError() bool
	retryableErr seenBool   // RetryableError() bool
	code         seenString // ErrorCode() string
	kind         codeKind   // what the classifier knows of code
	status       int        // HTTPStatusCode() int; 0 when absent
	statusSeen   bool
	apiSeen      bool
	modeled      bool // the first smithy.APIError is not a *smithy.GenericAPIError

	conflictMark    bool         // an error marked with Conflict is in the chain
	transaction     cancellation // what a cancelled transaction's reasons say
	gaveUp          bool         // a *retry.MaxAttemptsError, the SDK bucket's refusal or a *GiveUpError is in the chain
	conflictsGaveUp bool         // a *GiveUpError of a Do loop out of conflicts (GiveUpConflicts) is in the chain
	timeGaveUp      bool         // a *GiveUpError for a deadline or a cancel (GiveUpDeadline, GiveUpCanceled) is in the chain
	outOfAttempts   int          // a *retry.MaxAttemptsError is in the chain: its Attempt, at least 1; 0 if none
	typedNil        bool         // a nil pointer is in the chain: its methods may panic, so none is called
	truncated       bool         // the chain has a cycle, or more than maxCycleNodes reads (see scanWhole)
	partial         bool         // the walk stopped at a bound before the chain's end: its text is read once, at the top
	contextCanceled bool         // context.Canceled is in the chain
	deadlinePassed  bool         // context.DeadlineExceeded is in the chain
	refusedAhead    bool         // the canceled flag is a GiveUpDeadline's: the context had not ended
	refusalCtxErr   error        // the canceled flag is a GiveUpCanceled's, with this context error
	network         bool         // a connection-level error is in the chain
	foreignAs       bool         // a node has an As method
	response        *http.Response
	cut             time.Duration // the limit of an attempt AttemptTimeout cut at the operation's deadline
	stalled         bool          // AttemptTimeout cut an attempt at its own limit
}

// httpResponse returns the response of the first smithy HTTP response error
// in err's chain, as errors.As finds it.
func (f *errorFacts) httpResponse(err error) *http.Response {
	if f.foreignAs {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.Response != nil {
			return re.Response.Response
		}
		return nil
	}
	return f.response
}

// maxErrorDepth and maxErrorNodes bound a walk of a chain, so that a cyclic
// chain cannot loop for ever and a tree of joined errors cannot grow
// exponentially.
const (
	maxErrorDepth = 64
	maxErrorNodes = 256
)

// chainWalk walks an error's chain depth first through both forms of
// Unwrap, as errors.Is does, within maxErrorDepth and maxErrorNodes: the
// bounds of every walk of a chain on the retry decision's path. Unlike
// errors.As it calls no method of the errors but Unwrap, and stops at a
// nil pointer, whose methods may dereference it (found never sees one).
// The zero value is ready to walk.
type chainWalk struct {
	nodes    int  // errors visited so far
	partial  bool // the walk stopped at a bound before the chain's end
	typedNil bool // a nil pointer is in the part of the chain walked
}

// visit calls found on err, depth deep, and then on its chain, until found
// returns true, and reports whether it did.
func (w *chainWalk) visit(err error, depth int, found func(error) bool) bool {
	if err == nil {
		return false
	}
	if depth > maxErrorDepth || w.nodes >= maxErrorNodes {
		w.partial = true
		return false
	}
	w.nodes++
	if holdsNil(err) {
		w.typedNil = true
		return false
	}
	if found(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return w.visit(u.Unwrap(), depth+1, found)
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			if w.visit(inner, depth+1, found) {
				return true
			}
		}
	}
	return false
}

// inChain reports whether found holds for err or an error of its chain
// (see chainWalk).
func inChain(err error, found func(error) bool) bool {
	var w chainWalk
	return w.visit(err, 0, found)
}

// isPointer reports whether err's dynamic type is a pointer, whose identity
// is the value.
func isPointer(err error) bool {
	return err != nil && reflect.TypeOf(err).Kind() == reflect.Pointer
}

// holdsNil reports whether v is a nil pointer or func of some type in a
// non-nil interface (an error, an option), whose methods may dereference
// it.
func holdsNil(v any) bool {
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}

// maxCycleNodes bounds the reading of an error larger than the walk reads:
// an error that takes more reads is taken for endless.
const maxCycleNodes = 4096

// scanWhole reads the whole of err's chain, past the walk's bounds, and
// reports whether it has a cycle (or takes more than maxCycleNodes reads),
// and whether it holds a nil pointer. Errors are told apart by identity: a
// pointer's address, a slice's (a join type that is a slice can hold
// itself); each of those is read once, so a graph that shares its errors
// (a join holding the same error twice, level after level) is read in
// linear time. It calls no method but Unwrap, and stops at a nil pointer.
//
// A chain of single wraps, the common deep chain (fmt.Errorf's %w, layer
// after layer), is read without the maps: it cannot share an error, and a
// cycle in it is found by comparing each error with one saved at every
// power of two of the reads (Brent's method). Read with the maps, 1,000
// wrappers cost 319 µs a decision and 217 KB of garbage (helper-236). The
// maps read from the first join on.
func scanWhole(err error) (endless, nilPointer bool) {
	var saved errorID
	for reads := 0; err != nil; reads++ {
		if holdsNil(err) {
			return false, true
		}
		if reads >= maxCycleNodes {
			return true, false
		}
		at := errorIDOf(err)
		if at != (errorID{}) {
			if at == saved {
				return true, false
			}
			if reads&(reads-1) == 0 { // a power of two, or 0
				saved = at
			}
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			if _, joined := err.(interface{ Unwrap() []error }); joined {
				return scanGraph(err, reads)
			}
			return false, false
		}
		err = u.Unwrap()
	}
	return false, false
}

// errorID tells errors apart by identity: a pointer's address, a slice's
// and its length (a join type that is a slice can hold itself), with the
// type: Go gives values of zero size one address, and two such errors of
// different types, one wrapping the other, were taken for a cycle. The
// zero value is an error of neither kind, which cannot be met twice on a
// path but through one that is.
type errorID struct {
	typ reflect.Type
	at  uintptr
	len int
}

func errorIDOf(e error) errorID {
	switch rv := reflect.ValueOf(e); rv.Kind() {
	case reflect.Pointer:
		return errorID{typ: rv.Type(), at: rv.Pointer()}
	case reflect.Slice:
		return errorID{typ: rv.Type(), at: rv.Pointer(), len: rv.Len()}
	}
	return errorID{}
}

// scanGraph is scanWhole from a join on, reads already made: each error
// with an identity is read once, so that a graph that shares its errors is
// read in linear time, and one met again on the path is a cycle.
func scanGraph(err error, reads int) (endless, nilPointer bool) {
	onPath, done := map[errorID]bool{}, map[errorID]bool{}
	var visit func(e error) bool
	visit = func(e error) bool {
		if e == nil {
			return false
		}
		if holdsNil(e) {
			nilPointer = true
			return false
		}
		if reads++; reads > maxCycleNodes {
			return true
		}
		if key := errorIDOf(e); key != (errorID{}) {
			if onPath[key] {
				return true
			}
			if done[key] {
				return false
			}
			onPath[key] = true
			defer func() { delete(onPath, key); done[key] = true }()
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return visit(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if visit(inner) {
					return true
				}
			}
		}
		return false
	}
	endless = visit(err)
	return endless, nilPointer
}

// unreadable reports whether no method of the chain's errors may be called
// but Unwrap: it holds a nil pointer, or has no end (a cycle).
func (f *errorFacts) unreadable() bool { return f.typedNil || f.truncated }

// throttledTransaction reports whether the chain holds a transaction
// cancelled for throttles only, and no mark that makes it a conflict.
func (f *errorFacts) throttledTransaction() bool {
	return f.transaction == cancelledByThrottles && !f.conflictMark && !f.unreadable()
}

// contextEnded returns the context error the chain shows when a request was
// cancelled (an error that says CanceledError() true, such as the SDK's
// for a send its context ended, or context.Canceled in the chain):
// context.DeadlineExceeded when that is in the chain too, context.Canceled
// otherwise; nil when the chain shows no cancellation.
func (f *errorFacts) contextEnded() error {
	switch {
	case !(f.canceled.seen && f.canceled.value) && !f.contextCanceled:
		return nil
	case f.refusedAhead && !f.contextCanceled:
		return nil // a refusal made before the deadline
	case f.refusalCtxErr != nil:
		return f.refusalCtxErr
	case f.deadlinePassed:
		return context.DeadlineExceeded
	}
	return context.Canceled
}

// loopsConflict reports whether err is a conflict that is the application's
// loop's to retry: a conflict, unless an error of the chain says itself it
// may be retried (RetryableError() true), which the SDK's middleware honours
// whatever it wraps; then the middleware retries it as any other error, and
// a Do loop does not retry it again once the middleware gave up.
func (f *errorFacts) loopsConflict() bool {
	return f.isConflict() && !(f.retryableErr.seen && f.retryableErr.value)
}

func (f *errorFacts) isConflict() bool {
	return f.conflictMark || f.kind&codeConflict != 0 || f.transaction == cancelledByConflicts
}

// sees records what err, a node of the chain, says; it never stops the
// walk.
func (f *errorFacts) sees(err error) bool {
	f.visit(err)
	return false
}

func (f *errorFacts) visit(err error) {
	// The SDK's own node types first: their behaviours are known, so they
	// skip the interface checks below, which cost an itab lookup each.
	switch e := err.(type) {
	case *awshttp.ResponseError:
		// Its As method hands errors.As the smithy response error it
		// embeds, which the walk does not visit: Unwrap skips it.
		if e.ResponseError != nil {
			f.visitResponse(e.ResponseError)
		}
		return
	case *smithyhttp.ResponseError:
		f.visitResponse(e)
		return
	case *smithy.GenericAPIError:
		if !f.code.seen {
			f.code = seenString{true, e.Code}
		}
		if !f.apiSeen {
			f.apiSeen = true // generic: not modelled
		}
		return
	case *smithy.OperationError:
		return
	case *conflictError:
		f.conflictMark = true
		return
	case *retry.MaxAttemptsError:
		// The SDK's middleware gave up: out of attempts.
		// The outermost one's count: the operation's.
		f.gaveUp = true
		if f.outOfAttempts == 0 {
			f.outOfAttempts = 1
			if e != nil {
				f.outOfAttempts = max(e.Attempt, 1)
			}
		}
		return
	case ratelimit.QuotaExceededError, *ratelimit.QuotaExceededError:
		// The SDK's own bucket refused the retry.
		f.gaveUp = true
		return
	case *GiveUpError:
		f.gaveUp = true
		f.conflictsGaveUp = f.conflictsGaveUp || e.Reason == GiveUpConflicts
		f.timeGaveUp = f.timeGaveUp || e.Reason == GiveUpDeadline || e.Reason == GiveUpCanceled
		if (e.Reason == GiveUpDeadline || e.Reason == GiveUpCanceled) && !f.canceled.seen {
			// It stands for the SDK's *aws.RequestCanceledError (see As),
			// which the SDK never retries, whatever the cause it wraps.
			// A deadline refusal is made before the deadline, though: the
			// context had not ended.
			f.canceled = seenBool{true, true}
			f.refusedAhead = e.Reason == GiveUpDeadline
			f.refusalCtxErr = e.ctxErr
		}
		return
	case *attemptTimeoutError:
		if f.cut == 0 && e.byDeadline {
			f.cut = e.timeout
		}
		f.stalled = f.stalled || !e.byDeadline
		if !f.retryableErr.seen { // a mark above the cut is the SDK's first (helper-250)
			f.retryableErr = seenBool{true, true}
		}
		return
	}
	switch err {
	case context.Canceled:
		f.contextCanceled = true
	case context.DeadlineExceeded:
		f.deadlinePassed = true
	}
	if _, ok := err.(interface{ As(any) bool }); ok {
		f.foreignAs = true
	}
	if v, ok := err.(interface{ CanceledError() bool }); ok && !f.canceled.seen {
		f.canceled = seenBool{true, v.CanceledError()}
	}
	if v, ok := err.(interface{ RetryableError() bool }); ok && !f.retryableErr.seen {
		f.retryableErr = seenBool{true, v.RetryableError()}
	}
	if v, ok := err.(interface{ HTTPStatusCode() int }); ok && !f.statusSeen {
		f.statusSeen, f.status = true, v.HTTPStatusCode()
	}
	if v, ok := err.(smithy.APIError); ok {
		if !f.code.seen {
			f.setCode(err, v.ErrorCode())
		}
		if !f.apiSeen {
			f.apiSeen, f.modeled = true, true
		}
	} else if v, ok := err.(interface{ ErrorCode() string }); ok && !f.code.seen {
		f.setCode(err, v.ErrorCode())
	}
	if !f.network {
		f.network = isNetworkNode(err)
	}
}

// setCode records code as err's error code, the first in the chain, and for
// a cancelled transaction what its reasons say.
func (f *errorFacts) setCode(err error, code string) {
	f.code = seenString{true, code}
	if code == transactionCanceledCode {
		f.transaction = cancellationOf(err)
	}
}

// visitResponse records a smithy HTTP response error: its status and its
// response.
func (f *errorFacts) visitResponse(e *smithyhttp.ResponseError) {
	if e.Response == nil || e.Response.Response == nil {
		return
	}
	if !f.statusSeen {
		f.statusSeen, f.status = true, e.Response.StatusCode
	}
	if f.response == nil {
		f.response = e.Response.Response
	}
}

// isNetworkNode reports whether err is one of the nodes the SDK's
// RetryableConnectionError looks at, so that the slower connection check
// runs only for connection-level failures.
func isNetworkNode(err error) bool {
	switch e := err.(type) {
	case *net.DNSError, *url.Error, *net.OpError:
		return true
	case syscall.Errno:
		// The SDK retries an Errno that is Temporary or a Timeout
		// (ETIMEDOUT, EAGAIN, EMFILE, ...), not only the two it names.
		return e == syscall.ECONNRESET || e == syscall.ECONNREFUSED || e.Temporary() || e.Timeout()
	case interface{ ConnectionError() bool }, interface{ Temporary() bool }, interface{ Timeout() bool }:
		return true
	}
	return err == net.ErrClosed
}

// connectionRetryable follows the SDK's RetryableConnectionError, with
// errors.Is on the syscall and net errors first, where the SDK searches the
// formatted message for "connection reset", "use of closed network
// connection" and "connection refused"; the text is searched only when they
// fail, and only when readText. It goes into the url and net errors it
// meets, as the SDK does, at most levels deep, reading their text too when
// textBelow: the SDK's, unbounded, formats the rest of the chain at each,
// and a chain of 1,600 nested ones cost it seconds (helper-250). textBelow
// is false for a chain larger than the walk reads: its text is read at the
// top only, once for the whole (a wide join's, or a deep fmt.Errorf
// chain's, says a connection broke as the SDK reads it: helper-254).
func connectionRetryable(err error, levels int, readText, textBelow bool) aws.Ternary {
	if err == nil || levels <= 0 {
		return aws.UnknownTernary
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return aws.FalseTernary
		}
		if dnsErr.Temporary() {
			return aws.TrueTernary
		}
	}
	var (
		connErr    interface{ ConnectionError() bool }
		tempErr    interface{ Temporary() bool }
		timeoutErr interface{ Timeout() bool }
		urlErr     *url.Error
		opErr      *net.OpError
	)
	switch {
	case errors.As(err, &connErr) && connErr.ConnectionError():
		return aws.TrueTernary
	case errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET), readText && brokenConnectionText(errorText(err)):
		return aws.TrueTernary
	case errors.As(err, &urlErr):
		if errors.Is(urlErr, syscall.ECONNREFUSED) || readText && strings.Contains(errorText(urlErr), "connection refused") {
			return aws.TrueTernary
		}
		return connectionRetryable(urlErr.Unwrap(), levels-1, textBelow, textBelow)
	case errors.As(err, &opErr):
		if strings.EqualFold(opErr.Op, "dial") || opErr.Temporary() {
			return aws.TrueTernary
		}
		return connectionRetryable(opErr.Unwrap(), levels-1, textBelow, textBelow)
	case errors.As(err, &tempErr) && tempErr.Temporary():
		return aws.TrueTernary
	case errors.As(err, &timeoutErr) && timeoutErr.Timeout():
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}
