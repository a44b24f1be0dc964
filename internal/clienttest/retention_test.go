package clienttest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// TestWhatFinishedRequestsLeaveIsBounded: once an operation of a real
// client is over, what the retryer keeps that reaches its request's context
// is bounded by count. The SDK's errors hold their response, its request and
// the request's context, so an error kept is a context kept. Under the SDK's
// middleware nothing is. The hand-off from GetRetryToken to RetryDelay keys
// its 256 slots on error values, and keeps, in each, its last entry's error
// (and context) and the errors of up to four operations it evicted, until
// other errors need the slot: for the retryer's life when no RetryDelay
// takes them, under a wrapper that replaces it or for retries refused on an
// empty bucket (helper-68: 408 MB with 1 MB context values; helper-70). The
// classification cache keeps the last attempt's error of up to 64
// operations that ran out of attempts. Keying on the error's type and
// address instead kept none, and let an address reused after its error was
// collected make other operations' hand-offs ambiguous: most deadline
// checks were skipped after refusals (helper-73), so the slots keep the
// errors. Each slot also keeps, for one more sweep, the errors of up to
// five operations a sweep forgot: ten errors a slot at most. Counted only
// once the sweeps had run, this held the count to five a slot, where
// helper-250 counted 2,418 right after 5,000 operations; it is counted at
// once now too, with room for the HTTP client's last requests. The sweeps
// then let go of them all: the errors a sweep forgot at the next, every
// slot's entry at the second that finds it (helper-254 counted 2,379 at
// once, 1,278 after 4 s, 0 after 8 s).
func TestWhatFinishedRequestsLeaveIsBounded(t *testing.T) {
	type payloadKey struct{}
	cases := []struct {
		name   string
		wrap   func(aws.Retryer) aws.Retryer
		script []reply
		bucket uint
		bound  int
		swept  bool // by the hand-off's sweeps, which run on a timer
	}{
		{"the SDK's middleware", func(r aws.Retryer) aws.Retryer { return r }, []reply{serverErr, ok}, 1 << 30, 0, false},
		{"under retry.AddWithMaxBackoffDelay", func(r aws.Retryer) aws.Retryer {
			return retry.AddWithMaxBackoffDelay(r, time.Microsecond)
		}, []reply{serverErr, ok}, 1 << 30, 10 * 256, true},
		{"retries refused on an empty bucket", func(r aws.Retryer) aws.Retryer { return r }, []reply{serverErr}, 14, 10 * 256, true},
		{"every attempt failing", func(r aws.Retryer) aws.Retryer { return r }, []reply{serverErr}, 1 << 30, 64, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newScriptServer(t, c.script...)
			srv.cycle = true
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.BaseDelay, o.MaxBackoff = time.Microsecond, time.Microsecond
				o.BucketCapacity = c.bucket
			})
			client := newClient(srv.URL, c.wrap(r))
			const operations = 3000
			payloads := make([]weak.Pointer[[1024]byte], 0, operations)
			for range operations {
				payload := new([1024]byte)
				payloads = append(payloads, weak.Make(payload))
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), payloadKey{}, payload), time.Hour)
				err := putItem(ctx, client)
				cancel()
				if len(c.script) > 1 {
					require.NoError(t, err)
				}
				if c.bucket == 14 {
					require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
				}
			}
			atOnce := countAlive(payloads)
			alive := collectAndCount(payloads, c.bound+8, 3*time.Second)
			t.Logf("contexts of finished requests alive: %d at once, %d after collections", atOnce, alive)
			// The runtime and the HTTP client may still hold a few requests
			// (idle connections, stopped timers), more at once on a busy
			// machine.
			assert.LessOrEqual(t, atOnce, c.bound+64, "expect at most %d contexts of finished requests kept at once", c.bound+64)
			assert.LessOrEqual(t, alive, c.bound+8, "expect at most %d contexts of finished requests kept", c.bound+8)
			if c.swept {
				// Two sweeps, 2 s apart, 2 s after a hand-off: 6 s after
				// the last; a busy machine's timers may fire late.
				left := collectAndCount(payloads, 8, 20*time.Second)
				t.Logf("contexts of finished requests alive once the sweeps ran: %d", left)
				assert.LessOrEqual(t, left, 8, "expect the sweeps to let go of the contexts of finished requests")
			}
			runtime.KeepAlive(r)
		})
	}
}

