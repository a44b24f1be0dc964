package clienttest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// coldFetch is how long a cold client's first credential fetch takes,
// unless a test says otherwise.
const coldFetch = 500 * time.Millisecond

// slowFirstCredentials hands out credentials after fetch the first time,
// as a fetch from IMDS, a container endpoint or STS does on a cold start,
// and at once after that (the SDK's credentials cache would not ask again).
type slowFirstCredentials struct {
	fetch time.Duration
	calls atomic.Int32
}

func (s *slowFirstCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	if s.calls.Add(1) == 1 {
		time.Sleep(s.fetch)
	}
	return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET"}, nil
}

// newColdClient returns a DynamoDB client whose first attempt signs with
// credentials fetched then, in coldFetch, inside the attempt the retryer
// times.
func newColdClient(url string, r aws.Retryer) *dynamodb.Client {
	return newColdClientIn("us-east-1", url, r)
}

// newColdClientIn is newColdClient for a client of region.
func newColdClientIn(region, url string, r aws.Retryer) *dynamodb.Client {
	return newColdClientFetching(coldFetch, region, url, r)
}

// newColdClientFetching is newColdClientIn with a first fetch of fetch.
func newColdClientFetching(fetch time.Duration, region, url string, r aws.Retryer) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(url),
		Credentials:  aws.NewCredentialsCache(&slowFirstCredentials{fetch: fetch}),
		Retryer:      r,
	})
}

// TestAColdStartsCredentialFetchDoesNotRefuseTheRetry: a new client's first
// PutItem fetches credentials for 500 ms and gets a 500. Its retry needs a
// millisecond, and retry.NewStandard() makes it within the caller's 1.5 s.
// Timed as any attempt, the cold one made a margin of twice its time, which
// refused the retry with under 1 s left (hunt277: 805 ms of margin after a
// 400 ms fetch, 598 ms left of 1 s).
func TestAColdStartsCredentialFetchDoesNotRefuseTheRetry(t *testing.T) {
	requireTheColdRetryMade(t, coldFetch, "us-east-1", func(aws.Retryer) {})
}

// TestAColdStartsLongCredentialFetchDoesNotRefuseTheRetry: the same with a
// fetch of 1 s, most of the caller's 1.5 s. Counted once, the cold attempt
// still made a margin of 1 s, which refused the retry with some 500 ms left,
// where the SDK's retryer made it (helper-174, under the Lambda emulator:
// an 800 ms AssumeRole in a 2 s function failed every cold invocation
// throttled once). A retry pays none of a cold attempt's one-time costs,
// and how much of its time they were is unknown: an estimate of cold
// attempts only keeps no margin, as the SDK's.
func TestAColdStartsLongCredentialFetchDoesNotRefuseTheRetry(t *testing.T) {
	requireTheColdRetryMade(t, time.Second, "us-east-1", func(aws.Retryer) {})
}

// requireTheColdRetryMade makes a cold client of region, whose first
// credential fetch takes fetch, call PutItem, answered with a 500 and then a
// success, under a 1.5 s deadline, first with retry.NewStandard() and then
// with jitterretry.New(), each after warm(retryer): both must make the
// retry and succeed.
func requireTheColdRetryMade(t *testing.T, fetch time.Duration, region string, warm func(aws.Retryer)) {
	t.Helper()
	for _, c := range []struct {
		name string
		r    aws.Retryer
	}{{"the SDK's retryer", retry.NewStandard()}, {"jitterretry", jitterretry.New()}} {
		warm(c.r)
		srv := newScriptServer(t, serverErr, ok)
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		err := putItem(ctx, newColdClientFetching(fetch, region, srv.URL, c.r))
		cancel()
		require.NoError(t, err, "%s: expect the retry made: it needs no credential fetch", c.name)
		assert.Equal(t, 2, srv.Calls(), c.name)
	}
}

