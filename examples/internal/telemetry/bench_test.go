package telemetry_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/metrics"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
)

// BenchmarkRetryDecision is the root package's BenchmarkRetryDecision
// cycle (bench_test.go: one failed attempt's decision in the retry
// middleware's order, ending with the retry's release as a later success
// would), for a throttle as the middleware sees it, in an SDK operation's
// context, without a meter provider and with an OpenTelemetry one (through
// smithyotelmetrics, into a ManualReader). With the provider, each cycle
// records a retry, its backoff and nothing else.
//
//	go test -run '^$' -bench BenchmarkRetryDecision -benchmem ./examples/internal/telemetry
func BenchmarkRetryDecision(b *testing.B) {
	ctx := awsmiddle.SetOperationName(awsmiddle.SetServiceID(context.Background(), "DynamoDB"), "PutItem")
	providers := []struct {
		name string
		new  func(b *testing.B) metrics.MeterProvider
	}{
		{"none", func(*testing.B) metrics.MeterProvider { return nil }},
		{"otel", func(b *testing.B) metrics.MeterProvider {
			m, err := telemetry.New(telemetry.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Shutdown(context.Background()) })
			return m.Provider
		}},
	}
	for _, p := range providers {
		newRetryer := func(b *testing.B) *jitterretry.Retryer {
			r := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = p.new(b) })
			if err := r.Err(); err != nil {
				b.Fatal(err)
			}
			return r
		}
		b.Run(p.name, func(b *testing.B) {
			r, throttle := newRetryer(b), throttleErr()
			b.ReportAllocs()
			for b.Loop() {
				retryDecision(ctx, r, throttle)
			}
		})
		b.Run(p.name+"-parallel", func(b *testing.B) {
			r := newRetryer(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				throttle := throttleErr() // each operation fails with its own error
				for pb.Next() {
					retryDecision(ctx, r, throttle)
				}
			})
		})
	}
}

// retryDecision is one whole failed-attempt cycle in the retry middleware's
// order, as in the root package's bench_test.go.
func retryDecision(ctx context.Context, r aws.RetryerV2, err error) {
	_ = r.MaxAttempts()
	release, _ := r.GetAttemptToken(ctx)
	_ = release(err)
	if !r.IsErrorRetryable(err) {
		panic("expect a throttle to be retryable")
	}
	retryRelease, terr := r.GetRetryToken(ctx, err)
	if terr != nil {
		panic(terr)
	}
	if _, derr := r.RetryDelay(1, err); derr != nil {
		panic(derr)
	}
	_ = retryRelease(nil)
}

// throttleErr is a ProvisionedThroughputExceededException as the retry
// middleware sees it: inside the SDK's and smithy's response errors, with
// the HTTP status.
func throttleErr() error {
	resp := &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{}}
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: resp},
			Err:      &types.ProvisionedThroughputExceededException{Message: aws.String("scripted")},
		},
		RequestID: "req",
	}
}
