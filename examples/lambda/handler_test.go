package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
	"github.com/jitterretry/jitterretry/internal/capacity"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// Every test must leave no goroutine behind, toxiproxy's own stuck
// per-connection goroutines excepted (see examples/internal/fault's
// TestMain: in v2.5.0 a toxic that holds data for a connection the client
// closed blocks for ever, and so do the link's goroutines on either side
// of it). The emulator test's toxiproxy leaves them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	)
}

// counterTable starts the embedded server with a fresh table.
func counterTable(t *testing.T) (*ddbtest.Backend, string) {
	t.Helper()
	return ddbtest.MinidynTable(t, "counter", "pk")
}

// newTestHandler wires a Handler as main does, to endpoint, with its own
// retryer (configured further by optFns) and connection pool, and the
// attempt timeout as an API option (the client has no HTTP timeout).
func newTestHandler(t *testing.T, b *ddbtest.Backend, table, endpoint string, optFns ...func(*jitterretry.Options)) *Handler {
	t.Helper()
	r := NewRetryer(optFns...)
	require.NoError(t, r.Err())
	c := b.NewClient(t, endpoint)
	client := dynamodb.New(c.Options(), func(o *dynamodb.Options) {
		o.Retryer = r
		o.APIOptions = append(o.APIOptions, APIOptions(DefaultAttemptTimeout)...)
	})
	return &Handler{Client: client, Retryer: r, Table: table}
}

// invoke calls the handler the way the Lambda runtime does: through
// aws-lambda-go's handler wrapper, with a JSON payload and the request ID
// in the context.
func invoke(ctx context.Context, h *Handler, requestID, payload string) (Result, error) {
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, []byte(payload))
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = json.Unmarshal(out, &res)
	return res, err
}

