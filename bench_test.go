package jitterretry_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// retryDecision is one whole failed-attempt cycle in the retry middleware's
// order, ending with the retry's release as a later success would, so the
// bucket never drains.
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
	_, _ = r.RetryDelay(1, err)
	_ = retryRelease(nil)
}

func BenchmarkRetryDecision(b *testing.B) {
	throttleErr := asResponse(400, &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")})
	retryers := []struct {
		name string
		new  func() aws.RetryerV2
	}{
		{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }},
	}
	for _, s := range delayers.Strategies() {
		retryers = append(retryers, struct {
			name string
			new  func() aws.RetryerV2
		}{string(s), func() aws.RetryerV2 {
			return jitterretry.New(func(o *jitterretry.Options) { o.Jitter = s })
		}})
	}
	ctx := context.Background()
	for _, r := range retryers {
		benchSerialAndParallel(b, r.name, r.new, func(retryer aws.RetryerV2) { retryDecision(ctx, retryer, throttleErr) })
	}
}

// benchSerialAndParallel runs op on a fresh retryer from newRetryer as the
// sub-benchmark name, and again from all GOMAXPROCS goroutines as
// name-parallel.
func benchSerialAndParallel(b *testing.B, name string, newRetryer func() aws.RetryerV2, op func(aws.RetryerV2)) {
	b.Run(name, func(b *testing.B) {
		retryer := newRetryer()
		b.ReportAllocs()
		for b.Loop() {
			op(retryer)
		}
	})
	b.Run(name+"-parallel", func(b *testing.B) {
		retryer := newRetryer()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op(retryer)
			}
		})
	})
}

// BenchmarkAttempt is what every attempt pays before it is sent and after
// it succeeds (GetAttemptToken and its release), side by side with the SDK's
// standard and adaptive modes (the adaptive mode's own limiter stays off
// until a first throttle, as ours stays unlimited). "paced" holds the
// limiter at a finite rate far above the loop's, so every attempt goes
// through the queue without waiting.
func BenchmarkAttempt(b *testing.B) {
	retryers := []struct {
		name string
		new  func() aws.RetryerV2
	}{
		{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }},
		{"sdk-adaptive", func() aws.RetryerV2 { return retry.NewAdaptiveMode() }},
		{"ours", func() aws.RetryerV2 { return jitterretry.New() }},
		{"ours-sendrate", func() aws.RetryerV2 {
			return jitterretry.New(func(o *jitterretry.Options) { o.SendRate = &jitterretry.SendRateOptions{} })
		}},
		{"ours-sendrate-paced", func() aws.RetryerV2 {
			return jitterretry.New(func(o *jitterretry.Options) {
				o.SendRate = &jitterretry.SendRateOptions{InitialRate: 1e12, MinRate: 1e12}
			})
		}},
	}
	ctx := context.Background()
	attempt := func(r aws.RetryerV2) {
		release, err := r.GetAttemptToken(ctx)
		if err != nil {
			panic(err)
		}
		_ = release(nil)
	}
	for _, r := range retryers {
		benchSerialAndParallel(b, r.name, r.new, attempt)
	}
}
