package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// TestACredentialRefreshWaitsAtNoThrottledTablesLimiter: one retryer with
// the send-rate limiter, as config.WithRetryer gives it to every client of
// the configuration, serves a DynamoDB client whose table throttles and
// the STS client of its assume-role credentials. The limiter was one for
// the whole retryer, or for the partition, which the refresh inherits from
// the context of the operation that needed it: each refresh of the
// credentials waited its turn behind the table's queue while every caller
// waited on it (a scratch run of 64 callers with 3 s deadlines on a 50
// writes/s table, credentials lasting 2 s: 178 failures against 10 with
// the STS client on a retryer of its own). Each SDK service now has a
// limiter of its own in each partition, over the partition's bucket; in a
// partition of more services than its bound, those past it go unpaced.
func TestACredentialRefreshWaitsAtNoThrottledTablesLimiter(t *testing.T) {
	orders := jitterretry.WithPartition(context.Background(), "orders")
	for _, c := range []struct {
		name      string
		partition func(context.Context) string
		ctx       context.Context
		bucket    string   // the partition of the bucket the table's retries spend
		before    []string // services the partition served before STS, the table's first
	}{
		{"without a PartitionKey", nil, context.Background(), "", nil},
		{"a partition per table", jitterretry.PartitionFromContext, orders, "orders", nil},
		// helper-223: STS then shared the table's limiter, 167 failures
		// in 8 s against 5-9.
		{"a partition of six services", jitterretry.PartitionFromContext, orders, "orders", []string{"DynamoDB", "S3", "SQS", "SNS", "Kinesis"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := telemetry.New(telemetry.Options{})
			require.NoError(t, err)
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.SendRate = &jitterretry.SendRateOptions{}
				o.MeterProvider = m.Provider
				o.PartitionKey = c.partition
			})
			require.NoError(t, r.Err())
			for _, s := range c.before {
				release, err := r.GetAttemptToken(awsmiddle.SetRegion(awsmiddle.SetServiceID(c.ctx, s), "us-east-1")) // the clients' region
				require.NoError(t, err)
				require.NoError(t, release(nil))
			}
			table := newThrottledTable(20, 2)
			ddbSrv := httptest.NewServer(table)
			t.Cleanup(ddbSrv.Close)
			refreshes, client := refreshingClient(t, ddbSrv.URL, r)

			// 16 callers on a table of 20 writes a second keep the
			// limiter's queue full for 3 s, in which the credentials,
			// lasting 1 s, are fetched again at least twice.
			stop := time.Now().Add(3 * time.Second)
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for time.Now().Before(stop) {
						_ = putItem(c.ctx, client)
					}
				})
			}
			wg.Wait()
			require.GreaterOrEqual(t, refreshes.Load(), int64(3), "expect the credentials fetched at the start and again during the run")
			require.Positive(t, table.throttled.Load(), "expect the table to throttle")

			rm, err := m.Collect(context.Background())
			require.NoError(t, err)
			waits := map[string]float64{}
			var limits, tokens []telemetry.Row
			for _, row := range telemetry.Rows(rm) {
				svc, _ := row.Attr("rpc.service")
				switch row.Instrument {
				case telemetry.SendRateWait:
					waits[svc] += row.Value
				case telemetry.SendRateLimit:
					limits = append(limits, row)
				case telemetry.BucketTokens:
					if p, _ := row.Attr("jitterretry.partition"); p == c.bucket {
						tokens = append(tokens, row)
					}
				}
			}
			assert.Positive(t, waits["DynamoDB"], "expect the table's callers to wait their turns")
			assert.Zero(t, waits["STS"], "expect no credential fetch to wait behind the table's queue")

			require.Len(t, limits, 1, "expect one limited rate, the table's: %v", limits)
			svc, _ := limits[0].Attr("rpc.service")
			assert.Equal(t, "DynamoDB", svc)
			partition, _ := limits[0].Attr("jitterretry.partition")
			assert.Equal(t, c.bucket, partition, "expect the partition's name: the limiter is the service's, the budget the partition's")

			require.Len(t, tokens, 1, "expect one bucket for both services")
			_, named := tokens[0].Attr("rpc.service")
			assert.False(t, named, "expect no service on the bucket both share")
		})
	}
}

