package clienttest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// coldFetch is how long slowFirstCredentials takes the first time.
const coldFetch = 500 * time.Millisecond

// slowFirstCredentials hands out credentials after coldFetch the first time,
// as a fetch from IMDS, a container endpoint or STS does on a cold start,
// and at once after that (the SDK's credentials cache would not ask again).
type slowFirstCredentials struct{ calls atomic.Int32 }

func (s *slowFirstCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	if s.calls.Add(1) == 1 {
		time.Sleep(coldFetch)
	}
	return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
}

// newColdClient returns a DynamoDB client whose first attempt signs with
// credentials fetched then, inside the attempt the retryer times.
func newColdClient(url string, r aws.Retryer) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  aws.NewCredentialsCache(&slowFirstCredentials{}),
		Retryer:      r,
	})
}

// TestAColdStartsCredentialFetchDoesNotRefuseTheRetry: a new client's first
// PutItem fetches credentials for 500 ms and gets a 500. Its retry needs a
// millisecond, and retry.NewStandard() makes it within the caller's 1.5 s.
// Timed as any attempt, the cold one made a margin of twice its time, which
// refused the retry with under 1 s left (hunt277: 805 ms of margin after a
// 400 ms fetch, 598 ms left of 1 s). Counted once, the margin leaves some
// 250 ms for a busy machine's delays.
func TestAColdStartsCredentialFetchDoesNotRefuseTheRetry(t *testing.T) {
	run := func(r aws.Retryer) (error, int) {
		srv := newScriptServer(t, serverErr, ok)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		return putItem(ctx, newColdClient(srv.URL, r)), srv.Calls()
	}
	err, calls := run(retry.NewStandard())
	require.NoError(t, err, "the SDK's retryer retries and succeeds")
	require.Equal(t, 2, calls)
	err, calls = run(jitterretry.New())
	require.NoError(t, err, "expect the retry made: it needs no credential fetch")
	assert.Equal(t, 2, calls)
}

// TestAColdStartsFirstConflictIsNotSizedByTheCredentialFetch: Do sizes its
// first conflict's window as 28 round trips, a round trip half of fn's
// call. On a new client that call held a credential fetch, and the
// first conflict's backoff was drawn from a window of 28 such round trips
// (1-5 s drawn after a 400 ms fetch, against 0.5-7 ms on a warm client:
// hunt277). It is now drawn within one
// such round trip: at most half the cold call.
func TestAColdStartsFirstConflictIsNotSizedByTheCredentialFetch(t *testing.T) {
	for range 5 {
		srv := newScriptServer(t, ccf, ok)
		var delays []time.Duration
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.OnRetry = func(e jitterretry.RetryEvent) { delays = append(delays, e.Delay) }
		})
		c := newColdClient(srv.URL, r)
		var firstCall time.Duration
		calls := 0
		err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
			calls++
			start := time.Now()
			err := putItem(ctx, c)
			if calls == 1 {
				firstCall = time.Since(start)
				return jitterretry.Conflict(err, 1, 2) // the versions known: the informed first window
			}
			return err
		})
		require.NoError(t, err)
		t.Logf("cold call %v, first conflict's backoff %v", firstCall, delays)
		require.Len(t, delays, 1)
		require.GreaterOrEqual(t, firstCall, coldFetch)
		assert.LessOrEqual(t, delays[0], firstCall, "expect the first conflict's backoff within the cold call's time, not 28 round trips of it")
	}
}
