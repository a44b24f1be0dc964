package telemetry_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// hotTableServer answers in DynamoDB's wire format: every request to table
// "hot" is throttled, as a table far over its capacity is; every other
// table's succeeds.
func hotTableServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		if in.TableName == "hot" {
			ddbwire.WriteError(w, ddbwire.StatusFor(ddbwire.ProvisionedThroughputExceeded), ddbwire.ProvisionedThroughputExceeded, "hot")
			return
		}
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sendRateRows returns the send-rate limiter's gauge by partition.
func sendRateRows(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	rm, err := m.Collect(context.Background())
	require.NoError(t, err)
	rows := map[string]float64{}
	for _, r := range telemetry.Rows(rm) {
		if r.Instrument == "jitterretry.send_rate.limit" {
			p, _ := r.Attr("jitterretry.partition")
			rows[p] = r.Value
		}
	}
	return rows
}

// TestTheSendRateLimiterIsPerPartition: one client writing to a throttled
// table and another one. With a partition per table, the hot table's
// throttles cut its own partition's rate only: the other table's calls
// never wait. Without, the client has one limiter, and the hot table's
// throttles cut the rate every table's calls wait for (the README's advice:
// a partition per table for a client that serves several).
func TestTheSendRateLimiterIsPerPartition(t *testing.T) {
	srv := hotTableServer(t)
	for _, perTable := range []bool{true, false} {
		m, err := telemetry.New(telemetry.Options{})
		require.NoError(t, err)
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.MeterProvider = m.Provider
			o.SendRate = &jitterretry.SendRateOptions{}
			o.MaxAttempts = 1 // the limiter hears every answer; no backoffs to wait out
			if perTable {
				o.PartitionKey = jitterretry.PartitionFromContext
			}
		})
		c := newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r })
		call := func(table string) {
			ctx, cancel := context.WithTimeout(jitterretry.WithPartition(context.Background(), table), 5*time.Second)
			defer cancel()
			_, _ = c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key})
		}
		// Until the hot table's throttles cut a rate: a count of answers
		// decides it (about 20), not the machine's speed.
		hot := ""
		if perTable {
			hot = "hot"
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			var wg sync.WaitGroup
			for _, table := range []string{"hot", "cold"} {
				for range 4 {
					wg.Add(1)
					go func() { defer wg.Done(); call(table) }()
				}
			}
			wg.Wait()
			if _, cut := sendRateRows(t, m)[hot]; cut {
				break
			}
		}
		rows := sendRateRows(t, m)
		rate, cut := rows[hot]
		require.True(t, cut, "per table %v: expect the hot table's throttles to cut a rate, got %v", perTable, rows)
		assert.False(t, math.IsInf(rate, 1), "per table %v", perTable)
		if perTable {
			_, coldCut := rows["cold"]
			assert.False(t, coldCut, "expect the cold table's partition unlimited, got %v", rows)
			assert.Len(t, rows, 1, "expect only the hot table's partition limited, got %v", rows)
		}
	}
}
