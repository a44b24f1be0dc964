package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-workers", "3", "-strategies", "full, decorrelated", "-endpoint", ""}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, o.workers)
	assert.Equal(t, []string{"full", "decorrelated"}, o.strategies)

	for name, args := range map[string][]string{
		"unknown strategy": {"-strategies", "linear"},
		"no strategy":      {"-strategies", ","},
		"zero workers":     {"-workers", "0"},
		"zero capacity":    {"-capacity", "0"},
		"rate above one":   {"-lost-responses", "1.5"},
		"stray argument":   {"extra"},
		"zero timeout":     {"-timeout", "0s"},
		"zero blind cap":   {"-blind-max-backoff", "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(args, io.Discard)
			require.Error(t, err)
		})
	}
}

func TestRunPrintsTheTableAndTheVerdict(t *testing.T) {
	var out bytes.Buffer
	ok, err := run(context.Background(), options{
		workers: 4, increments: 3, items: 2, capacity: 1000, lostResponses: 0.1,
		strategies: []string{"sdk-standard", "decorrelated", "contention"}, seed: 1, timeout: defaultTimeout,
		blindMaxBackoff: defaultBlindMaxBackoff,
	}, &out, io.Discard)
	require.NoError(t, err)
	assert.True(t, ok, out.String())
	text := out.String()
	assert.Contains(t, text, "server: embedded minidyn at http://127.0.0.1:")
	assert.Contains(t, text, "sdk-standard")
	assert.Contains(t, text, "decorrelated")
	assert.Contains(t, text, "contention")
	assert.Equal(t, 3, strings.Count(text, "ok (2/2 items)"))
	assert.True(t, strings.HasSuffix(text, "lost updates: 0\n"), "expect the verdict last, got %q", text)
}

// oneLostWrite is a run whose only lost response is the first write's
// (the capacity proxy draws each request's fate in the order they come, and
// one worker sends them in a known order: a read, then writes): the SDK
// retries it, and the retry fails its condition on the worker's own write.
// So the instruments of a healthy run have something to show, whatever the
// machine's speed: an SDK retry of a 500, the bucket. (The conflict is Do's
// to retry, not a give-up; give-ups are tested in examples/internal/telemetry.)
func oneLostWrite() options {
	return options{
		workers: 1, increments: 2, items: 1, capacity: 1000, lostResponses: 0.1,
		strategies: []string{"contention"}, seed: 6, timeout: defaultTimeout, blindMaxBackoff: defaultBlindMaxBackoff,
	}
}

// exported are the Prometheus names of the instruments oneLostWrite
// records, as the OpenTelemetry exporter translates them: dots become
// underscores, a unit in braces is dropped, seconds and counters get their
// suffix.
var exported = []string{
	"client_call_attempts_total",
	"client_call_errors_total",
	"client_call_attempt_duration_seconds_bucket",
	"jitterretry_retries_total",
	"jitterretry_backoff_duration_seconds_bucket",
	"jitterretry_bucket_tokens",
}

func TestPrometheusServesEveryInstrumentDuringTheRun(t *testing.T) {
	o := oneLostWrite()
	o.prometheus = "127.0.0.1:0"
	var addr string
	var scraped string
	o.listening = func(a string) { addr = a }
	o.strategyDone = func(string) {
		// Collections before the scrape, as a busy machine has them: the
		// strategy's retryers, which observe the gauges, must still be
		// alive, and their cleanups (which unregister the gauges) get the
		// time to run if they are not.
		for range 3 {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		// The run goes on: the server still serves this strategy's metrics.
		resp, err := http.Get("http://" + addr + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		scraped = string(body)
	}
	var out bytes.Buffer
	ok, err := run(context.Background(), o, &out, io.Discard)
	require.NoError(t, err)
	require.True(t, ok, out.String())
	assert.Contains(t, out.String(), "metrics: http://"+addr+"/metrics")
	for _, name := range exported {
		assert.Contains(t, scraped, "\n"+name+"{", "expect %s in the scrape", name)
	}
	for _, series := range []string{
		`client_call_errors_total{exception_type="InternalServerError",otel_scope_name="github.com/aws/aws-sdk-go-v2/service/dynamodb",otel_scope_schema_url="",otel_scope_version="",rpc_method="UpdateItem",rpc_service="DynamoDB"} 1`,
		// The table is the retryer's partition (see occ.NewPolicy).
		`jitterretry_retries_total{jitterretry_class="transient",jitterretry_partition="jitterretry-occ-contention",otel_scope_name="github.com/jitterretry/jitterretry",otel_scope_schema_url="",otel_scope_version="",rpc_method="UpdateItem",rpc_service="DynamoDB"} 1`,
	} {
		assert.Contains(t, scraped, series)
	}

	// Once the run is over, nothing listens.
	_, err = http.Get("http://" + addr + "/metrics")
	assert.Error(t, err)
}

func TestMetricsFlagPrintsTheInstruments(t *testing.T) {
	// One run per strategy: oneLostWrite's seed is the first strategy's.
	for _, name := range []string{"full", "contention"} {
		o := oneLostWrite()
		o.metrics = true
		o.strategies = []string{name}
		var out bytes.Buffer
		ok, err := run(context.Background(), o, &out, io.Discard)
		require.NoError(t, err)
		require.True(t, ok, out.String())
		text := out.String()
		_, table, found := strings.Cut(text, "metrics of "+name+":\n")
		require.True(t, found, "expect a metrics table for %s in\n%s", name, text)
		table, _, _ = strings.Cut(table, "\n\n")
		for _, inst := range []string{"client.call.attempts", "client.call.errors", "client.call.attempt_duration",
			"jitterretry.retries", "jitterretry.backoff.duration", "jitterretry.bucket.tokens"} {
			assert.Contains(t, table, "\n"+inst+" ", "expect %s in the table of %s", inst, name)
		}
		// The SDK counts every attempt the proxy saw.
		assert.Equal(t, calls(t, text, name), attempts(t, table), "client.call.attempts of %s against the calls column", name)
	}
}

// calls returns the calls column of strategy's row in the report.
func calls(t *testing.T, report, strategy string) int {
	t.Helper()
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == strategy && f[1] != "" && !strings.HasPrefix(line, "metrics") {
			if n, err := strconv.Atoi(f[2]); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no row for %s in\n%s", strategy, report)
	return 0
}

// attempts adds up the client.call.attempts rows of a metrics table.
func attempts(t *testing.T, table string) int {
	t.Helper()
	sum := 0
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "client.call.attempts" {
			n, err := strconv.Atoi(f[len(f)-1])
			require.NoError(t, err, line)
			sum += n
		}
	}
	return sum
}
