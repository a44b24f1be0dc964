package jitterretry_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/stretchr/testify/assert"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// TestTheHotPathsAllocateNothing holds the README's "0 allocs" of the
// Speed section and issue 15's cost target as a test, not only a
// benchmark's column: an attempt (BenchmarkAttempt's cycle) with and
// without the send-rate limiter, and a failed attempt's whole retry
// decision (BenchmarkRetryDecision's) under every strategy, with no
// deadline, a shared one and a fresh one per operation (less what the
// context itself allocates). A count of zero does not move with the Go
// version, as the benchmarks' other counts do. The race detector makes
// some allocations of its own, so it runs without.
func TestTheHotPathsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates; the counts are read without it")
	}
	shared, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	operation := awsmiddle.SetRegion(awsmiddle.SetOperationName(awsmiddle.SetServiceID(shared, "DynamoDB"), "PutItem"), "us-east-1")

	attempts := map[string]func(*jitterretry.Options){
		"no limiter":         func(*jitterretry.Options) {},
		"limiter, unlimited": func(o *jitterretry.Options) { o.SendRate = &jitterretry.SendRateOptions{} },
		"limiter, pacing": func(o *jitterretry.Options) {
			o.SendRate = &jitterretry.SendRateOptions{InitialRate: 1e12, MinRate: 1e12}
		},
		"partitions, limiter": func(o *jitterretry.Options) {
			o.PartitionKey = jitterretry.PartitionFromContext
			o.SendRate = &jitterretry.SendRateOptions{}
		},
	}
	for name, opt := range attempts {
		r := jitterretry.New(opt)
		ctx := jitterretry.WithPartition(operation, "tenant-1")
		allocs := testing.AllocsPerRun(500, func() {
			release, err := r.GetAttemptToken(ctx)
			if err != nil {
				panic(err)
			}
			_ = release(nil)
		})
		assert.Zero(t, allocs, "expect an attempt (%s) to allocate nothing", name)
	}

	fresh := func(r aws.RetryerV2, throttle error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		retryDecision(ctx, r, throttle)
		cancel()
	}
	contextAlone := testing.AllocsPerRun(500, func() {
		_, cancel := context.WithTimeout(context.Background(), time.Hour)
		cancel()
	})
	for _, s := range delayers.Strategies() {
		r := jitterretry.New(func(o *jitterretry.Options) { o.Jitter = s })
		throttle := throttleErr()
		decision := func(ctx context.Context) float64 {
			return testing.AllocsPerRun(500, func() { retryDecision(ctx, r, throttle) })
		}
		assert.Zero(t, decision(context.Background()), "expect a retry decision (%s, no deadline) to allocate nothing", s)
		assert.Zero(t, decision(shared), "expect a retry decision (%s, a shared deadline) to allocate nothing", s)
		assert.Zero(t, testing.AllocsPerRun(500, func() { fresh(r, throttle) })-contextAlone,
			"expect a retry decision (%s, a fresh deadline) to allocate nothing but its context", s)
	}
}
