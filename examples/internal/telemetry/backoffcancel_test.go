package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/metrics/smithyotelmetrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// TestACallerThatGivesUpDuringTheBackoff checks the README's row of
// jitterretry.backoff.duration through a real DynamoDB client, each way the
// README names: a PutItem throttle retried by the SDK's middleware, and a
// transaction cancelled for throttles only, which the middleware leaves to
// Do. The caller cancels 50 ms into a 2 s backoff, timed from the retry's
// OnRetry (a timer from the call's start could fire before the first
// answer on a busy machine, before any backoff began). Either way the retry
// was counted when its backoff was decided. Under the middleware the SDK
// sleeps and returns the context's error without asking the retryer: no
// refusal is counted. Do returns a GiveUpError with GiveUpCanceled, which
// OnGiveUp hears and give_ups counts as canceled. The README said "no
// canceled refusal is counted then" of both (an outside review).
func TestACallerThatGivesUpDuringTheBackoff(t *testing.T) {
	const backoff = 2 * time.Second
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
			ddbwire.WriteTransactionCanceled(w, "ThrottlingError")
			return
		}
		ddbwire.WriteError(w, ddbwire.StatusFor(ddbwire.Throttling), ddbwire.Throttling, "scripted")
	}))
	t.Cleanup(srv.Close)
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}

	for _, tc := range []struct {
		name    string
		giveUps map[string]int64
		call    func(ctx context.Context, r *jitterretry.Retryer, c *dynamodb.Client) error
	}{
		{"the SDK's middleware", nil, func(ctx context.Context, _ *jitterretry.Retryer, c *dynamodb.Client) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item})
			return err
		}},
		{"Do", map[string]int64{"canceled": 1}, func(ctx context.Context, r *jitterretry.Retryer, c *dynamodb.Client) error {
			return jitterretry.Do(ctx, r, func(ctx context.Context) error {
				_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: aws.String("t"), Item: item}},
				}})
				return err
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			otel := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = otel.Shutdown(context.Background()) })
			provider := smithyotelmetrics.Adapt(otel)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			backoffBegan := make(chan time.Time, 1)
			r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
				o.MeterProvider = provider
				o.OnRetry = func(jitterretry.RetryEvent) {
					select { // a second retry, had the cancel not cut the backoff, must not block
					case backoffBegan <- time.Now():
					default:
					}
					time.AfterFunc(50*time.Millisecond, cancel)
				}
				o.Jitter = delayers.StrategyExponential // the first backoff is the base, whole
				o.ThrottleBaseDelay, o.MaxBackoff = backoff, backoff
			})
			require.NoError(t, r.Err())
			client := newClient(srv.URL, func(o *dynamodb.Options) {
				o.Retryer = r
				o.MeterProvider = provider
			})

			err := tc.call(ctx, r, client)
			require.ErrorIs(t, err, context.Canceled)
			require.Len(t, backoffBegan, 1, "expect one retry")
			require.Less(t, time.Since(<-backoffBegan), backoff, "expect the cancel to cut the backoff")

			var rm metricdata.ResourceMetrics
			require.NoError(t, reader.Collect(context.Background(), &rm))
			sums := map[string]map[string]int64{} // instrument, jitterretry.class or reason: value
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					d, ok := m.Data.(metricdata.Sum[int64])
					if !ok || !strings.HasPrefix(m.Name, "jitterretry.") {
						continue
					}
					for _, p := range d.DataPoints {
						v, _ := p.Attributes.Value("jitterretry.class")
						if w, ok := p.Attributes.Value("jitterretry.reason"); ok {
							v = w
						}
						if sums[m.Name] == nil {
							sums[m.Name] = map[string]int64{}
						}
						sums[m.Name][v.AsString()] += p.Value
					}
				}
			}
			assert.Equal(t, map[string]int64{"throttle": 1}, sums["jitterretry.retries"],
				"expect the retry counted when its backoff was decided")
			assert.Equal(t, tc.giveUps, sums["jitterretry.give_ups"],
				"expect a refusal counted only where the retryer made one: Do's, not the SDK's sleep")
		})
	}
}