// TestACutDuringTheCredentialFetchLeavesTheNextCallerCold: a new client's
// first caller, with a 50 ms deadline, is cut during its 2 s credential
// fetch; a second caller, 100 ms later with 4 s, waits for the same fetch
// and gets a 500. Its attempt is cold, and its retry is made, as
// retry.NewStandard() makes it. Taken for the moment the client's one-time
// costs were paid, the cut made the second attempt warm, and its margin
// (twice its 1.9 s) refused the retry with some 2.1 s left (helper-212, at
// 400 ms and 800, where a stall of a busy machine ended the deadline:
// helper-230).
func TestACutDuringTheCredentialFetchLeavesTheNextCallerCold(t *testing.T) {
	srv := newScriptServer(t, serverErr, ok)
	r := jitterretry.New()
	require.NoError(t, r.Err())
	client := newColdClientFetching(2*time.Second, "us-east-1", srv.URL, r)
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		first <- putItem(ctx, client)
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	assert.NoError(t, putItem(ctx, client), "expect the 500's retry made")
	assert.ErrorIs(t, <-first, context.DeadlineExceeded)
	assert.Equal(t, 2, srv.Calls())
}

// TestAClientJoiningAWarmRetryerHasItsColdStartJudgedCold: one retryer
// serves the clients of two regions, as config.WithRetryer's does for
// every client made from the configuration. A client of the second region,
// made once the first has warmed the retryer, fetches credentials for
// 500 ms in its first PutItem and gets a 500. Judged cold by the lane, which
// the first client had warmed, that attempt counted as a warm one, twice,
// and refused the retry with about 1 s left of 1.5 s (helper-147 saw 804 ms
// kept, 598 ms left); its region's estimate judges it cold, as a client of
// its own would.
func TestAClientJoiningAWarmRetryerHasItsColdStartJudgedCold(t *testing.T) {
	requireTheColdRetryMade(t, coldFetch, "eu-west-1", func(r aws.Retryer) {
		warm := newScriptServer(t, ok)
		for range 4 {
			require.NoError(t, putItem(context.Background(), newClient(warm.URL, r)))
		}
	})
}

// TestAFarRegionsAttemptsDoNotRefuseANearRegionsRetries: one retryer
// serves the clients of two regions, one a second away. The near region's
// PutItem fails once with a 500 and needs a millisecond to retry; under a
// 1.5 s deadline, retry.NewStandard() retries every one. Estimated from
// both regions' attempts, the margin was twice the far one's and refused
// every one (helper-147, at 300 ms and 450); each region's PutItem has its
// own estimate. (At 300 ms and 450, a stall of a busy machine failed some
// of the SDK's too: helper-230.)
func TestAFarRegionsAttemptsDoNotRefuseANearRegionsRetries(t *testing.T) {
	run := func(r aws.Retryer) (failed int) {
		near := newScriptServer(t, serverErr, ok)
		near.cycle = true
		nearClient := newClientIn("us-east-1", near.URL, r)
		for range 4 {
			require.NoError(t, putItem(context.Background(), nearClient))
		}
		far := newScriptServer(t, reply{delay: time.Second})
		farClient := newClientIn("ap-southeast-2", far.URL, r)
		for range 4 {
			require.NoError(t, putItem(context.Background(), farClient))
		}
		for range 10 {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			if err := putItem(ctx, nearClient); err != nil {
				t.Log(err)
				failed++
			}
			cancel()
		}
		return failed
	}
	require.Zero(t, run(retry.NewStandard()), "the SDK's retryer retries every one")
	assert.Zero(t, run(jitterretry.New()), "expect the near region's retries made")
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

// TestAColdStartsLongCredentialFetchDoesNotRefuseDosRetry: a cold client
// fetches credentials for 1 s in its first call, and fn's first call ends
// in a failed condition, which Do retries as a conflict, under a 2 s
// deadline: fn one PutItem; a GetItem, then a PutItem (a read-modify-write
// fn); a PutItem answered first with a 500, which the SDK retries inside
// fn. Do's margin was at least fn's last call, the fetch in it: "backoff
// 464ms, and 1.002s kept for the attempt after it, would end past the
// context deadline (498ms left)" (helper-176, under 1.5 s); left out only
// while the client's timed attempts were all cold, it still refused the
// other two, whose second attempt was warm (helper-178: every cold
// invocation of a Lambda function whose first call met a 500 and then a
// conflict). The first conflict's backoff is drawn within half the cold
// call, so the retry has some 500 ms.
func TestAColdStartsLongCredentialFetchDoesNotRefuseDosRetry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []reply
		fn     func(context.Context, *dynamodb.Client) error
	}{
		{"one write", []reply{ccf, ok}, putItem2},
		{"a read, then a write", []reply{ok, ccf, ok, ok}, func(ctx context.Context, c *dynamodb.Client) error {
			if err := getItem(ctx, c); err != nil {
				return err
			}
			return putItem(ctx, c)
		}},
		{"a 500 the SDK retries inside fn", []reply{serverErr, ccf, ok}, putItem2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptServer(t, tc.script...)
			r := jitterretry.New()
			require.NoError(t, r.Err())
			c := newColdClientFetching(time.Second, "us-east-1", srv.URL, r)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			calls, err := countedDo(ctx, r, func(ctx context.Context) error { return tc.fn(ctx, c) })
			require.NoError(t, err, "expect the conflict's retry made")
			assert.Equal(t, 2, calls)
		})
	}
}

