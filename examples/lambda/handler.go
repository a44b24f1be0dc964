package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/jitterretry/jitterretry"
)

// Timing defaults. A DynamoDB call is given the invocation's deadline
// minus DefaultReserve; each attempt at most DefaultAttemptTimeout
// (jitterretry.AttemptTimeout); and a retry is started only when its backoff
// and an attempt fit before that earlier deadline (the retryer's learnt
// margin, or the attempt timeout after a cut attempt). So the handler
// returns its own error at least the reserve before Lambda would stop the
// function.
const (
	// DefaultReserve is the time kept free before the function's deadline
	// to return the error and flush logs: 500 ms.
	DefaultReserve = 500 * time.Millisecond
	// DefaultAttemptTimeout bounds one attempt: 300 ms, far above
	// DynamoDB's usual latency, so that a stalled connection is cut and
	// retried rather than eat the invocation.
	DefaultAttemptTimeout = 300 * time.Millisecond
	// markerTTL is how long a request's marker item is kept (its "expires"
	// attribute, for the table's TTL): Lambda retries an asynchronous
	// invocation for up to 6 hours.
	markerTTL = 24 * time.Hour
)

// NewRetryer returns the retryer the function's DynamoDB client uses: the
// SDK's DynamoDB defaults with full jitter and no fixed attempt limit (the
// deadline and the retry budget end the retries). The deadline margin is
// learnt from the attempts the execution environment makes; after an
// attempt cut by its attempt timeout the retryer leaves that timeout for
// the next. optFns run last, for tests.
func NewRetryer(optFns ...func(*jitterretry.Options)) *jitterretry.Retryer {
	return jitterretry.New(append([]func(*jitterretry.Options){jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.MaxAttempts = jitterretry.UnlimitedAttempts
	}}, optFns...)...)
}

// APIOptions are the SDK API options the function's DynamoDB client needs:
// every attempt bounded by attemptTimeout.
func APIOptions(attemptTimeout time.Duration) []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{jitterretry.AttemptTimeout(attemptTimeout)}
}

// Event is the function's input.
type Event struct {
	// Key names the counter.
	Key string `json:"key"`
	// By is the increment; zero means 1.
	By int64 `json:"by,omitempty"`
}

// Result is the function's output.
type Result struct {
	Key string `json:"key"`
	// Count is the counter after the increment.
	Count int64 `json:"count"`
	// Replayed is true when this invocation's request ID had already been
	// applied (Lambda retried the invocation, or the SDK retried a write
	// whose response was lost): the increment was not applied again, and
	// Count is the counter's current value.
	Replayed bool `json:"replayed,omitempty"`
}

// NoTimeError reports an invocation that started with too little time left
// to make a DynamoDB call and still keep the reserve: nothing was sent.
// Lambda reports it with errorType "NoTimeError".
type NoTimeError struct {
	// Left is the time that was left until the function's deadline.
	Left time.Duration
	// Needed is the reserve plus one attempt.
	Needed time.Duration
}

func (e *NoTimeError) Error() string {
	return fmt.Sprintf("counter: %v left before the function's deadline, %v needed; nothing sent",
		e.Left.Round(time.Millisecond), e.Needed)
}

// Is matches context.DeadlineExceeded.
func (e *NoTimeError) Is(target error) bool { return target == context.DeadlineExceeded }

// CounterError reports a DynamoDB call of the function that failed. Lambda
// reports it with errorType "CounterError" and this error's message, which
// says why the retries stopped (the retryer's give-up: the deadline, the
// retry budget) and the last real error (the throttle, a cut attempt).
type CounterError struct {
	// Op is "increment" (nothing was acknowledged; the increment may have
	// landed, and Lambda's retry with the same request ID replays it) or
	// "read" (the increment landed; the counter could not be read).
	Op string
	// Key is the counter's name.
	Key string
	// Err is the client's error: a *jitterretry.GiveUpError when the
	// retryer gave up, which wraps the last attempt's error.
	Err error
}

