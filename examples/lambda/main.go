// Command lambda is an AWS Lambda function that increments a counter in
// DynamoDB once per invocation, with a jitterretry.Retryer, and returns a
// clean, typed error before the function's deadline rather than being
// stopped in the middle of a retry.
//
// It keeps a reserve (RESERVE_MS, at least 1, default 500) before the deadline Lambda
// gives the invocation: DynamoDB calls get a context whose deadline is that
// much earlier, each attempt is cut after 300 ms (jitterretry.AttemptTimeout)
// and retried, and the retryer starts a retry only when its backoff and an
// attempt fit before that earlier deadline, with a margin it learns from
// the attempts it times. When they do not, the call fails (after a throttle,
// once held for as much of the refused backoff as fits, as the SDK's sleep
// would hold it) with a *jitterretry.GiveUpError that wraps the last real
// error, such as the throttle, and the function returns it as a
// *CounterError (errorType "CounterError" in Lambda's error response). It
// logs one JSON record per invocation to standard output (CloudWatch Logs
// in Lambda).
//
// Environment: TABLE_NAME (string partition key "pk", TTL on "expires"),
// RESERVE_MS, and the SDK's own (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB...).
// It runs inside Lambda or under the Lambda Runtime Interface Emulator;
// its tests run the handler in-process and, built as bootstrap, under the
// emulator (make lambda shows such a run):
//
//	go test ./examples/lambda
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func main() {
	if os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		fmt.Fprintln(os.Stderr, "lambda: this is an AWS Lambda function and runs only inside Lambda "+
			"or the Lambda Runtime Interface Emulator; make lambda runs it under the emulator, "+
			"and its tests run the handler locally: go test ./examples/lambda")
		os.Exit(2)
	}
	h, err := newHandler(context.Background(), os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lambda:", err)
		os.Exit(1)
	}
	h.Log = slog.New(slog.NewJSONHandler(os.Stdout, nil))
	lambda.Start(h.Handle)
}

// newHandler builds the handler once per execution environment, outside the
// invocations, so every invocation shares the client and its retry budget.
func newHandler(ctx context.Context, getenv func(string) string) (*Handler, error) {
	table := getenv("TABLE_NAME")
	if table == "" {
		return nil, fmt.Errorf("TABLE_NAME is not set")
	}
	reserve := DefaultReserve
	if v := getenv("RESERVE_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 1 {
			return nil, fmt.Errorf("RESERVE_MS=%q: want a positive whole number of milliseconds", v)
		}
		reserve = time.Duration(ms) * time.Millisecond
	}
	retryer := NewRetryer()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer { return retryer }),
	)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	// The attempt timeout on the DynamoDB client only: the config's own API
	// options would reach every client made from it, those that fetch
	// credentials too.
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, APIOptions(DefaultAttemptTimeout)...)
	})
	return &Handler{
		Client:         client,
		Retryer:        retryer,
		Table:          table,
		Reserve:        reserve,
		AttemptTimeout: DefaultAttemptTimeout,
	}, nil
}
