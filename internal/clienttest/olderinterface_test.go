package clienttest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// olderDecorator is a decorator written against aws.Retryer, as many are
// (to override IsErrorRetryable, say): it hides the RetryerV2 methods, so
// the SDK's middleware begins each attempt with GetInitialToken, which has
// no context.
type olderDecorator struct{ aws.Retryer }

// newerDecorator is the same decorator written against aws.RetryerV2.
type newerDecorator struct{ aws.RetryerV2 }

// TestPartitionsNeedRetryerV2OrARefill: behind a decorator that hides
// RetryerV2, the first attempts' successes refill only the shared
// partition, and a partition earns back only its successful retries'
// refunds: once spent below a retry's cost, it refuses its operation's
// retries for good, where retry.NewStandard()'s one bucket recovers
// (helper-183). Three attempts to route such retries to the shared
// partition each broke another case (helper-184, -185, -186); the
// documented ways out are a decorator that keeps RetryerV2, or
// BucketRefill.
func TestPartitionsNeedRetryerV2OrARefill(t *testing.T) {
	cases := map[string]struct {
		refill  float64
		wrap    func(*jitterretry.Retryer) aws.Retryer
		refused bool
	}{
		"behind an older decorator":                {wrap: func(r *jitterretry.Retryer) aws.Retryer { return olderDecorator{r} }, refused: true},
		"behind an older decorator, with a refill": {refill: 1000, wrap: func(r *jitterretry.Retryer) aws.Retryer { return olderDecorator{r} }},
		"behind a decorator that keeps RetryerV2":  {wrap: func(r *jitterretry.Retryer) aws.Retryer { return newerDecorator{r} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(fast, func(o *jitterretry.Options) {
				o.BucketCapacity = 100
				o.BucketRefill = tc.refill
				o.PartitionKey = jitterretry.PartitionByOperation
			})
			failing := newScriptServer(t, serverErr, serverErr, ok) // one failed retry per operation: 14 tokens
			failing.cycle = true
			client := newClient(failing.URL, tc.wrap(r))
			for range 7 {
				_ = putItem(context.Background(), client)
			}
			recovered := newClient(newScriptServer(t, ok).URL, tc.wrap(r))
			for range 100 {
				requireNoErr(t, putItem(context.Background(), recovered))
			}
			time.Sleep(20 * time.Millisecond) // 20 tokens of the refill, if any

			err := putItem(context.Background(), newClient(newScriptServer(t, serverErr, ok).URL, tc.wrap(r)))
			if !tc.refused {
				require.NoError(t, err)
				return
			}
			var quota ratelimit.QuotaExceededError
			assert.ErrorAs(t, err, &quota, "expect the partition spent for good, as documented")
		})
	}
}
