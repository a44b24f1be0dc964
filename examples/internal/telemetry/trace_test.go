package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/tracing/smithyoteltracing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// TestRetryDecisionsAreAttemptSpanEvents traces a real client through
// smithyoteltracing into an in-memory exporter: the attempt that failed
// with a throttle carries a jitterretry.retry event, the one the deadline
// cut short a jitterretry.give_up event.
func TestRetryDecisionsAreAttemptSpanEvents(t *testing.T) {
	var retries []jitterretry.RetryEvent
	srv, client, attemptSpans := tracedClient(t, func(o *jitterretry.Options) {
		o.OnRetry = func(e jitterretry.RetryEvent) { retries = append(retries, e) } // one operation at a time
	})

	srv.script(throttle)
	require.NoError(t, putItem(context.Background(), client))
	// A hint far past a deadline that no stall of a busy machine reaches
	// before the decision (300 ms did, one run in three).
	srv.script(reply{code: ddbwire.Throttling, retryAfter: "5000"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.ErrorIs(t, deleteItem(ctx, client), context.DeadlineExceeded)

	attempts := attemptSpans()
	require.Len(t, attempts, 3, "expect PutItem's two attempts and DeleteItem's one")
	require.Len(t, retries, 1)

	retry := event(t, attempts[0], "jitterretry.retry")
	assert.Equal(t, "throttle", retry["jitterretry.class"].AsString())
	assert.Equal(t, int64(1), retry["jitterretry.attempt"].AsInt64())
	assert.Equal(t, int64(5), retry["jitterretry.cost"].AsInt64(), "the SDK's throttle cost")
	assert.Equal(t, int64(500-5), retry["jitterretry.tokens_left"].AsInt64())
	assert.Equal(t, retries[0].Delay.Milliseconds(), retry["jitterretry.delay_ms"].AsInt64())
	assert.False(t, retry["jitterretry.unchecked"].AsBool())
	assert.Empty(t, attempts[1].Events, "expect nothing on the attempt that succeeded")

	giveUp := event(t, attempts[2], "jitterretry.give_up")
	assert.Equal(t, "deadline", giveUp["jitterretry.reason"].AsString())
	assert.GreaterOrEqual(t, giveUp["jitterretry.delay_ms"].AsInt64(), int64(5000), "expect the refused backoff, after the hint")
	assert.Less(t, giveUp["jitterretry.remaining_ms"].AsInt64(), int64(2000))
}

// tracedClient returns a script server, a client of it traced into an
// in-memory exporter, with a retryer of short throttle backoffs and opts,
// and a function that returns the client's Attempt spans ended so far.
func tracedClient(t *testing.T, opts ...func(*jitterretry.Options)) (*scriptServer, *dynamodb.Client, func() []tracetest.SpanStub) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := jitterretry.New(append([]func(*jitterretry.Options){func(o *jitterretry.Options) {
		o.ThrottleBaseDelay, o.MaxBackoff = 2*time.Millisecond, 5*time.Millisecond
	}}, opts...)...)
	srv := newScriptServer(t)
	client := newClient(srv.URL, func(o *dynamodb.Options) {
		o.Retryer = r
		o.TracerProvider = smithyoteltracing.Adapt(tp)
	})
	return srv, client, func() []tracetest.SpanStub {
		var attempts []tracetest.SpanStub
		for _, s := range spans.GetSpans() {
			if s.Name == "Attempt" {
				attempts = append(attempts, s)
			}
		}
		return attempts
	}
}

// event returns the attributes of span's only event called name.
func event(t *testing.T, span tracetest.SpanStub, name string) map[string]attribute.Value {
	t.Helper()
	var found []map[string]attribute.Value
	for _, e := range span.Events {
		if e.Name != name {
			continue
		}
		attrs := map[string]attribute.Value{}
		for _, kv := range e.Attributes {
			attrs[string(kv.Key)] = kv.Value
		}
		found = append(found, attrs)
	}
	require.Len(t, found, 1, "expect one %s event on %s, got events %v", name, span.Name, span.Events)
	return found[0]
}

// TestARetryEventLeavesOutTheTokensItCannotTell: with a RateLimiter that
// keeps no count (ratelimit.None), the retry event has no
// jitterretry.tokens_left, as the bucket's gauge has none; it said 0 (an
// outside review, helper-182).
func TestARetryEventLeavesOutTheTokensItCannotTell(t *testing.T) {
	srv, client, attemptSpans := tracedClient(t, func(o *jitterretry.Options) { o.RateLimiter = ratelimit.None })
	srv.script(throttle)
	require.NoError(t, putItem(context.Background(), client))

	attempts := attemptSpans()
	require.NotEmpty(t, attempts)
	retry := event(t, attempts[0], "jitterretry.retry")
	assert.Equal(t, int64(5), retry["jitterretry.cost"].AsInt64(), "expect the cost asked of the RateLimiter")
	assert.NotContains(t, retry, "jitterretry.tokens_left")
}
