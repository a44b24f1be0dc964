package main

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/jitterretry/jitterretry"
)

// attemptStats counts the DynamoDB attempts of one invocation, as the
// client makes them: throttled ones, and those cut by the attempt timeout.
type attemptStats struct {
	attempts, throttles, cut atomic.Int64
}

// count is a per-call option of the DynamoDB client that counts the call's
// attempts into st.
func (st *attemptStats) count(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		// Right after the SDK's retry middleware, so around every attempt
		// and outside the attempt timeout, whose cut it sees.
		return stack.Finalize.Insert(attemptCounter{st}, "Retry", middleware.After)
	})
}

type attemptCounter struct{ st *attemptStats }

func (attemptCounter) ID() string { return "counter.attempts" }

func (m attemptCounter) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleFinalize(ctx, in)
	m.st.attempts.Add(1)
	switch {
	case err == nil:
	case errors.Is(err, jitterretry.ErrAttemptTimeout):
		m.st.cut.Add(1)
	case jitterretry.Classify(err) == jitterretry.ClassThrottle, throttledTransaction(err):
		m.st.throttles.Add(1)
	}
	return out, md, err
}

// throttledTransaction reports whether err is a transaction DynamoDB
// cancelled because an item of it was throttled, which Classify, as the
// SDK's middleware, does not call a throttle (the handler's Do loop retries
// it as one).
func throttledTransaction(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ThrottlingError", "ProvisionedThroughputExceeded":
			return true
		}
	}
	return false
}

// ErrorType is the errorType Lambda reports for err, a handler's error: the
// name of its type, as aws-lambda-go derives it.
func ErrorType(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// log writes the invocation's record: what a CloudWatch Logs query of the
// function filters on.
func (h *Handler) log(ctx context.Context, ev Event, start time.Time, st *attemptStats, res Result, err error) {
	attrs := make([]slog.Attr, 0, 12)
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		attrs = append(attrs, slog.String("requestId", lc.AwsRequestID))
	}
	attrs = append(attrs, slog.String("key", ev.Key))
	level := slog.LevelInfo
	switch {
	case err != nil:
		level = slog.LevelError
		attrs = append(attrs, slog.String("outcome", "error"), slog.String("errorType", ErrorType(err)))
		var gu *jitterretry.GiveUpError
		if errors.As(err, &gu) {
			attrs = append(attrs, slog.String("gaveUp", gu.Reason.String()))
		}
		attrs = append(attrs, slog.String("error", err.Error()))
	case res.Replayed:
		attrs = append(attrs, slog.String("outcome", "replayed"), slog.Int64("count", res.Count))
	default:
		attrs = append(attrs, slog.String("outcome", "ok"), slog.Int64("count", res.Count))
	}
	attrs = append(attrs,
		slog.Int64("attempts", st.attempts.Load()),
		slog.Int64("throttled", st.throttles.Load()),
		slog.Int64("cut", st.cut.Load()),
		slog.Int64("durationMs", time.Since(start).Milliseconds()),
	)
	if deadline, ok := ctx.Deadline(); ok {
		attrs = append(attrs, slog.Int64("leftMs", time.Until(deadline).Milliseconds()))
	}
	h.Log.LogAttrs(ctx, level, "invocation", attrs...)
}
