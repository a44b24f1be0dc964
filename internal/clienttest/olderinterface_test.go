package clienttest_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// olderDecorator is a decorator written against aws.Retryer, as many are
// (to override IsErrorRetryable, say): it hides the RetryerV2 methods, so
// the SDK's middleware begins each attempt with GetInitialToken, which has
// no context.
type olderDecorator struct{ aws.Retryer }

// TestPartitionsBehindAnOlderDecoratorRecover: behind such a decorator the
// first attempts' successes can only credit the shared partition, while
// each retry was charged to its operation's partition, which nothing then
// refilled: once spent below a retry's cost, every later 5xx of that
// operation was refused for the life of the process, where
// retry.NewStandard() recovers (helper-183). Retries now draw from the
// shared partition while the older interface is in use, as the SDK's one
// bucket does.
func TestPartitionsBehindAnOlderDecoratorRecover(t *testing.T) {
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.BucketCapacity = 100
		o.PartitionKey = jitterretry.PartitionByOperation
	})
	failing := newScriptServer(t, serverErr, serverErr, ok) // one failed retry per operation: 14 tokens
	failing.cycle = true
	client := newClient(failing.URL, olderDecorator{r})
	for range 6 {
		requireNoErr(t, putItem(context.Background(), client))
	}

	recovered := newScriptServer(t, ok)
	client = newClient(recovered.URL, olderDecorator{r})
	for range 100 {
		requireNoErr(t, putItem(context.Background(), client))
	}

	again := newScriptServer(t, serverErr, serverErr, ok)
	require.NoError(t, putItem(context.Background(), newClient(again.URL, olderDecorator{r})),
		"expect the retries made once the first attempts' successes refilled the bucket")
	assert.Equal(t, 3, again.Calls())
}

// TestADirectClientKeepsItsPartitionBesideAnOlderDecorator: one call
// through an older decorator on another client sent every retry of the
// retryer's direct clients to the shared partition for a minute: a client
// throttled on every request then drained the budget of a client in a
// partition of its own, which had 5 of 10 calls refused, none without the
// decorator (helper-184). A partition whose attempts come through
// GetAttemptToken keeps its retries.
func TestADirectClientKeepsItsPartitionBesideAnOlderDecorator(t *testing.T) {
	r := jitterretry.New(fast, func(o *jitterretry.Options) {
		o.PartitionKey = jitterretry.PartitionFromContext
		o.FailFastOnEmptyBudget = true
	})
	older := newScriptServer(t, ok)
	requireNoErr(t, putItem(context.Background(), newClient(older.URL, olderDecorator{r})))

	hot := newClient(newScriptServer(t, throttle).URL, r)
	for range 60 {
		_ = putItem(jitterretry.WithPartition(context.Background(), "hot"), hot)
	}
	coldServer := newScriptServer(t, serverErr, ok)
	coldServer.cycle = true
	cold := newClient(coldServer.URL, r)
	for range 10 {
		require.NoError(t, putItem(jitterretry.WithPartition(context.Background(), "cold"), cold))
	}
	assert.Equal(t, uint(500), r.Remaining(), "expect the shared partition untouched by the direct clients' retries")
}
