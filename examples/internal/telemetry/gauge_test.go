package telemetry_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
)

// tokenRows returns the data points of the bucket gauge.
func tokenRows(t *testing.T, m *telemetry.Metrics) []telemetry.Row {
	t.Helper()
	rm, err := m.Collect(context.Background())
	require.NoError(t, err)
	var rows []telemetry.Row
	for _, r := range telemetry.Rows(rm) {
		if r.Instrument == "jitterretry.bucket.tokens" {
			rows = append(rows, r)
		}
	}
	return rows
}

// TestBucketGaugeReportsOnlyBucketsItCanRead: a loop retryer without a
// bucket (ratelimit.None) beside the client's, on one provider, reports
// nothing, instead of a 0 that hides the client's 500.
func TestBucketGaugeReportsOnlyBucketsItCanRead(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	client := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider })
	loop := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider; o.RateLimiter = ratelimit.None })
	rows := tokenRows(t, m)
	require.Len(t, rows, 1)
	assert.Equal(t, 500.0, rows[0].Value)
	runtime.KeepAlive(client)
	runtime.KeepAlive(loop)
}

// TestBucketGaugeNamesTheService: the retryers of two clients on one
// provider report apart once they have served an operation: the gauge
// carries the service.
func TestBucketGaugeNamesTheService(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	srv := newScriptServer(t)
	srv.script(throttle)
	r := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider; o.ThrottleBaseDelay = time.Millisecond })
	c := newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r; o.MeterProvider = m.Provider })
	require.NoError(t, putItem(context.Background(), c))
	rows := tokenRows(t, m)
	require.Len(t, rows, 1)
	svc, ok := rows[0].Attr("rpc.service")
	assert.True(t, ok, "expect the service on the gauge")
	assert.Equal(t, "DynamoDB", svc)
	assert.Equal(t, 500.0, rows[0].Value, "expect the successful retry's cost back")
}

// TestBucketGaugeCountsAbandonedRetriesBack: a retry whose caller gave up
// during its backoff gets its tokens back, and the gauge shows them, also
// when no retry or Remaining call follows to reclaim them (a dashboard
// read 495 of 500 for good before).
func TestBucketGaugeCountsAbandonedRetriesBack(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	srv := newScriptServer(t)
	srv.script(throttle)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MeterProvider = m.Provider
		o.Jitter, o.ThrottleBaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Hour, time.Hour
		o.DisableDeadlineGiveUp = true
	})
	c := newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	require.ErrorIs(t, putItem(ctx, c), context.Canceled)
	rows := tokenRows(t, m)
	require.Len(t, rows, 1)
	assert.Equal(t, 500.0, rows[0].Value, "expect the abandoned retry's 5 tokens back on the gauge")
}

// TestBucketGaugeStopsWithTheRetryer: retryers made one per client and
// dropped stop being observed, instead of living on in the provider.
func TestBucketGaugeStopsWithTheRetryer(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	keep := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider; o.BucketCapacity = 42 })
	for i := range 3 { // observed after keep: while alive, they hide it
		_ = jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider; o.BucketCapacity = uint(100 * (i + 1)) })
	}
	// All four report under the same attributes, so the row holds the last
	// one observed: 42 only once the three dropped ones are no longer
	// observed.
	var rows []telemetry.Row
	for range 200 { // cleanups run after a collection, on their own goroutine
		runtime.GC()
		if rows = tokenRows(t, m); len(rows) == 1 && rows[0].Value == 42 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Len(t, rows, 1, "expect one series")
	assert.Equal(t, 42.0, rows[0].Value, "expect only the retryer still in use observed")
	runtime.KeepAlive(keep)
}

