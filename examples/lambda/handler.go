package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
)

// Timing defaults. A DynamoDB call is given the invocation's deadline
// minus DefaultReserve; each HTTP attempt at most DefaultAttemptTimeout;
// and a retry is started only when its backoff and a whole attempt fit
// before that earlier deadline. So the handler returns its own error at
// least the reserve before Lambda would stop the function.
const (
	// DefaultReserve is the time kept free before the function's deadline
	// to return the error and flush logs: 500 ms.
	DefaultReserve = 500 * time.Millisecond
	// DefaultAttemptTimeout bounds one HTTP attempt: 300 ms, far above
	// DynamoDB's usual latency, so that a stalled connection is retried.
	DefaultAttemptTimeout = 300 * time.Millisecond
	// markerTTL is how long a request's marker item is kept (its "expires"
	// attribute, for the table's TTL): Lambda retries an asynchronous
	// invocation for up to 6 hours.
	markerTTL = 24 * time.Hour
)

// NewRetryer returns the retryer the function's DynamoDB client uses: the
// SDK's DynamoDB defaults with full jitter, no fixed attempt limit (the
// deadline and the retry budget end the retries), and DeadlineMargin set to
// attemptTimeout so that no retry starts without time for the attempt.
// optFns run last, for tests.
func NewRetryer(attemptTimeout time.Duration, optFns ...func(*jitterretry.Options)) *jitterretry.Retryer {
	return jitterretry.New(append([]func(*jitterretry.Options){jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.MaxAttempts = jitterretry.UnlimitedAttempts
		o.DeadlineMargin = attemptTimeout
	}}, optFns...)...)
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

// Handler increments a counter in DynamoDB once per invocation request ID.
// Safe for concurrent use by multiple goroutines.
type Handler struct {
	// Client is a DynamoDB client whose retryer is NewRetryer's and whose
	// HTTP client times out after AttemptTimeout.
	Client *dynamodb.Client
	// Table has a string partition key "pk", and TTL on "expires".
	Table string
	// Reserve is kept free before the function's deadline. Zero means
	// DefaultReserve.
	Reserve time.Duration
	// AttemptTimeout is the HTTP client's timeout, for the check that an
	// invocation has time for one attempt. Zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
}

// Handle applies ev once for the invocation's request ID. Errors wrap the
// DynamoDB error and the retryer's: a *jitterretry.GiveUpError, with reason
// GiveUpDeadline when the next retry would not fit before the reserve or
// GiveUpBudget when the client's retry budget is spent (it wraps the last
// real error, such as the throttle), a *NoTimeError when the invocation
// began too late. Any error is safe to retry with the same request ID, as Lambda
// does: an increment that had landed is then replayed, not applied again.
func (h *Handler) Handle(ctx context.Context, ev Event) (Result, error) {
	if ev.Key == "" {
		return Result{}, errors.New("counter: event has no key")
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
		return Result{}, errors.New("counter: no Lambda request ID in the context")
	}
	_, err = h.Client.TransactWriteItems(ctx, h.increment(ev, requestID))
	if err == nil || replayed(err) {
		return h.read(ctx, ev.Key, err != nil)
	}
	return Result{}, fmt.Errorf("counter: increment %q: %w", ev.Key, err)
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

// increment is one transaction: a marker item for the request ID, put only
// if absent, and the counter's increment. DynamoDB also honours the request
// ID as ClientRequestToken for 10 minutes; the marker covers servers that
// do not and the hours Lambda may retry an invocation.
func (h *Handler) increment(ev Event, requestID string) *dynamodb.TransactWriteItemsInput {
	expires := strconv.FormatInt(time.Now().Add(markerTTL).Unix(), 10)
	return &dynamodb.TransactWriteItemsInput{
		ClientRequestToken: aws.String(requestID),
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName: aws.String(h.Table),
				Item: map[string]types.AttributeValue{
					"pk":      &types.AttributeValueMemberS{Value: "request#" + requestID},
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

func (h *Handler) read(ctx context.Context, key string, replayed bool) (Result, error) {
	out, err := h.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(h.Table),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "counter#" + key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Result{}, fmt.Errorf("counter: read %q after the increment: %w", key, err)
	}
	res := Result{Key: key, Replayed: replayed}
	if n, ok := out.Item["n"].(*types.AttributeValueMemberN); ok {
		if res.Count, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return Result{}, fmt.Errorf("counter: %q holds %q: %w", key, n.Value, err)
		}
	}
	return res, nil
}