// putItem2 is putItem without options, as a Do loop's fn calls it.
func putItem2(ctx context.Context, c *dynamodb.Client) error { return putItem(ctx, c) }

// getItem reads the item putItem writes.
func getItem(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("orders"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	})
	return err
}

// countedDo runs jitterretry.Do and returns how many times it called fn.
func countedDo(ctx context.Context, r *jitterretry.Retryer, fn func(context.Context) error) (calls int, err error) {
	err = jitterretry.Do(ctx, r, func(ctx context.Context) error {
		calls++
		return fn(ctx)
	})
	return calls, err
}

// TestDoKeepsTheWarmPartOfAColdCall: fn writes through a warm client of a
// far region (1 s an attempt), then reads and writes through a new client
// whose first call fetches credentials for 1 s; the write's condition
// fails with some 0.9 s of 2.9 s left. Every call of fn pays the far write
// again, so the retry cannot end in time and is refused before the
// deadline. Judged by whether the call began before the new client's first
// answer, the whole call was left out of Do's margin, the far write with
// the fetch, and the retry ran into the deadline (helper-179, at 200 ms
// and 1.36 s, where a stall of a busy machine ended the deadline during
// the fetch: helper-230); only the cold attempt's time is left out.
func TestDoKeepsTheWarmPartOfAColdCall(t *testing.T) {
	far := newScriptServer(t, reply{delay: time.Second})
	near := newScriptServer(t, ok, ccf, ok)
	r := jitterretry.New()
	require.NoError(t, r.Err())
	warm := newClientIn("eu-west-1", far.URL, r)
	for range 3 {
		require.NoError(t, putItem(context.Background(), warm))
	}
	cold := newColdClientFetching(time.Second, "us-east-1", near.URL, r)
	ctx, cancel := context.WithTimeout(context.Background(), 2900*time.Millisecond)
	defer cancel()
	calls, err := countedDo(ctx, r, func(ctx context.Context) error {
		if err := putItem(ctx, warm); err != nil {
			return err
		}
		if err := getItem(ctx, cold); err != nil {
			return err
		}
		return putItem(ctx, cold)
	})
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	assert.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "expect the retry refused: %v", err)
	assert.Equal(t, 1, calls)
}

// TestAClientJoiningAWarmRetryerHasItsColdCallLeftOutOfDo: a retryer
// warmed by 40 attempts of one region's client times one attempt in 16. A
// client of another region joins, fetching credentials for 1 s in its
// first call, which a Do loop makes; its condition fails, with some 1 s of
// 2 s left, and the next call needs a millisecond. Untimed, that cold
// attempt was not known to the loop, and the fetch stayed in fn's time:
// "1.001s kept for the attempt after it, would end past the context
// deadline (998ms left)" in 6 of 6 runs (helper-181). While a Do loop
// runs, an operation with no warm sample has every attempt timed.
func TestAClientJoiningAWarmRetryerHasItsColdCallLeftOutOfDo(t *testing.T) {
	r := jitterretry.New()
	require.NoError(t, r.Err())
	warm := newClientIn("eu-west-1", newScriptServer(t, ok).URL, r)
	for range 40 {
		require.NoError(t, putItem(context.Background(), warm))
	}
	srv := newScriptServer(t, ccf, ok)
	cold := newColdClientFetching(time.Second, "us-east-1", srv.URL, r)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	calls, err := countedDo(ctx, r, func(ctx context.Context) error { return putItem(ctx, cold) })
	require.NoError(t, err, "expect the conflict's retry made")
	assert.Equal(t, 2, calls)
}

