package capacity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// upstream is a tiny DynamoDB stand-in: it answers every request with an
// empty JSON object and counts what it saw by operation.
type upstream struct {
	mu  sync.Mutex
	ops map[string]int
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndexByte(op, '.')+1:]
	u.mu.Lock()
	u.ops[op]++
	u.mu.Unlock()
	ddbwire.WriteJSON(w, http.StatusOK, []byte(`{}`))
}

func (u *upstream) count(op string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ops[op]
}

// clock is a settable clock for the token buckets.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// setup starts an upstream and a proxy in front of it, and returns a
// DynamoDB client that talks to the proxy with the given retryer.
func setup(t *testing.T, retryer aws.Retryer, optFns ...func(*Options)) (*Proxy, *upstream, *dynamodb.Client) {
	t.Helper()
	up := &upstream{ops: map[string]int{}}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	p, err := New(upSrv.URL, optFns...)
	require.NoError(t, err)
	url, err := p.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "SECRETTEST"}, nil
		}),
		Retryer: retryer,
	})
	return p, up, client
}

func updateItem(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(table),
		Key:              map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
		UpdateExpression: aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	return err
}

func getItem(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	})
	return err
}

func isThrottle(err error) bool {
	var pte *types.ProvisionedThroughputExceededException
	return errors.As(err, &pte)
}

func TestThrottlesArriveAsProvisionedThroughputExceeded(t *testing.T) {
	clk := newClock()
	p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) {
		o.Tables = map[string]Capacity{"hot": {Read: Unlimited, Write: 3}}
		o.Now = clk.Now
	})
	ctx := context.Background()

	var ok, throttled int
	for range 5 {
		err := updateItem(ctx, client, "hot")
		switch {
		case err == nil:
			ok++
		case isThrottle(err):
			throttled++
			var apiErr smithy.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, ddbwire.ProvisionedThroughputExceeded, apiErr.ErrorCode())
		default:
			t.Fatalf("expect success or throttle, got %v", err)
		}
	}
	assert.Equal(t, 3, ok, "expect the burst of 3 write units to pass")
	assert.Equal(t, 2, throttled)
	assert.Equal(t, 3, up.count("UpdateItem"), "expect throttled requests never to reach the server")

	// Reads have their own bucket, and other tables their own capacity.
	require.NoError(t, getItem(ctx, client, "hot"))
	require.NoError(t, updateItem(ctx, client, "cold"))

	st := p.Stats()
	assert.Equal(t, int64(7), st.Requests)
	assert.Equal(t, int64(5), st.Forwarded)
	assert.Equal(t, int64(2), st.Throttled)
	assert.Zero(t, st.InjectedErrors)
	assert.Equal(t, []Second{{Requests: 7, Throttled: 2}}, st.PerSecond)

	// A second later the bucket has refilled.
	clk.Advance(time.Second)
	for range 3 {
		require.NoError(t, updateItem(ctx, client, "hot"))
	}
	assert.True(t, isThrottle(updateItem(ctx, client, "hot")))
	assert.Equal(t, []Second{{Requests: 7, Throttled: 2}, {Requests: 4, Throttled: 1}}, p.Stats().PerSecond)
}

func TestSDKRetriesThrottlesUntilMaxAttempts(t *testing.T) {
	clk := newClock()
	var attempts atomic.Int32
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
			attempts.Add(1)
			return 0, nil
		})
	})
	p, up, client := setup(t, retryer, func(o *Options) {
		o.Default = Capacity{Read: Unlimited, Write: 1}
		o.Now = clk.Now
	})
	ctx := context.Background()

	require.NoError(t, updateItem(ctx, client, "hot"))
	err := updateItem(ctx, client, "hot")
	require.True(t, isThrottle(err), "expect ProvisionedThroughputExceededException, got %v", err)
	assert.Equal(t, int32(2), attempts.Load(), "expect the SDK to retry the throttle twice (3 attempts)")
	assert.Equal(t, int64(3), p.Stats().Throttled)
	assert.Equal(t, 1, up.count("UpdateItem"))
}

func TestCapacityDropThenRecover(t *testing.T) {
	clk := newClock()
	p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) {
		o.Default = Capacity{Read: 10, Write: 10}
		o.Now = clk.Now
	})
	ctx := context.Background()
	send := func(n int) (ok int) {
		t.Helper()
		for range n {
			err := updateItem(ctx, client, "hot")
			if err == nil {
				ok++
			} else {
				require.True(t, isThrottle(err), "expect a throttle, got %v", err)
			}
		}
		return ok
	}

	assert.Equal(t, 10, send(12), "expect the full bucket of 10")

	require.NoError(t, p.SetDefaultCapacity(Capacity{Read: 10, Write: 0}))
	assert.Equal(t, Capacity{Read: 10, Write: 0}, p.Capacity("hot"))
	clk.Advance(10 * time.Second)
	assert.Equal(t, 0, send(5), "expect a zero capacity to admit nothing")
	require.NoError(t, getItem(ctx, client, "hot"), "expect reads to keep their capacity")

	require.NoError(t, p.SetCapacity("hot", Capacity{Read: 10, Write: 4}))
	assert.Equal(t, 0, send(1), "expect no tokens saved while the capacity was zero")
	clk.Advance(time.Second)
	assert.Equal(t, 4, send(6), "expect the recovered capacity's bucket of 4")

	// The table's own capacity now survives a change of the default.
	require.NoError(t, p.SetDefaultCapacity(Capacity{Read: Unlimited, Write: Unlimited}))
	assert.Equal(t, Capacity{Read: 10, Write: 4}, p.Capacity("hot"))
	clk.Advance(time.Second)
	assert.Equal(t, 4, send(6))
	assert.Equal(t, 18, up.count("UpdateItem"))
	assert.Equal(t, int64(12), p.Stats().Throttled)
}