// refreshingClient returns the count of credential fetches and a DynamoDB
// client of url on retryer whose credentials, lasting 1 s each, come from
// AssumeRole through an STS client on the same retryer.
func refreshingClient(t *testing.T, url string, retryer aws.Retryer) (*atomic.Int64, *dynamodb.Client) {
	t.Helper()
	var refreshes atomic.Int64
	stsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		refreshes.Add(1)
		expires := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult><Credentials>`+
			`<AccessKeyId>AKIDTEST</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>token</SessionToken><Expiration>`+expires+`</Expiration>`+
			`</Credentials><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/r/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser></AssumeRoleResult>`+
			`<ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></AssumeRoleResponse>`)
	}))
	t.Cleanup(stsSrv.Close)
	return &refreshes, dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(newSTSClient(stsSrv.URL, retryer), "arn:aws:iam::123456789012:role/r")),
		Retryer:      retryer,
	})
}

// throttledTable answers PutItem in DynamoDB's wire format at rate writes a
// second, with a burst of burst, and throttles the rest.
type throttledTable struct {
	rate, burst float64
	throttled   atomic.Int64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newThrottledTable(rate, burst float64) *throttledTable {
	return &throttledTable{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (tt *throttledTable) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	tt.mu.Lock()
	now := time.Now()
	tt.tokens = min(tt.burst, tt.tokens+now.Sub(tt.last).Seconds()*tt.rate)
	tt.last = now
	ok := tt.tokens >= 1
	if ok {
		tt.tokens--
	}
	tt.mu.Unlock()
	if !ok {
		tt.throttled.Add(1)
		ddbwire.WriteError(w, http.StatusBadRequest, ddbwire.ProvisionedThroughputExceeded, "throttled")
		return
	}
	ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
}

// TestTheRateGaugeReportsEachServicesLimiter: with a limiter per SDK
// service, the rate gauge has a series for each service's limiter; the
// partition's own limiter is its first service's, and paces the attempts
// outside an SDK operation too. A limiter that paced nothing yet is
// reported once an attempt took a place in its queue: before, a retryer
// with InitialRate reported a series for a limiter that paced nothing
// (helper-219).
func TestTheRateGaugeReportsEachServicesLimiter(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	series := func() map[string]float64 {
		rm, err := m.Collect(context.Background())
		require.NoError(t, err)
		out := map[string]float64{}
		for _, row := range telemetry.Rows(rm) {
			if row.Instrument == telemetry.SendRateLimit {
				svc, named := row.Attr("rpc.service")
				if !named {
					svc = "(none)"
				}
				out[svc] += row.Value
			}
		}
		return out
	}
	newRetryer := func() *jitterretry.Retryer {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.SendRate = &jitterretry.SendRateOptions{InitialRate: 100}
			o.MeterProvider = m.Provider
		})
		require.NoError(t, r.Err())
		return r
	}
	attemptOutsideAnOperation := func(r *jitterretry.Retryer) {
		release, err := r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}

	clients := newRetryer()
	assert.Empty(t, series(), "expect no series before an attempt")
	stsClient := newSTSClient(callerIdentityServer(t).URL, clients)
	srv := newScriptServer(t)
	require.NoError(t, putItem(context.Background(), newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = clients })))
	_, err = stsClient.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	require.NoError(t, err)
	assert.Equal(t, map[string]float64{"DynamoDB": 100, "STS": 100}, series())
	attemptOutsideAnOperation(clients)
	assert.Equal(t, map[string]float64{"DynamoDB": 100, "STS": 100}, series(), "expect DynamoDB's limiter to have paced it")

	direct := newRetryer()
	assert.Equal(t, map[string]float64{"DynamoDB": 100, "STS": 100}, series(), "expect nothing of a retryer that paced nothing")
	attemptOutsideAnOperation(direct)
	assert.Equal(t, map[string]float64{"DynamoDB": 100, "STS": 100, "(none)": 100}, series())
}

// TestARegionsThrottlesPaceNoOtherRegion: one retryer with the send-rate
// limiter serves a service's clients in two regions, as one cfg's clients
// of a global table's replicas: the limiter is one per service and region.
// Shared by the regions, us-east-1's throttles paced eu-west-1's attempts
// (helper-228: eu-west-1 at 27-29 successes a second and 175-177 deadline
// refusals in 4 s, against 11,408 and none apart).
func TestARegionsThrottlesPaceNoOtherRegion(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{}
		o.MeterProvider = m.Provider
	})
	require.NoError(t, r.Err())
	table := newThrottledTable(20, 2)
	east := httptest.NewServer(table)
	t.Cleanup(east.Close)
	west := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
	}))
	t.Cleanup(west.Close)
	inRegion := func(region string) func(*dynamodb.Options) {
		return func(o *dynamodb.Options) { o.Region, o.Retryer = region, r }
	}
	eastClient, westClient := newClient(east.URL, inRegion("us-east-1")), newClient(west.URL, inRegion("eu-west-1"))

	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for _, c := range []*dynamodb.Client{eastClient, westClient} {
		for range 8 {
			wg.Go(func() {
				for time.Now().Before(stop) {
					_ = putItem(context.Background(), c)
				}
			})
		}
	}
	wg.Wait()
	require.Positive(t, table.throttled.Load(), "expect us-east-1 to throttle")

	rm, err := m.Collect(context.Background())
	require.NoError(t, err)
	var limits []telemetry.Row
	for _, row := range telemetry.Rows(rm) {
		if row.Instrument == telemetry.SendRateLimit {
			limits = append(limits, row)
		}
	}
	require.Len(t, limits, 1, "expect one limited rate, us-east-1's: %v", limits)
	region, _ := limits[0].Attr("cloud.region")
	assert.Equal(t, "us-east-1", region, "expect the throttled region's limiter alone limited")
}
