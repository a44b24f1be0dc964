package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
)

// TestAPartitionKeyNotValidUTF8KeepsTheScrapeWorking: a tenant key that is
// not valid UTF-8 (taken from a request header, say) named its partition as
// it was, and the Prometheus exporter refused the label: every scrape of
// the process answered 500 from then on, the SDK's own client metrics
// with it (an outside review, helper-182). Two such keys stay two
// partitions, each named in valid UTF-8.
func TestAPartitionKeyNotValidUTF8KeepsTheScrapeWorking(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{Prometheus: true})
	require.NoError(t, err)
	var named []string
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Millisecond, time.Millisecond, 2*time.Millisecond
		o.PartitionKey = jitterretry.PartitionFromContext
		o.MeterProvider = m.Provider
		o.OnRetry = func(e jitterretry.RetryEvent) { named = append(named, e.Partition) }
	})
	srv := newScriptServer(t)
	client := newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r; o.MeterProvider = m.Provider })
	for _, key := range []string{"tenant-\xff", "tenant-\xfe"} {
		srv.script(throttle)
		require.NoError(t, putItem(jitterretry.WithPartition(context.Background(), key), client))
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code, "expect the scrape to work, got %.300s", rec.Body.String())
	assert.Contains(t, rec.Body.String(), "jitterretry_retries_total")
	assert.Contains(t, rec.Body.String(), "client_call_attempts_total")

	require.Len(t, named, 2)
	assert.NotEqual(t, named[0], named[1], "expect two keys to stay two partitions")
	for _, p := range named {
		assert.True(t, strings.HasPrefix(p, "tenant-"), "expect the key's valid start in its name, got %q", p)
		assert.True(t, strings.ToValidUTF8(p, "?") == p, "expect the partition named in valid UTF-8, got %q", p)
	}
}
