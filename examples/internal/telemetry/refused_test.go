package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/metrics/smithyotelmetrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// TestAViewThatRefusesTheInstrumentsFailsNoOperation: an OpenTelemetry
// view whose aggregation does not fit an instrument's kind (a last value
// for a counter) makes the SDK refuse to create it, and the adapter
// returns no instrument. The retryer goes on without those instruments:
// retries, give-ups and the gauge work as without metrics.
func TestAViewThatRefusesTheInstrumentsFailsNoOperation(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Name: "jitterretry.*"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationLastValue{}},
	)))
	t.Cleanup(func() { _ = otel.Shutdown(context.Background()) })
	var gaveUp []jitterretry.GiveUpReason
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Millisecond, time.Millisecond, 5*time.Millisecond
		o.MeterProvider = smithyotelmetrics.Adapt(otel)
		o.OnGiveUp = func(e *jitterretry.GiveUpError) { gaveUp = append(gaveUp, e.Reason) }
	})
	require.NoError(t, r.Err())
	srv := newScriptServer(t)
	client := newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r })
	ctx := context.Background()

	srv.script(serverErr, throttle) // two retries, then success
	require.NotPanics(t, func() { require.NoError(t, putItem(ctx, client)) })
	srv.script(reply{code: ddbwire.ResourceNotFound}) // a refusal
	var err error
	require.NotPanics(t, func() { err = getItem(ctx, client) })
	var rnf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &rnf)
	assert.Equal(t, []jitterretry.GiveUpReason{jitterretry.GiveUpNotRetryable}, gaveUp)
	assert.Equal(t, uint(500-14-5+5), r.Remaining(), "expect the bucket's accounting unchanged: two retries paid, the successful one's cost back")
}

// TestAProviderAroundNothingIsAnOptionsError: a meter provider adapted from
// a provider variable never set (smithyotelmetrics.Adapt(nil), or of a nil
// *sdkmetric.MeterProvider) panics when asked for a meter. New panicked
// with it (an outside review); it is a bad option, and New, which never
// panics on one, reports it as such.
func TestAProviderAroundNothingIsAnOptionsError(t *testing.T) {
	var unset *sdkmetric.MeterProvider
	for name, provider := range map[string]metrics.MeterProvider{
		"Adapt(nil)":             smithyotelmetrics.Adapt(nil),
		"Adapt of a nil pointer": smithyotelmetrics.Adapt(unset),
	} {
		t.Run(name, func(t *testing.T) {
			var r *jitterretry.Retryer
			require.NotPanics(t, func() {
				r = jitterretry.New(func(o *jitterretry.Options) { o.MeterProvider = provider })
			})
			var oe *jitterretry.OptionsError
			require.ErrorAs(t, r.Err(), &oe)
			assert.Equal(t, "MeterProvider", oe.Option)
			var sent atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { sent.Add(1) }))
			t.Cleanup(srv.Close)
			err := putItem(context.Background(), newClient(srv.URL, func(o *dynamodb.Options) { o.Retryer = r }))
			require.ErrorAs(t, err, &oe, "expect every operation to fail with it")
			assert.Zero(t, sent.Load(), "expect nothing sent")
		})
	}
}
