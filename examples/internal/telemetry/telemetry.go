// Package telemetry wires the retryer's and the SDK's metrics into
// OpenTelemetry for the examples: a meter provider with an in-memory reader,
// for tables and tests, and optionally a Prometheus exporter, adapted to the
// smithy-go metrics.MeterProvider that both the DynamoDB client
// (dynamodb.Options.MeterProvider) and the retryer
// (jitterretry.Options.MeterProvider) take.
package telemetry

import (
	"context"
	"net/http"

	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/metrics/smithyotelmetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The instruments the examples show: every one the retryer records, and the
// SDK's per-attempt ones, which the retryer's complement.
const (
	RetryerScope = "github.com/jitterretry/jitterretry"

	Retries         = "jitterretry.retries"
	GiveUps         = "jitterretry.give_ups"
	Backoff         = "jitterretry.backoff.duration"
	BucketTokens    = "jitterretry.bucket.tokens"
	SendRateLimit   = "jitterretry.send_rate.limit"
	SendRateWait    = "jitterretry.send_rate.wait_duration"
	DeadlineSkipped = "jitterretry.deadline_checks.skipped"

	CallAttempts        = "client.call.attempts"
	CallErrors          = "client.call.errors"
	CallAttemptDuration = "client.call.attempt_duration"
)

// SDKInstruments are the SDK's instruments the tables show; the client
// records more (client.call.duration, serialization, signing, ...).
var SDKInstruments = []string{CallAttempts, CallErrors, CallAttemptDuration}

// secondsBuckets are histogram boundaries for durations in seconds, from a
// millisecond to the 20 s backoff cap: OpenTelemetry's default boundaries
// (0, 5, 10, ... 10000) suit milliseconds, and would put every backoff and
// every attempt in the first bucket or two.
var secondsBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20}

// Metrics is an OpenTelemetry meter provider with an in-memory reader and,
// with Options.Prometheus, a Prometheus exporter on a registry of its own.
type Metrics struct {
	// Provider is the provider to give the DynamoDB client and the retryer.
	Provider metrics.MeterProvider

	otel     *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
	registry *prometheus.Registry
}

// Options configures New.
type Options struct {
	// Prometheus adds a Prometheus exporter, served by Handler.
	Prometheus bool
}

// New returns a meter provider that records into memory (see Collect).
func New(o Options) (*Metrics, error) {
	m := &Metrics{reader: sdkmetric.NewManualReader()}
	opts := []sdkmetric.Option{
		sdkmetric.WithReader(m.reader),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: secondsBuckets}},
		)),
	}
	if o.Prometheus {
		m.registry = prometheus.NewRegistry()
		exporter, err := otelprom.New(otelprom.WithRegisterer(m.registry))
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(exporter))
	}
	m.otel = sdkmetric.NewMeterProvider(opts...)
	m.Provider = smithyotelmetrics.Adapt(m.otel)
	return m, nil
}

// Collect returns everything recorded so far (cumulative).
func (m *Metrics) Collect(ctx context.Context) (metricdata.ResourceMetrics, error) {
	var rm metricdata.ResourceMetrics
	err := m.reader.Collect(ctx, &rm)
	return rm, err
}

// Handler serves the Prometheus exposition of the metrics; without
// Options.Prometheus it answers 404.
func (m *Metrics) Handler() http.Handler {
	if m.registry == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Shutdown stops the provider; its instruments record nothing afterwards.
func (m *Metrics) Shutdown(ctx context.Context) error {
	return m.otel.Shutdown(ctx)
}