func invocation(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestHandlerCountsEachRequestOnce(t *testing.T) {
	b, table := counterTable(t)
	h := newTestHandler(t, b, table, b.URL)
	ctx := invocation(t, 10*time.Second)

	res, err := invoke(ctx, h, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	assert.Equal(t, Result{Key: "page", Count: 1}, res)

	res, err = invoke(ctx, h, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	assert.Equal(t, Result{Key: "page", Count: 1, Replayed: true}, res, "expect Lambda's retry of req-1 not to count twice")

	res, err = invoke(ctx, h, "req-2", `{"key":"page","by":5}`)
	require.NoError(t, err)
	assert.Equal(t, Result{Key: "page", Count: 6}, res)

	_, err = invoke(ctx, h, "req-3", `{}`)
	assert.ErrorContains(t, err, "no key")
	var ie *InvocationError
	require.ErrorAs(t, err, &ie, "expect a bad event told from a failed counter")
	assert.Equal(t, "InvocationError", ErrorType(err), "expect Lambda's errorType to name it")
}

// TestLambdaRetryKeepsTheIdempotencyContract: DynamoDB answers a
// TransactWriteItems whose ClientRequestToken it saw in the last 10 minutes
// with other parameters with IdempotentParameterMismatchException, which
// is not retried. The handler once sent the request ID as the token along
// with the marker's expiry, a second later on Lambda's retry: on real
// DynamoDB that retry failed instead of being replayed (minidyn ignores the
// token; an outside review read it off the wire). Every token the server
// sees twice must come with the same parameters.
func TestLambdaRetryKeepsTheIdempotencyContract(t *testing.T) {
	b, table := counterTable(t)
	var mu sync.Mutex
	seen := map[string]string{} // token -> the request's other parameters
	var mismatched []string
	u, err := url.Parse(b.URL)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
			// On this server's goroutine: assert, and answer a failure.
			body, err := io.ReadAll(r.Body)
			var in map[string]json.RawMessage
			if !assert.NoError(t, err) || !assert.NoError(t, json.Unmarshal(body, &in)) {
				http.Error(w, "unreadable request", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			token := string(in["ClientRequestToken"])
			delete(in, "ClientRequestToken")
			rest, err := json.Marshal(in)
			assert.NoError(t, err)
			mu.Lock()
			if prev, ok := seen[token]; ok && prev != string(rest) {
				mismatched = append(mismatched, token)
			}
			seen[token] = string(rest)
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h := newTestHandler(t, b, table, srv.URL)

	_, err = invoke(invocation(t, 10*time.Second), h, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // Lambda retries after a minute or more; a second is enough to differ
	res, err := invoke(invocation(t, 10*time.Second), h, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	assert.Equal(t, Result{Key: "page", Count: 1, Replayed: true}, res)
	assert.Empty(t, mismatched, "expect no ClientRequestToken reused with other parameters")
}

func TestHandlerLostResponseCountsOnce(t *testing.T) {
	b, table := counterTable(t)
	endpoint, lost := loseFirstWrite(t, b.URL)
	h := newTestHandler(t, b, table, endpoint)

	res, err := invoke(invocation(t, 10*time.Second), h, "req-1", `{"key":"page"}`)

	require.NoError(t, err)
	assert.Equal(t, int64(1), lost.Load(), "expect the first transaction's response to have been lost")
	assert.Equal(t, int64(1), res.Count, "expect the SDK's retry of a landed transaction not to count twice")
	t.Logf("after a lost response: %+v", res)
}

func TestHandlerReturnsATypedErrorBeforeTheDeadlineUnderThrottling(t *testing.T) {
	b, table := counterTable(t)
	throttle := ddbtest.Capacity(t, b.URL, func(o *capacity.Options) {
		o.Default = capacity.Capacity{Read: capacity.Unlimited, Write: 0} // every write throttled
	})
	var retries atomic.Int64
	h := newTestHandler(t, b, table, throttle.URL, func(o *jitterretry.Options) {
		o.Source = delayers.NewSource(3)
		o.OnRetry = func(jitterretry.RetryEvent) { retries.Add(1) }
	})
	// A 2 s invocation: 1.5 s for DynamoDB after the 500 ms reserve.
	ctx := invocation(t, 2*time.Second)

	_, err := invoke(ctx, h, "req-1", `{"key":"page"}`)

	require.Error(t, err)
	assert.NoError(t, ctx.Err(), "expect the handler to return before the function's deadline, not to be cut off at it")
	var ce *CounterError
	require.ErrorAs(t, err, &ce, "expect the handler's typed error, got %T: %v", err, err)
	assert.Equal(t, "increment", ce.Op)
	assert.Equal(t, "CounterError", ErrorType(err), "expect Lambda's errorType to name it")
	var gu *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gu, "expect the retryer's typed give-up, got %T: %v", err, err)
	assert.Equal(t, jitterretry.GiveUpDeadline, gu.Reason)
	var ptee *types.ProvisionedThroughputExceededException
	assert.ErrorAs(t, err, &ptee, "expect the error to wrap the throttle that was being retried")
	assert.Positive(t, retries.Load(), "expect retries while there was time")
	assert.Positive(t, throttle.Stats().Throttled)
	assert.Contains(t, err.Error(), "counter: increment \"page\"")
	t.Logf("after %d retries, %v before the function's deadline: %v", retries.Load(), time.Until(deadlineOf(ctx)).Round(time.Millisecond), err)
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func TestHandlerRefusesAnInvocationWithoutTime(t *testing.T) {
	b, table := counterTable(t)
	p := ddbtest.Capacity(t, b.URL)
	h := newTestHandler(t, b, table, p.URL)

	_, err := invoke(invocation(t, 600*time.Millisecond), h, "req-1", `{"key":"page"}`)

	var nt *NoTimeError
	require.ErrorAs(t, err, &nt, "expect 600 ms to be less than the 500 ms reserve plus a 300 ms attempt")
	assert.Equal(t, DefaultReserve+DefaultAttemptTimeout, nt.Needed)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, p.Stats().Requests, "expect nothing sent")
}

func TestHandlerWithoutADeadline(t *testing.T) {
	b, table := counterTable(t)
	h := newTestHandler(t, b, table, b.URL)
	res, err := invoke(context.Background(), h, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Count)
	_, err = h.Handle(context.Background(), Event{Key: "page"})
	assert.ErrorContains(t, err, "no Lambda request ID")
}

func TestNewHandlerReadsTheEnvironment(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	ctx := context.Background()
	_, err := newHandler(ctx, env(nil))
	assert.ErrorContains(t, err, "TABLE_NAME")
	for _, bad := range []string{"-1", "0", "1.5"} {
		// 0 once meant the default, 500 ms, silently: Handler's zero value.
		_, err = newHandler(ctx, env(map[string]string{"TABLE_NAME": "t", "RESERVE_MS": bad}))
		assert.ErrorContains(t, err, "RESERVE_MS", bad)
	}

	h, err := newHandler(ctx, env(map[string]string{"TABLE_NAME": "t", "RESERVE_MS": "750", "AWS_REGION": "us-east-1"}))
	require.NoError(t, err)
	assert.Equal(t, "t", h.Table)
	assert.Equal(t, 750*time.Millisecond, h.Reserve)
	r, ok := h.Client.Options().Retryer.(*jitterretry.Retryer)
	require.True(t, ok, "expect the client's retryer to be jitterretry's, got %T", h.Client.Options().Retryer)
	assert.Zero(t, r.MaxAttempts(), "expect no fixed attempt limit: the deadline and the budget end the retries")

	// The attempt timeout is an API option: build a stack with the SDK's
	// retry middleware and see it placed.
	stack := smithymiddle.NewStack("op", smithyhttp.NewStackRequest)
	require.NoError(t, stack.Finalize.Add(retry.NewAttemptMiddleware(r, func(in any) any { return in }), smithymiddle.After))
	for _, fn := range h.Client.Options().APIOptions {
		require.NoError(t, fn(stack))
	}
	_, ok = stack.Finalize.Get("jitterretry.AttemptTimeout")
	assert.True(t, ok, "expect the client's attempts bounded by jitterretry.AttemptTimeout; Finalize: %v", stack.Finalize.List())
}

func TestHandlerLogsEachInvocation(t *testing.T) {
	b, table := counterTable(t)
	throttle := ddbtest.Capacity(t, b.URL, func(o *capacity.Options) {
		o.Default = capacity.Capacity{Read: capacity.Unlimited, Write: 0}
	})
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	ok := newTestHandler(t, b, table, b.URL)
	ok.Log = log
	throttled := newTestHandler(t, b, table, throttle.URL, func(o *jitterretry.Options) { o.Source = delayers.NewSource(3) })
	throttled.Log = log

	_, err := invoke(invocation(t, 10*time.Second), ok, "req-1", `{"key":"page"}`)
	require.NoError(t, err)
	_, err = invoke(invocation(t, 2*time.Second), throttled, "req-2", `{"key":"page"}`)
	require.Error(t, err)

	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		records = append(records, rec)
	}
	require.Len(t, records, 2)
	assert.Subset(t, records[0], map[string]any{"level": "INFO", "msg": "invocation", "requestId": "req-1", "key": "page",
		"outcome": "ok", "count": 1.0, "attempts": 2.0, "throttled": 0.0, "cut": 0.0}, "expect the transaction and the read, neither throttled")
	assert.Subset(t, records[1], map[string]any{"level": "ERROR", "requestId": "req-2", "outcome": "error",
		"errorType": "CounterError", "gaveUp": "deadline"})
	assert.Equal(t, records[1]["attempts"], records[1]["throttled"], "expect every attempt throttled")
	assert.Greater(t, records[1]["leftMs"], 400.0, "expect the give-up about the 500 ms reserve before the deadline, or earlier")
	t.Logf("records:\n%s", buf.String())
}

// loseFirstWrite is a loopback proxy in front of upstream that forwards
// everything and replaces the response to the first TransactWriteItems
// with HTTP 500: the transaction landed, the client cannot know.
func loseFirstWrite(t *testing.T, upstream string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	var lost atomic.Int64
	transport := http.DefaultTransport.(*http.Transport).Clone()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = transport
	rp.ModifyResponse = func(resp *http.Response) error {
		if strings.HasSuffix(resp.Request.Header.Get("X-Amz-Target"), ".TransactWriteItems") &&
			resp.StatusCode == http.StatusOK && lost.CompareAndSwap(0, 1) {
			return errLost
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		ddbwire.WriteError(w, http.StatusInternalServerError, ddbwire.InternalServerError, "response lost: "+err.Error())
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return srv.URL, &lost
}

var errLost = errors.New("response lost by the test")

// TestHandlerRetriesATransactionCancelledForAConflictOrAThrottle: DynamoDB
// reports a transaction throttled at an item, or colliding with another on
// the same counter, as a TransactionCanceledException with reasons such as
// [None, ThrottlingError] or [None, TransactionConflict], which the SDK's
// middleware does not retry. The handler made one attempt and failed the
// invocation with seconds left, and no give-up said why (helper-69); it now
// calls the transaction in a Do loop, which retries both, while the marker's
// ConditionalCheckFailed (a replay) still ends the loop at once.
func TestHandlerRetriesATransactionCancelledForAConflictOrAThrottle(t *testing.T) {
	for _, reasons := range [][]string{{"None", "TransactionConflict"}, {"None", "ThrottlingError"}} {
		t.Run(strings.Join(reasons, ","), func(t *testing.T) {
			b, table := counterTable(t)
			endpoint, cancelled, writes := cancelFirstWrites(t, b.URL, 2, reasons...)
			var gaveUp atomic.Int64
			h := newTestHandler(t, b, table, endpoint, func(o *jitterretry.Options) {
				o.OnGiveUp = func(*jitterretry.GiveUpError) { gaveUp.Add(1) }
			})
			var buf bytes.Buffer
			h.Log = slog.New(slog.NewJSONHandler(&buf, nil))

			// Two throttles' backoffs (up to 1 s, then 2 s) fit 10 s.
			res, err := invoke(invocation(t, 10*time.Second), h, "req-1", `{"key":"page"}`)

			require.NoError(t, err, "expect the cancelled transactions retried")
			assert.Equal(t, Result{Key: "page", Count: 1}, res)
			var rec map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &rec), buf.String())
			want := map[string]any{"attempts": 4.0, "throttled": 0.0}
			if reasons[1] == "ThrottlingError" {
				// A transaction cancelled for a throttle was throttled: the
				// record said 0 (helper-70).
				want["throttled"] = 2.0
			}
			assert.Subset(t, rec, want, "expect the record to count the cancelled transactions' throttles")
			assert.Equal(t, int64(2), cancelled.Load())
			assert.Equal(t, int64(3), writes.Load(), "expect two cancelled transactions and the one that landed")

			res, err = invoke(invocation(t, 10*time.Second), h, "req-1", `{"key":"page"}`)
			require.NoError(t, err)
			assert.Equal(t, Result{Key: "page", Count: 1, Replayed: true}, res)
			assert.Equal(t, int64(4), writes.Load(), "expect the replay's ConditionalCheckFailed not retried")
			assert.Zero(t, gaveUp.Load(), "expect neither the retries nor the replay reported as a give-up")
		})
	}
}

// cancelFirstWrites is a loopback proxy in front of upstream that answers
// the first n TransactWriteItems itself, cancelled with reasons, and
// forwards everything else; it counts the cancelled and all the
// TransactWriteItems.
func cancelFirstWrites(t *testing.T, upstream string, n int64, reasons ...string) (string, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	var cancelled, writes atomic.Int64
	transport := http.DefaultTransport.(*http.Transport).Clone()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
			writes.Add(1)
			if cancelled.Add(1) <= n {
				ddbwire.WriteTransactionCanceled(w, reasons...)
				return
			}
			cancelled.Add(-1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	return srv.URL, &cancelled, &writes
}