// TestBudgetRefusalIsNoSkippedDeadlineCheck: a retry refused for an empty
// budget leaves nothing that counts as a skipped deadline check later,
// however many paired retry decisions follow.
func TestBudgetRefusalIsNoSkippedDeadlineCheck(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MeterProvider = m.Provider
		o.BucketCapacity, o.ThrottlingRetryCost, o.RetryCost = 5, 5, 5
		o.ThrottleBaseDelay, o.BaseDelay, o.MaxBackoff = time.Microsecond, time.Microsecond, time.Microsecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	first := throttleErr()
	release, err := r.GetRetryToken(ctx, first) // takes the 5 tokens
	require.NoError(t, err)
	_, err = r.RetryDelay(1, first)
	require.NoError(t, err)
	_, err = r.GetRetryToken(ctx, throttleErr())
	require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	require.NoError(t, release(nil)) // the first retry succeeded: its tokens back
	for range 2000 {
		e := throttleErr()
		release, err := r.GetRetryToken(ctx, e)
		require.NoError(t, err)
		_, err = r.RetryDelay(1, e)
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	rm, err := m.Collect(context.Background())
	require.NoError(t, err)
	for _, row := range telemetry.Rows(rm) {
		assert.NotEqual(t, "jitterretry.deadline_checks.skipped", row.Instrument, "expect no skipped check, got %v", row.Attributes.ToSlice())
	}
}

// TestEvictedHandOffNamesItsPartition: under a wrapper that skips
// RetryDelay, the deadline checks that could not be made are counted in
// the partition of the operations that skipped them.
func TestEvictedHandOffNamesItsPartition(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MeterProvider = m.Provider
		o.PartitionKey = jitterretry.PartitionFromContext
	})
	ctx, cancel := context.WithTimeout(jitterretry.WithPartition(context.Background(), "orders"), time.Hour)
	defer cancel()
	for range 2000 { // far more errors than hand-off slots: entries are evicted
		release, err := r.GetRetryToken(ctx, throttleErr())
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	rm, err := m.Collect(context.Background())
	require.NoError(t, err)
	var evicted float64
	for _, row := range telemetry.Rows(rm) {
		if reason, _ := row.Attr("jitterretry.reason"); row.Instrument == "jitterretry.deadline_checks.skipped" && reason == "evicted" {
			partition, _ := row.Attr("jitterretry.partition")
			assert.Equal(t, "orders", partition)
			evicted += row.Value
		}
	}
	assert.Positive(t, evicted, "expect evictions counted")
}

// TestSkippedChecksAreCountedOnceTheClientIsIdle: under a wrapper that skips
// RetryDelay, each retry's unmade deadline check is counted once, a few
// seconds after it, with no further call: the hand-off table's sweep drops
// the entries no RetryDelay took. Before the sweep, only those later errors
// evicted were counted (an outside review: 56 of some 190, still 56 after
// 1.5 s idle).
func TestSkippedChecksAreCountedOnceTheClientIsIdle(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	r := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider })
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	const retries = 20
	for range retries { // RetryDelay never asked, as under retry.AddWithMaxBackoffDelay
		release, err := r.GetRetryToken(ctx, throttleErr())
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	skipped := func() float64 {
		runtime.GC() // a collection: the retryer, alive, sweeps on
		rm, err := m.Collect(context.Background())
		require.NoError(t, err)
		var n float64
		for _, row := range telemetry.Rows(rm) {
			if row.Instrument == "jitterretry.deadline_checks.skipped" {
				n += row.Value
			}
		}
		return n
	}
	assert.Eventually(t, func() bool { return skipped() == retries }, 30*time.Second, 50*time.Millisecond,
		"expect every unmade check counted once the client is idle")
	time.Sleep(5 * time.Second) // two more sweeps' time: nothing counted twice
	assert.Equal(t, float64(retries), skipped())
	// The sweep's timer holds the retryer weakly: a retryer dropped is
	// collected with its hand-offs, uncounted (a busy machine's collector
	// did so before the sweep came, and the test counted 0; with the
	// collections above and no KeepAlive, every run does).
	runtime.KeepAlive(r)
}

// TestBucketGaugeLeavesOutTheServiceOfABucketServicesShare: one retryer
// returned from config.WithRetryer serves every client of the
// configuration, an assume-role profile's STS client first. The gauge named
// the first service it served for good (rpc.service=STS over DynamoDB's
// budget, an outside review); a bucket two services share names none.
func TestBucketGaugeLeavesOutTheServiceOfABucketServicesShare(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	r := jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = m.Provider })
	stsClient := newSTSClient(callerIdentityServer(t).URL, r)
	_, err = stsClient.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	require.NoError(t, err)
	rows := tokenRows(t, m)
	require.Len(t, rows, 1)
	svc, _ := rows[0].Attr("rpc.service")
	assert.Equal(t, "STS", svc, "expect the one service served so far on the gauge")

	srv := newScriptServer(t)
	require.NoError(t, putItem(context.Background(), newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r })))
	for range 2 { // and it stays out, whichever service comes next
		rows = tokenRows(t, m)
		require.Len(t, rows, 1, "expect one bucket, one series")
		svc, named := rows[0].Attr("rpc.service")
		assert.False(t, named, "expect no service on a bucket two services share, got %q", svc)
		_, err = stsClient.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
		require.NoError(t, err)
	}
}
