package fault_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
	"github.com/jitterretry/jitterretry/examples/internal/fault"
)

// jitterretry.AttemptTimeout on real HTTP: a real DynamoDB client, the
// embedded server, and toxiproxy between them holding the first attempt's
// response (a stall, or a latency spike). The client has no HTTP timeout:
// only the attempt timeout can end a stalled attempt.

// withAttemptTimeout returns a client like c, on the same connections, whose
// every attempt is bounded by d.
func withAttemptTimeout(c *dynamodb.Client, d time.Duration) *dynamodb.Client {
	return dynamodb.New(c.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, jitterretry.AttemptTimeout(d))
	})
}

// retryLog records the retries of an operation and when they were decided,
// and removes the proxy's toxics at the first, so that only the first
// attempt meets the fault.
type retryLog struct {
	mu     sync.Mutex
	start  time.Time
	events []jitterretry.RetryEvent
	at     []time.Duration
}

func (l *retryLog) onRetry(p *fault.Proxy) func(jitterretry.RetryEvent) {
	return func(e jitterretry.RetryEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.events = append(l.events, e)
		l.at = append(l.at, time.Since(l.start))
		p.Reset()
	}
}

func (l *retryLog) snapshot() ([]jitterretry.RetryEvent, []time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]jitterretry.RetryEvent(nil), l.events...), append([]time.Duration(nil), l.at...)
}

// faultyTable returns a table on the embedded server, a toxiproxy in front of
// the server, and a client of the proxy with a jitterretry.Retryer (the
// SDK's DynamoDB defaults, learnt margin) whose retries are logged, and
// whose attempts are bounded by attemptTimeout.
func faultyTable(t *testing.T, attemptTimeout time.Duration, log *retryLog) (*dynamodb.Client, *fault.Proxy, string) {
	t.Helper()
	b := ddbtest.Minidyn(t)
	table := ddbtest.TableName("stall")
	b.CreateTable(t, table, "pk")
	p, err := fault.Start(b.URL)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) { o.OnRetry = log.onRetry(p) })
	require.NoError(t, r.Err())
	c := b.NewClient(t, p.URL(), func(o *ddbtest.ClientOptions) { o.Retryer = r })
	t.Cleanup(c.Close) // before the proxy closes (cleanups run last first)
	return withAttemptTimeout(c.Client, attemptTimeout), p, table
}

func TestDeadlineStalledAttemptIsCutAndRetried(t *testing.T) {
	const (
		attemptTimeout = 250 * time.Millisecond
		deadline       = 3 * time.Second
	)
	for _, tc := range []struct {
		name  string
		toxic fault.Toxic
	}{
		{"stall", fault.Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}},
		{"latency spike", fault.Toxic{Type: "latency", Attributes: map[string]int64{"latency": 2000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log retryLog
			client, p, table := faultyTable(t, attemptTimeout, &log)
			require.NoError(t, p.Add(tc.toxic))
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()

			log.start = time.Now()
			err := putItem(ctx, client, table)
			took := time.Since(log.start)

			require.NoError(t, err, "expect the retry after the cut attempt to succeed")
			events, at := log.snapshot()
			require.Len(t, events, 1, "expect one cut attempt and one retry")
			assert.ErrorIs(t, events[0].Err, jitterretry.ErrAttemptTimeout, "expect the first attempt cut by its own timeout")
			assert.Equal(t, jitterretry.ClassTransient, events[0].Class)
			assert.GreaterOrEqual(t, at[0], attemptTimeout, "expect no cut before the attempt timeout")
			assert.Less(t, at[0], deadline, "expect the cut before the operation's deadline")
			out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
			})
			require.NoError(t, err)
			assert.NotEmpty(t, out.Item, "expect the item written")
			t.Logf("%s: first attempt cut %v after the call began (attempt timeout %v), call done after %v of its %v; cut: %v",
				tc.name, at[0].Round(time.Millisecond), attemptTimeout, took.Round(time.Millisecond), deadline, events[0].Err)
		})
	}
}

func TestDeadlineLatencyBelowTheAttemptTimeoutIsNotCut(t *testing.T) {
	var log retryLog
	client, p, table := faultyTable(t, time.Second, &log)
	require.NoError(t, p.Add(fault.Toxic{Type: "latency", Attributes: map[string]int64{"latency": 100}}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	log.start = time.Now()
	err := putItem(ctx, client, table)
	took := time.Since(log.start)

	require.NoError(t, err)
	events, _ := log.snapshot()
	assert.Empty(t, events, "expect a 100 ms latency to be waited for, not cut at the 1 s attempt timeout")
	assert.GreaterOrEqual(t, took, 100*time.Millisecond, "expect the latency toxic to have acted")
	t.Logf("100 ms latency, 1 s attempt timeout: one attempt, %v", took.Round(time.Millisecond))
}

func TestDeadlineStallWithLessTimeThanTheAttemptTimeout(t *testing.T) {
	// The attempt's own timeout (10 s) is longer than the operation has: the
	// attempt is cut just before the operation's deadline, so that the
	// retryer can still give up with a typed error that says what happened,
	// and no retry is made.
	// The context reports a deadline 500 ms away but ends only 5 s from now,
	// so the cut, 5 ms before the deadline reported, is the only timer that
	// can end the stalled attempt in time: with a context that ended at
	// 500 ms, a cut whose timer's goroutine ran 10 ms late lost to the
	// context's own timer, and the SDK returned its bare "canceled, context
	// deadline exceeded". An attempt left uncut still runs into the late end
	// and fails the same way.
	var log retryLog
	client, p, table := faultyTable(t, 10*time.Second, &log)
	require.NoError(t, p.Add(fault.Toxic{Type: "timeout", Attributes: map[string]int64{"timeout": 0}}))
	ends, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx := earlyDeadline{Context: ends, deadline: time.Now().Add(500 * time.Millisecond)}

	log.start = time.Now()
	err := putItem(ctx, client, table)
	took := time.Since(log.start)

	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu, "expect the retryer's give-up, got %T: %v", err, err)
	assert.ErrorIs(t, err, jitterretry.ErrAttemptTimeout, "expect the cut attempt inside the give-up")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	events, _ := log.snapshot()
	assert.Empty(t, events, "expect no retry without time for one")
	t.Logf("stall, 10 s attempt timeout, 500 ms deadline: %v after %v (reason %v)", err, took.Round(time.Millisecond), gu.Reason)
}

// earlyDeadline is a context whose Deadline reports an earlier time than the
// one at which it ends, so that AttemptTimeout and the retryer size their
// cut and their decision by the reported deadline while the cut is the only
// timer that can end the attempt by then.
type earlyDeadline struct {
	context.Context
	deadline time.Time
}

func (c earlyDeadline) Deadline() (time.Time, bool) { return c.deadline, true }
