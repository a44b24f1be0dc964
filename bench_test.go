package jitterretry_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

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
	if _, derr := r.RetryDelay(1, err); derr != nil {
		panic(derr)
	}
	_ = retryRelease(nil)
}

// retryers is the SDK's standard retryer beside ours with each strategy.
func retryers() []namedRetryer {
	rs := []namedRetryer{{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }}}
	for _, s := range delayers.Strategies() {
		rs = append(rs, namedRetryer{string(s), func() aws.RetryerV2 {
			return jitterretry.New(func(o *jitterretry.Options) { o.Jitter = s })
		}})
	}
	return rs
}

type namedRetryer struct {
	name string
	new  func() aws.RetryerV2
}

// BenchmarkRetryDecision measures a failed-attempt decision (see
// retryDecision) for a throttle as the middleware sees it (each goroutine
// fails with its own error value, as concurrent operations do), under the
// contexts callers use:
//
//   - background: context.Background(), no deadline;
//   - deadline: one context with a deadline shared by every operation, as a
//     batch job has;
//   - deadline-fresh: a new context with a deadline per operation, as a
//     server gives each request; creating and cancelling it is part of the
//     measured cycle on both sides; deadline-fresh/context-alone is that
//     creation and cancel alone.
func BenchmarkRetryDecision(b *testing.B) {
	for _, r := range retryers() {
		benchSerialAndParallel(b, "background/"+r.name, r.new, func(retryer aws.RetryerV2, throttle error) {
			retryDecision(context.Background(), retryer, throttle)
		})
	}
	shared, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, r := range retryers() {
		benchSerialAndParallel(b, "deadline/"+r.name, r.new, func(retryer aws.RetryerV2, throttle error) {
			retryDecision(shared, retryer, throttle)
		})
	}
	for _, r := range retryers() {
		benchSerialAndParallel(b, "deadline-fresh/"+r.name, r.new, func(retryer aws.RetryerV2, throttle error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			retryDecision(ctx, retryer, throttle)
			cancel()
		})
	}
	// The context's own cost, which both sides of deadline-fresh include.
	benchSerialAndParallel(b, "deadline-fresh/context-alone", func() aws.RetryerV2 { return nil }, func(aws.RetryerV2, error) {
		_, cancel := context.WithTimeout(context.Background(), time.Hour)
		cancel()
	})
}

// BenchmarkRetryDecisionCrowded is retryDecision under a deadline while
// held other retries of the same retryer are in their backoffs, under the
// same deadline: below the 4,096 retries the retryer tracks at once, and
// past them. Both buckets are made large enough to hold them all
// (ratelimit.None for the SDK's).
func BenchmarkRetryDecisionCrowded(b *testing.B) {
	for _, held := range []int{4000, 5000} {
		for _, r := range []namedRetryer{
			{"sdk-standard", func() aws.RetryerV2 {
				return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
			}},
			{"full", func() aws.RetryerV2 {
				return jitterretry.New(func(o *jitterretry.Options) { o.BucketCapacity = 1 << 30 })
			}},
		} {
			b.Run(fmt.Sprintf("held-%d/%s", held, r.name), func(b *testing.B) {
				retryer := r.new()
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				for range held {
					err := throttleErr()
					if _, terr := retryer.GetRetryToken(ctx, err); terr != nil {
						b.Fatal(terr)
					}
					if _, derr := retryer.RetryDelay(1, err); derr != nil {
						b.Fatal(derr)
					}
				}
				throttle := throttleErr()
				b.ReportAllocs()
				for b.Loop() {
					retryDecision(ctx, retryer, throttle)
				}
			})
		}
	}
}

// benchSerialAndParallel runs op on a fresh retryer from newRetryer as the
// sub-benchmark name, and again from all GOMAXPROCS goroutines as
// name-parallel. Each goroutine passes op its own throttle error.
func benchSerialAndParallel(b *testing.B, name string, newRetryer func() aws.RetryerV2, op func(aws.RetryerV2, error)) {
	b.Run(name, func(b *testing.B) {
		retryer, throttle := newRetryer(), throttleErr()
		b.ReportAllocs()
		for b.Loop() {
			op(retryer, throttle)
		}
	})
	b.Run(name+"-parallel", func(b *testing.B) {
		retryer := newRetryer()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			throttle := throttleErr()
			for pb.Next() {
				op(retryer, throttle)
			}
		})
	})
}