// TestAttemptTimeoutKeepsNoInputOfASuccessfulCall: AttemptTimeout left a
// successful attempt's context to its timer, so that a body streamed later
// stays bounded; under a caller's context that lives on (a worker's), each
// such context stayed attached to it for the whole timeout, and held the
// operation's input through the SDK's context values: 300 PutItems of
// 64 KiB at an hour's timeout kept all 300 inputs, 20 MB (an outside
// review). The attempt's context now ends once the response body is
// closed, which the SDK does in the attempt for DynamoDB's operations.
func TestAttemptTimeoutKeepsNoInputOfASuccessfulCall(t *testing.T) {
	srv := newScriptServer(t, ok)
	client := newClient(srv.URL, jitterretry.New())
	ctx, cancel := context.WithCancel(context.Background()) // a worker's, living on
	defer cancel()
	const calls = 300
	inputs := make([]weak.Pointer[dynamodb.PutItemInput], 0, calls)
	for range calls {
		in := &dynamodb.PutItemInput{
			TableName: aws.String("orders"),
			Item: map[string]types.AttributeValue{
				"pk":      &types.AttributeValueMemberS{Value: "a"},
				"payload": &types.AttributeValueMemberB{Value: make([]byte, 64<<10)},
			},
		}
		inputs = append(inputs, weak.Make(in))
		_, err := client.PutItem(ctx, in, dynamodb.WithAPIOptions(jitterretry.AttemptTimeout(time.Hour)))
		require.NoError(t, err)
	}
	alive := collectAndCount(inputs, 8, 3*time.Second)
	// The HTTP client may still hold a few requests (idle connections).
	assert.LessOrEqual(t, alive, 8, "expect the inputs of finished calls collected, %d of %d kept", alive, calls)
	require.NoError(t, ctx.Err())
}

// TestPartitionKeysKeepNoStringTheyWereCutFrom: a partition key cut from
// a larger string (a table name read out of a request's body) was kept as
// given, so each partition the retryer remembered held its whole source: a
// handler keying 200 partitions on names cut from 1 MiB payloads grew the
// heap by 202 MiB (helper-109). The retryer now keeps its own copy of a
// new key.
func TestPartitionKeysKeepNoStringTheyWereCutFrom(t *testing.T) {
	srv := newScriptServer(t, serverErr, ok)
	srv.cycle = true
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.MaxBackoff = time.Microsecond, time.Microsecond
		o.PartitionKey = jitterretry.PartitionFromContext
	})
	client := newClient(srv.URL, r)
	const partitions = 200
	payloads := make([]weak.Pointer[byte], 0, partitions)
	for i := range partitions {
		payload := fmt.Sprintf("orders-%04d|%s", i, strings.Repeat("x", 16<<10))
		payloads = append(payloads, weak.Make(unsafe.StringData(payload)))
		table, _, _ := strings.Cut(payload, "|")
		require.NoError(t, putItem(jitterretry.WithPartition(context.Background(), table), client))
	}
	alive := collectAndCount(payloads, 8, 3*time.Second)
	// The HTTP client may still hold a few requests (idle connections).
	assert.LessOrEqual(t, alive, 8, "expect the payloads the keys were cut from collected, %d of %d kept", alive, partitions)
	runtime.KeepAlive(r)
}

// collectAndCount runs the garbage collector and returns how many of ptrs
// still point to a value: as soon as that is atMost or fewer, or after 3 s
// of collections. Two collections were enough on a quiet machine; on a busy
// one the HTTP client's and server's goroutines may still hold the last
// requests for a while (a GC test with a fixed wait failed so under load),
// and what the retryer keeps, it keeps for good.
func collectAndCount[T any](ptrs []weak.Pointer[T], atMost int, within time.Duration) int {
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if alive := countAlive(ptrs); alive <= atMost || time.Now().After(end) {
			return alive
		}
	}
}

// countAlive runs the garbage collector once and returns how many of ptrs
// still point to a value.
func countAlive[T any](ptrs []weak.Pointer[T]) int {
	runtime.GC()
	alive := 0
	for _, p := range ptrs {
		if p.Value() != nil {
			alive++
		}
	}
	return alive
}
