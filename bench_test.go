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
		b.Run(r.name, func(b *testing.B) {
			retryer := r.new()
			b.ReportAllocs()
			for b.Loop() {
				retryDecision(ctx, retryer, throttleErr)
			}
		})
		b.Run(r.name+"-parallel", func(b *testing.B) {
			retryer := r.new()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					retryDecision(ctx, retryer, throttleErr)
				}
			})
		})
	}
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
		b.Run(r.name, func(b *testing.B) {
			retryer := r.new()
			b.ReportAllocs()
			for b.Loop() {
				attempt(retryer)
			}
		})
		b.Run(r.name+"-parallel", func(b *testing.B) {
			retryer := r.new()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					attempt(retryer)
				}
			})
		})
	}
}
