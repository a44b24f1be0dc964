package main

// This file samples our retryers' own gauges during a run (-plot-metrics):
// the retry bucket's tokens and the rate the send-rate limiter allows, read
// from the instruments the retryer records through Options.MeterProvider,
// as a user's dashboard would read them, rather than from its internals.

import (
	"context"
	"math"
	"time"

	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/metrics/smithyotelmetrics"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The retryer's instruments that -plot-metrics samples, as the README's
// "Hooks and observability" section names them.
const (
	retryerScope     = "github.com/jitterretry/jitterretry"
	instBucketTokens = "jitterretry.bucket.tokens"   // {token}
	instSendRate     = "jitterretry.send_rate.limit" // {request}/s; absent while unlimited
)

// gaugeInterval is how often a run samples the gauges: fine enough to show
// the limiter's cuts and probes, which come a few hundred milliseconds
// apart, and cheap enough for a fleet of a hundred clients.
const gaugeInterval = 100 * time.Millisecond

// spread summarises one gauge over the clients of a fleet at one instant.
type spread struct {
	n              int // clients that reported the gauge; 0 when none did, and the rest is zero
	min, mean, max float64
}

// spreadOf returns the spread of values.
func spreadOf(values []float64) spread {
	if len(values) == 0 {
		return spread{}
	}
	s := spread{n: len(values), min: math.Inf(1), max: math.Inf(-1)}
	var sum float64
	for _, v := range values {
		s.min, s.max = min(s.min, v), max(s.max, v)
		sum += v
	}
	s.mean = sum / float64(len(values))
	return s
}

// gaugeSample is what the retryers of a run's clients reported at one
// instant.
type gaugeSample struct {
	at     time.Duration // since the scenario's start
	tokens spread        // jitterretry.bucket.tokens
	rate   spread        // jitterretry.send_rate.limit, over the clients whose limiter is limited
}

// gaugeReaders gives the retryer of each client of a run a meter provider
// of its own, read by a ManualReader. One provider per client, not one
// shared, because the retryers of a fleet would report under the same
// attributes (service DynamoDB, partition "") on a shared one, and the
// gauge would keep only one client's value. A nil *gaugeReaders gives no
// provider and samples nothing.
type gaugeReaders struct {
	readers   []*sdkmetric.ManualReader
	providers []*sdkmetric.MeterProvider
}

// newGaugeReaders returns the providers and readers of n clients.
func newGaugeReaders(n int) *gaugeReaders {
	g := &gaugeReaders{}
	for range n {
		r := sdkmetric.NewManualReader()
		g.readers = append(g.readers, r)
		g.providers = append(g.providers, sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	}
	return g
}

// provider returns client i's provider, in the smithy-go interface the
// retryer takes; nil when g is nil.
func (g *gaugeReaders) provider(i int) metrics.MeterProvider {
	if g == nil {
		return nil
	}
	return smithyotelmetrics.Adapt(g.providers[i])
}

// shutdown stops every provider: the retryers record nothing afterwards.
func (g *gaugeReaders) shutdown() {
	if g == nil {
		return
	}
	for _, p := range g.providers {
		_ = p.Shutdown(context.Background()) // a provider with a ManualReader has nothing to flush
	}
}

// sample reads every client's gauges once. Each Collect runs the
// retryer's gauge callbacks, which read its bucket and limiter at that
// instant: asynchronous gauges report only what the last callback
// observed.
func (g *gaugeReaders) sample(ctx context.Context, at time.Duration) (gaugeSample, error) {
	var tokens, rates []float64
	for _, r := range g.readers {
		var rm metricdata.ResourceMetrics
		if err := r.Collect(ctx, &rm); err != nil {
			return gaugeSample{}, err
		}
		if v, ok := gaugeValue(rm, instBucketTokens); ok {
			tokens = append(tokens, v)
		}
		if v, ok := gaugeValue(rm, instSendRate); ok {
			rates = append(rates, v)
		}
	}
	return gaugeSample{at: at, tokens: spreadOf(tokens), rate: spreadOf(rates)}, nil
}

// record samples the gauges every gaugeInterval from start, the
// scenario's start, to end or until ctx is done, and returns the samples.
// Each sample is stamped with the time it was taken, not the tick's, so
// that a loaded machine's late ticks do not shift the series.
func (g *gaugeReaders) record(ctx context.Context, start, end time.Time) ([]gaugeSample, error) {
	sleepUntil(ctx, start)
	tick := time.NewTicker(gaugeInterval)
	defer tick.Stop()
	var out []gaugeSample
	for ctx.Err() == nil {
		now := time.Now()
		if now.After(end) {
			break
		}
		// Not ctx: the run's end cancels it, and a Collect cut short would
		// lose the sample for nothing, the callbacks being quick.
		s, err := g.sample(context.Background(), now.Sub(start))
		if err != nil {
			return out, err
		}
		out = append(out, s)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	return out, nil
}

// gaugeValue returns the value of the retryer's gauge called name in rm,
// and false when it has no data point. A retryer of throttlebench has one
// partition, so each of its gauges has at most one point.
func gaugeValue(rm metricdata.ResourceMetrics, name string) (float64, bool) {
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != retryerScope {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				if len(d.DataPoints) > 0 {
					return float64(d.DataPoints[0].Value), true
				}
			case metricdata.Gauge[float64]:
				if len(d.DataPoints) > 0 {
					return d.DataPoints[0].Value, true
				}
			}
		}
	}
	return 0, false
}