func (e *CounterError) Error() string {
	return fmt.Sprintf("counter: %s %q: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the client's error.
func (e *CounterError) Unwrap() error { return e.Err }

// InvocationError reports an invocation the handler cannot serve as given
// (an event with no key, a context with no Lambda request ID): Lambda's
// error response names it as errorType "InvocationError", so that a caller
// tells a bad request from a counter that failed (CounterError).
type InvocationError struct {
	// Reason says what is missing.
	Reason string
}

func (e *InvocationError) Error() string { return "counter: " + e.Reason }

// Handler increments a counter in DynamoDB once per invocation request ID.
// Safe for concurrent use by multiple goroutines.
type Handler struct {
	// Client is a DynamoDB client whose retryer is Retryer and whose API
	// options include APIOptions(AttemptTimeout).
	Client *dynamodb.Client
	// Retryer is the client's retryer, NewRetryer's: its Do loop retries a
	// transaction that DynamoDB cancelled for a conflict or a throttle,
	// which the SDK's middleware does not retry. Nil sends the transaction
	// once, and fails the invocation on such a cancellation.
	Retryer *jitterretry.Retryer
	// Table has a string partition key "pk", and TTL on "expires".
	Table string
	// Reserve is kept free before the function's deadline. Zero means
	// DefaultReserve.
	Reserve time.Duration
	// AttemptTimeout is the client's attempt timeout, for the check that an
	// invocation has time for one attempt. Zero means
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Log, when set, receives one record per invocation: its outcome, the
	// DynamoDB attempts it made, and the time it left before the function's
	// deadline. Lambda sends what the function writes to CloudWatch Logs.
	Log *slog.Logger
}

// Handle applies ev once for the invocation's request ID. A failed DynamoDB
// call is a *CounterError wrapping the client's error: a
// *jitterretry.GiveUpError, with reason GiveUpDeadline when the next retry
// would not fit before the reserve or GiveUpBudget when the client's retry
// budget is spent, which wraps the last real error (such as the throttle).
// An invocation that began too late is a *NoTimeError. Any error is safe to
// retry with the same request ID, as Lambda does: an increment that had
// landed is then replayed, not applied again.
func (h *Handler) Handle(ctx context.Context, ev Event) (Result, error) {
	start := time.Now()
	var st attemptStats
	res, err := h.handle(ctx, ev, &st)
	if h.Log != nil {
		h.log(ctx, ev, start, &st, res, err)
	}
	return res, err
}

func (h *Handler) handle(ctx context.Context, ev Event, st *attemptStats) (Result, error) {
	if ev.Key == "" {
		return Result{}, &InvocationError{Reason: "event has no key"}
	}
	if ev.By == 0 {
		ev.By = 1
	}
	ctx, cancel, err := h.withReserve(ctx)
	if err != nil {
		return Result{}, err
	}
	defer cancel()

	requestID := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		requestID = lc.AwsRequestID
	}
	if requestID == "" {
		return Result{}, &InvocationError{Reason: "no Lambda request ID in the context"}
	}
	replay, err := h.transact(ctx, h.increment(ev, requestID), st)
	if err == nil {
		return h.read(ctx, ev.Key, replay, st)
	}
	return Result{}, &CounterError{Op: "increment", Key: ev.Key, Err: err}
}

// transact sends the transaction in a jitterretry.Do loop: DynamoDB cancels
// a transaction throttled at an item, or colliding with another on the same
// counter, with reasons such as [None, ThrottlingError] or [None,
// TransactionConflict], which the SDK's middleware does not retry and Do's
// default retries (as a throttle, as a conflict), until the deadline. A
// transaction cancelled because the request's marker exists was applied
// before: the loop ends, and transact reports it replayed.
func (h *Handler) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput, st *attemptStats) (replay bool, err error) {
	send := func(ctx context.Context) error {
		_, err := h.Client.TransactWriteItems(ctx, in, st.count)
		if replayed(err) {
			replay = true
			return nil
		}
		return err
	}
	if h.Retryer == nil {
		return replay, send(ctx)
	}
	err = jitterretry.Do(ctx, h.Retryer, send)
	return replay, err
}

// withReserve returns ctx with a deadline Reserve earlier than the
// function's. Outside Lambda, with no deadline, it only adds a cancel.
func (h *Handler) withReserve(ctx context.Context) (context.Context, context.CancelFunc, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	reserve, attempt := h.Reserve, h.AttemptTimeout
	if reserve <= 0 {
		reserve = DefaultReserve
	}
	if attempt <= 0 {
		attempt = DefaultAttemptTimeout
	}
	if left := time.Until(deadline); left < reserve+attempt {
		return nil, nil, &NoTimeError{Left: left, Needed: reserve + attempt}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(-reserve))
	return ctx, cancel, nil
}

// increment is one transaction: a marker item for the request ID (with the
// counter's name, for audits), put only if absent, and the counter's
// increment. The marker alone makes it idempotent, for the hours Lambda may
// retry an invocation. The request ID is not the ClientRequestToken: within
// DynamoDB's 10 minutes a token sent again with other parameters (the
// marker's expiry, a second later on Lambda's retry) fails with
// IdempotentParameterMismatchException instead of being replayed. The SDK
// fills a token of its own per call, which its own retries resend with the
// same parameters.
func (h *Handler) increment(ev Event, requestID string) *dynamodb.TransactWriteItemsInput {
	expires := strconv.FormatInt(time.Now().Add(markerTTL).Unix(), 10)
	return &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(h.Table),
				Item: map[string]types.AttributeValue{
					"pk":      &types.AttributeValueMemberS{Value: "request#" + requestID},
					"key":     &types.AttributeValueMemberS{Value: ev.Key},
					"expires": &types.AttributeValueMemberN{Value: expires},
				},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}},
			{Update: &types.Update{
				TableName:                 aws.String(h.Table),
				Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "counter#" + ev.Key}},
				UpdateExpression:          aws.String("ADD #n :by"),
				ExpressionAttributeNames:  map[string]string{"#n": "n"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":by": &types.AttributeValueMemberN{Value: strconv.FormatInt(ev.By, 10)}},
			}},
		},
	}
}

// replayed reports whether err is the transaction cancelled because the
// request's marker exists: this request was applied before.
func replayed(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 {
		return false
	}
	return aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed"
}

func (h *Handler) read(ctx context.Context, key string, replayed bool, st *attemptStats) (Result, error) {
	out, err := h.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(h.Table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "counter#" + key}},
		ConsistentRead: aws.Bool(true),
	}, st.count)
	if err != nil {
		return Result{}, &CounterError{Op: "read", Key: key, Err: err}
	}
	res := Result{Key: key, Replayed: replayed}
	if n, ok := out.Item["n"].(*types.AttributeValueMemberN); ok {
		if res.Count, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return Result{}, fmt.Errorf("counter: %q holds %q: %w", key, n.Value, err)
		}
	}
	return res, nil
}