// TestTwoEarlyStallsDoNotRefuseRetriesForLong: a client's 5th and 6th
// PutItems take 200 ms, its others a millisecond or so; after 40 calls,
// every call is answered with a 500 and then, retried, with a success,
// under a 300 ms deadline. retry.NewStandard() makes every retry. Every
// attempt is timed until 32 are, and the two stalls are then the margin's
// (twice the second largest, 400 ms) until the window has turned over:
// when timing dropped at once to one attempt in 16, that took some 90
// attempts, each an operation refused: 87, 24 and 40 of the 100 failed in
// three runs (helper-199 saw 48 to 74 of 300 fail in a row, with 800 ms
// stalls and 1 s deadlines). Timing one in 2, then 4, 8, 16 as the window
// turns over keeps it about the last attempts, each sample standing for
// as many as its neighbours: some 3 fail, more than 20 about once in
// 70,000 runs (fewer than 5 of 27 attempts timed, at one in 2).
func TestTwoEarlyStallsDoNotRefuseRetriesForLong(t *testing.T) {
	stall := reply{delay: 200 * time.Millisecond}
	requireFewRetriesRefused(t, []reply{ok, ok, ok, ok, stall, stall, ok}, 40, 300*time.Millisecond, 20)
}

// TestOneEarlyStallDoesNotRefuseRetries: the same with one stall of
// 400 ms among a client's first 11 calls, and 500 ms deadlines. The
// estimate was the largest sample until 32 were taken, so the stall was
// the margin (800 ms) and refused every retry until then (helper-200: 21
// operations in a row, a 1.5 s stall, 2 s deadlines); it is the second
// largest from the fourth sample on.
func TestOneEarlyStallDoesNotRefuseRetries(t *testing.T) {
	requireFewRetriesRefused(t, []reply{ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, {delay: 400 * time.Millisecond}, ok}, 11, 500*time.Millisecond, 0)
}

// requireFewRetriesRefused makes a client of retry.NewStandard() and one
// of jitterretry.New() call PutItem warmCalls times, answered by warm in
// order (the last answer for ever), and then 100 times under deadline,
// each answered with a 500 and, retried, a success; the SDK's must make
// every retry, ours may have refused at most most, each for the deadline.
func requireFewRetriesRefused(t *testing.T, warm []reply, warmCalls int, deadline time.Duration, most int) {
	t.Helper()
	const calls = 100
	for _, c := range []struct {
		name string
		r    aws.Retryer
		most int // operations that may fail
	}{{"the SDK's retryer", retry.NewStandard(), 0}, {"jitterretry", jitterretry.New(), most}} {
		warmClient := newClient(newScriptServer(t, warm...).URL, c.r)
		for range warmCalls {
			require.NoError(t, putItem(context.Background(), warmClient))
		}
		// A 500 for every first attempt, a success for every retry.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Header.Get("Amz-Sdk-Request"), "attempt=1;") {
				ddbwire.WriteError(w, http.StatusInternalServerError, ddbwire.InternalServerError, "scripted")
				return
			}
			ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
		}))
		t.Cleanup(srv.Close)
		client := newClient(srv.URL, c.r)
		failed, stalled := 0, 0
		for range calls {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			err := putItem(ctx, client)
			cancel()
			var g *jitterretry.GiveUpError
			switch {
			case err == nil:
			case !errors.As(err, &g) && errors.Is(err, context.DeadlineExceeded):
				// The attempts outlasted the deadline, which the SDK's
				// retryer, refusing nothing, met under load (helper-246:
				// 1 in 65 runs): the machine, not a refusal.
				stalled++
			default:
				failed++
				require.ErrorAs(t, err, &g, c.name)
				require.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%s: %v", c.name, err)
			}
		}
		assert.LessOrEqual(t, failed, c.most, "%s: %d of %d calls refused", c.name, failed, calls)
		assert.Less(t, stalled, calls/2, "%s: expect most calls judged", c.name)
		t.Logf("%s: %d of %d calls refused, %d outlasted the deadline", c.name, failed, calls, stalled)
	}
}