// BenchmarkAttempt is what every attempt pays before it is sent and after
// it succeeds (GetAttemptToken and its release), side by side with the SDK's
// standard and adaptive modes. "paced" holds the limiter at a finite rate far
// above the loop's, so every attempt goes through the queue without waiting.
// The context carries a deadline and, as an SDK operation's does, its
// service, name and region: the limiter finds the service's by it.
func BenchmarkAttempt(b *testing.B) {
	rs := []namedRetryer{
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx = awsmiddle.SetRegion(awsmiddle.SetOperationName(awsmiddle.SetServiceID(ctx, "DynamoDB"), "PutItem"), "us-east-1")
	attempt := func(r aws.RetryerV2, _ error) {
		release, err := r.GetAttemptToken(ctx)
		if err != nil {
			panic(err)
		}
		_ = release(nil)
	}
	for _, r := range rs {
		benchSerialAndParallel(b, r.name, r.new, attempt)
	}
}

// BenchmarkPartitionNewBusyKeys is a new partition key per operation, each
// operation taking a throttle's retry token and keeping it, so that every
// partition kept has something to remember and a full table must forget
// some whatever they hold.
func BenchmarkPartitionNewBusyKeys(b *testing.B) {
	for _, r := range []namedRetryer{
		{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }},
		{"ours", func() aws.RetryerV2 {
			return jitterretry.New(func(o *jitterretry.Options) { o.PartitionKey = jitterretry.PartitionFromContext })
		}},
	} {
		b.Run(r.name, func(b *testing.B) {
			rt := r.new()
			i := 0
			busy := func() {
				ctx := jitterretry.WithPartition(context.Background(), "tenant-"+strconv.Itoa(i))
				i++
				release, err := rt.GetAttemptToken(ctx)
				if err != nil {
					b.Fatal(err)
				}
				_ = release(throttleErr())
				_, _ = rt.GetRetryToken(ctx, throttleErr()) // the SDK's bucket runs dry: its refusal is the cost
			}
			for range 2048 { // a full table
				busy()
			}
			b.ReportAllocs()
			for b.Loop() {
				busy()
			}
		})
	}
}

// BenchmarkWrappedRetryDelay is the decision cycle under
// retry.AddWithMaxBackoffDelay, which replaces RetryDelay so that no
// hand-off is ever taken, with a fresh deadline context per operation: on a
// new retryer, and on one that has already run a million such cycles. The
// two agree when nothing grows with the entries left behind.
func BenchmarkWrappedRetryDelay(b *testing.B) {
	throttle := throttleErr()
	cycle := func(r aws.RetryerV2) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		retryDecision(ctx, r, throttle)
		cancel()
	}
	wrapped := func() aws.RetryerV2 {
		return retry.AddWithMaxBackoffDelay(jitterretry.New(), 20*time.Second).(aws.RetryerV2)
	}
	b.Run("fresh", func(b *testing.B) {
		r := wrapped()
		b.ReportAllocs()
		for b.Loop() {
			cycle(r)
		}
	})
	b.Run("after-1M", func(b *testing.B) {
		r := wrapped()
		for range 1_000_000 {
			cycle(r)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			cycle(r)
		}
	})
}

// BenchmarkPartitionKeys is an attempt on a partitioned retryer whose
// callers bring keys from a set of n: within the table's bound of 1024
// keys, and beyond it, where every new key forgets an old one. The SDK has
// no partitions; its attempt is the reference.
func BenchmarkPartitionKeys(b *testing.B) {
	for _, n := range []int{64, 4096} {
		ctxs := make([]context.Context, n)
		for i := range ctxs {
			ctxs[i] = jitterretry.WithPartition(context.Background(), "tenant-"+strconv.Itoa(i))
		}
		for _, r := range []namedRetryer{
			{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }},
			{"ours", func() aws.RetryerV2 {
				return jitterretry.New(func(o *jitterretry.Options) { o.PartitionKey = jitterretry.PartitionFromContext })
			}},
		} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, r.name), func(b *testing.B) {
				rt := r.new()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					release, err := rt.GetAttemptToken(ctxs[i%n])
					if err != nil {
						b.Fatal(err)
					}
					_ = release(nil)
					i++
				}
			})
		}
	}
}

// BenchmarkNew is what making a Retryer costs, beside retry.NewStandard:
// ours makes fixed-size tables (the hand-off, the tracking of held
// retries) that one per client pays once, and one per operation pays per
// request.
func BenchmarkNew(b *testing.B) {
	var keep any
	b.Run("sdk-standard", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			keep = retry.NewStandard()
		}
	})
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			keep = jitterretry.New()
		}
	})
	_ = keep
}

// BenchmarkDeepErrorChain is IsErrorRetryable, what the SDK's middleware
// asks of every failed attempt, on a throttle under depth fmt.Errorf %w
// wrappers, beside the SDK's: past 64 wrappers ours reads the rest of the
// chain for a cycle or a nil pointer (and does not find the throttle; see
// TestARetryableErrorPastTheWalksDepthIsNotFound), the SDK's errors.As
// reads it for the throttle.
func BenchmarkDeepErrorChain(b *testing.B) {
	for _, depth := range []int{16, 1000, 4000} {
		err := throttleErr()
		for range depth {
			err = fmt.Errorf("layer: %w", err)
		}
		for _, r := range []namedRetryer{
			{"sdk-standard", func() aws.RetryerV2 { return retry.NewStandard() }},
			{"ours", func() aws.RetryerV2 { return jitterretry.New() }},
		} {
			b.Run(fmt.Sprintf("depth=%d/%s", depth, r.name), func(b *testing.B) {
				rt := r.new()
				b.ReportAllocs()
				for b.Loop() {
					_ = rt.IsErrorRetryable(err)
				}
			})
		}
	}
}