func TestTransactionIsAdmittedAllOrNone(t *testing.T) {
	clk := newClock()
	p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) {
		o.Tables = map[string]Capacity{"a": {Read: 4, Write: 4}, "b": {Read: 1, Write: 1}}
		o.Now = clk.Now
	})
	ctx := context.Background()
	transact := func() error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("a"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}},
				{Put: &types.Put{TableName: aws.String("b"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}},
			},
		})
		return err
	}
	// b's bucket holds 1 unit, the transaction needs 2 from each table.
	assert.True(t, isThrottle(transact()))
	assert.Zero(t, up.count("TransactWriteItems"))
	// a kept all its 4 units: four single writes pass.
	for range 4 {
		require.NoError(t, updateItem(ctx, client, "a"))
	}
	assert.True(t, isThrottle(updateItem(ctx, client, "a")))
	assert.Equal(t, int64(2), p.Stats().Throttled)
}

func TestInjectedErrors(t *testing.T) {
	t.Run("before forwarding the server never sees the request", func(t *testing.T) {
		p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) { o.ErrorRate = 1 })
		ctx := context.Background()
		err := updateItem(ctx, client, "hot")
		var ise *types.InternalServerError
		require.ErrorAs(t, err, &ise)
		assert.Zero(t, up.count("UpdateItem"))
		_, err = client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("hot")})
		require.NoError(t, err, "expect the control plane never to fail")
		st := p.Stats()
		assert.Equal(t, int64(1), st.InjectedErrors)
		assert.Equal(t, int64(1), st.Forwarded)
	})
	t.Run("after forwarding the write lands but the client sees a 500", func(t *testing.T) {
		p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) { o.LostResponseRate = 1 })
		err := updateItem(context.Background(), client, "hot")
		var ise *types.InternalServerError
		require.ErrorAs(t, err, &ise)
		assert.Equal(t, 1, up.count("UpdateItem"))
		st := p.Stats()
		assert.Equal(t, int64(1), st.LostResponses)
		assert.Equal(t, int64(1), st.Forwarded)
	})
	t.Run("the same seed injects the same errors", func(t *testing.T) {
		outcomes := func(seed uint64) []bool {
			_, _, client := setup(t, aws.NopRetryer{}, func(o *Options) {
				o.ErrorRate = 0.5
				o.Seed = seed
			})
			var got []bool
			for range 40 {
				got = append(got, updateItem(context.Background(), client, "hot") == nil)
			}
			return got
		}
		first := outcomes(7)
		assert.Equal(t, first, outcomes(7))
		assert.NotEqual(t, first, outcomes(8))
		assert.Contains(t, first, true)
		assert.Contains(t, first, false)
	})
}

func TestConcurrentRequestsTakeExactlyTheBurst(t *testing.T) {
	clk := newClock()
	p, up, client := setup(t, aws.NopRetryer{}, func(o *Options) {
		o.Default = Capacity{Read: 50, Write: 50}
		o.Now = clk.Now
	})
	var wg sync.WaitGroup
	var ok, throttled atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				err := updateItem(context.Background(), client, "hot")
				if err == nil {
					ok.Add(1)
				} else if isThrottle(err) {
					throttled.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(50), ok.Load())
	assert.Equal(t, int64(150), throttled.Load())
	assert.Equal(t, 50, up.count("UpdateItem"))
	assert.Equal(t, int64(200), p.Stats().Requests)
}

func TestUpstreamDownIsBadGateway(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	p, err := New(url)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"TableName":"hot"}`))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	p.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadGateway, rec.Code)
	assert.Equal(t, int64(1), p.Stats().UpstreamErrors)
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	cases := map[string]func(*Options){
		"negative capacity":          func(o *Options) { o.Default.Write = -1 },
		"negative table capacity":    func(o *Options) { o.Tables = map[string]Capacity{"a": {Read: -1}} },
		"zero burst seconds":         func(o *Options) { o.BurstSeconds = 0 },
		"error rate above one":       func(o *Options) { o.ErrorRate = 1.5 },
		"rates adding up beyond one": func(o *Options) { o.ErrorRate, o.LostResponseRate = 0.6, 0.6 },
		"nil clock":                  func(o *Options) { o.Now = nil },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New("http://127.0.0.1:1", fn)
			require.Error(t, err)
		})
	}
	_, err := New("not a url")
	require.Error(t, err)

	p, err := New("http://127.0.0.1:1")
	require.NoError(t, err)
	require.Error(t, p.SetCapacity("a", Capacity{Write: -1}))
	require.Error(t, p.SetDefaultCapacity(Capacity{Read: -2}))
}

func TestOptionsDoNotAliasCallerMap(t *testing.T) {
	tables := map[string]Capacity{"a": {Read: 1, Write: 1}}
	p, err := New("http://127.0.0.1:1", func(o *Options) { o.Tables = tables })
	require.NoError(t, err)
	require.NoError(t, p.SetCapacity("b", Capacity{Read: 2, Write: 2}))
	assert.Len(t, tables, 1, "expect SetCapacity not to write into the caller's map")
}
