package jitterretry

// This file owns the retryer's telemetry: metrics recorded through the
// smithy-go metrics interfaces that the SDK's clients take
// (Options.MeterProvider), and events on the SDK's attempt span when the
// operation is traced.

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/tracing"
)

// The instruments, in the style of the SDK's own client.call.* metrics. The
// README's "Hooks and observability" section lists them with their attributes.
const (
	meterScope = "github.com/jitterretry/jitterretry"

	instRetries     = "jitterretry.retries"
	instGiveUps     = "jitterretry.give_ups"
	instBackoff     = "jitterretry.backoff.duration"
	instTokens      = "jitterretry.bucket.tokens"
	instSendRate    = "jitterretry.send_rate.limit"
	instSendWait    = "jitterretry.send_rate.wait_duration"
	instUncheckable = "jitterretry.deadline_checks.skipped"

	// Attributes. The service and operation are named as in the SDK's
	// metrics; every other attribute takes a value from a closed set, or
	// a partition key: the gauges report the 1024 partitions kept at most,
	// the counters and histograms every key they ever saw (the README
	// shows a view that drops the attribute).
	attrService   = "rpc.service"
	attrRegion    = "cloud.region"
	attrMethod    = "rpc.method"
	attrPartition = "jitterretry.partition"
	attrClass     = "jitterretry.class"
	attrReason    = "jitterretry.reason"
)

// meter records the retryer's instruments. A nil *meter records nothing,
// and a Retryer without a MeterProvider has a nil one.
type meter struct {
	retries     metrics.Int64Counter
	giveUps     metrics.Int64Counter
	backoff     metrics.Float64Histogram
	waits       metrics.Float64Histogram
	uncheckable metrics.Int64Counter
}

// newMeter creates the instruments on p, and the gauges that read lanes,
// which it returns for stopping. An instrument p fails to create (an
// OpenTelemetry view whose aggregation does not fit its kind makes the
// adapter return none) records nothing, so telemetry can never fail an
// operation; a nil Meter means no telemetry. The gauges' callbacks hold l,
// never the Retryer.
//
// reclaim gives back the tokens of retries abandoned with their context
// before the bucket gauge reads the buckets, as Retryer.Remaining does:
// a client whose callers cancelled and that retries no more would
// otherwise show a drained bucket for as long as it runs.
//
// A provider that panics when asked for the meter or an instrument is a
// bad option, which err reports, as New never panics on one: an adapter of
// a provider never set (smithyotelmetrics.Adapt(nil)) is non-nil, and
// panics in its Meter. The gauges read the lanes only once all was made:
// one the provider registered before its panic (and never returned, or
// whose Stop may panic too) observes nothing, and holds neither.
func newMeter(p metrics.MeterProvider, l *lanes, reclaim func() bool) (m *meter, gauges []metrics.AsyncInstrument, err error) {
	if p == nil {
		return nil, nil, nil
	}
	var made atomic.Pointer[gaugeSource]
	defer func() {
		if v := recover(); v != nil {
			m, gauges = nil, nil
			err = &OptionsError{Option: "MeterProvider", Reason: fmt.Sprintf(
				"panicked when asked for the retryer's instruments (%v): give a provider that was set up, or nil for none", v)}
		}
	}()
	mt := p.Meter(meterScope)
	if mt == nil || holdsNil(mt) {
		return nil, nil, nil
	}
	nop := metrics.NopMeterProvider{}.Meter(meterScope)
	counter := func(name, u, desc string) metrics.Int64Counter {
		if c, err := mt.Int64Counter(name, unit(u, desc)); err == nil && c != nil && !holdsNil(c) {
			return c
		}
		c, _ := nop.Int64Counter(name)
		return c
	}
	histogram := func(name, u, desc string) metrics.Float64Histogram {
		if h, err := mt.Float64Histogram(name, unit(u, desc)); err == nil && h != nil && !holdsNil(h) {
			return h
		}
		h, _ := nop.Float64Histogram(name)
		return h
	}
	m = &meter{
		retries:     counter(instRetries, "{retry}", "Retries the retryer let go ahead, by error class."),
		giveUps:     counter(instGiveUps, "{refusal}", "Retries the retryer refused, by reason."),
		backoff:     histogram(instBackoff, "s", "Backoff before a retry, after the x-amz-retry-after hint."),
		waits:       histogram(instSendWait, "s", "Time an attempt waited for the send-rate limiter."),
		uncheckable: counter(instUncheckable, "{check}", "Deadline checks that could not be made, by reason."),
	}
	keep := func(g metrics.AsyncInstrument, err error) {
		if err == nil && g != nil && !holdsNil(g) {
			gauges = append(gauges, g)
		}
	}
	keep(mt.Int64AsyncGauge(instTokens, func(ctx context.Context, o metrics.Int64Observer) {
		made.Load().each(true, func(ln *lane) {
			if n, ok := ln.tokens(); ok && ln.bucketOf == nil { // a shared bucket once
				o.Observe(ctx, int64(n), laneAttrs(ln.key, ln.serviceName()))
			}
		})
	}, unit("{token}", "Tokens left in the retry token bucket, by service and partition.")))
	if l.cfg.sendRate != nil {
		keep(mt.Float64AsyncGauge(instSendRate, func(ctx context.Context, o metrics.Float64Observer) {
			made.Load().each(false, func(ln *lane) {
				k, report := limiterSeries(ln)
				if r := ln.sender.currentRate(); report && !math.IsInf(r, 1) {
					o.Observe(ctx, r, limiterAttrs(ln.key, k))
				}
			})
		}, unit("{request}/s", "Send rate the limiter allows, by service, region and partition; absent while unlimited.")))
	}
	made.Store(&gaugeSource{lanes: l, reclaim: reclaim})
	return m, gauges, nil
}

// gaugeSource is what the gauges read: the lanes, and reclaim (see
// newMeter).
type gaugeSource struct {
	lanes   *lanes
	reclaim func() bool
}

// each runs fn on every lane, after reclaim when reclaimFirst; a nil
// source, whose instruments were not all made, reads nothing.
func (g *gaugeSource) each(reclaimFirst bool, fn func(*lane)) {
	if g == nil {
		return
	}
	if reclaimFirst {
		_ = g.reclaim()
	}
	g.lanes.each(fn)
}

// stopGauges unregisters the gauges of a Retryer that is gone. It runs as
// a cleanup on the runtime's goroutine, where a panic of the provider's
// Stop would end the process (helper-250): each is recovered, and the
// other gauges are still stopped.
func stopGauges(gauges []metrics.AsyncInstrument) {
	for _, g := range gauges {
		func() {
			defer func() { _ = recover() }()
			g.Stop()
		}()
	}
}

func unit(u, description string) metrics.InstrumentOption {
	return func(o *metrics.InstrumentOptions) { o.UnitLabel, o.Description = u, description }
}

// laneAttrs returns the attributes of a lane's gauges: its partition, and
// the service it served once known, so that the retryers of different
// clients on one provider report apart.
func laneAttrs(partition, service string) metrics.RecordMetricOption {
	return func(o *metrics.RecordMetricOptions) {
		if service != "" {
			o.Properties.Set(attrService, service)
		}
		o.Properties.Set(attrPartition, partition)
	}
}

// limiterAttrs returns the attributes of a send-rate limiter's gauge:
// its lane's, and the region of the service it paces, when it has one.
func limiterAttrs(partition string, k paceKey) metrics.RecordMetricOption {
	lane := laneAttrs(partition, k.service)
	return func(o *metrics.RecordMetricOptions) {
		lane(o)
		if k.region != "" {
			o.Properties.Set(attrRegion, k.region)
		}
	}
}

// attrs returns the attributes of a record: the operation's service and
// method when ctx is an SDK operation's, the partition, and name=value.
func attrs(ctx context.Context, partition, name, value string) metrics.RecordMetricOption {
	return func(o *metrics.RecordMetricOptions) {
		if ctx != nil {
			if s := awsmiddle.GetServiceID(ctx); s != "" {
				o.Properties.Set(attrService, s)
			}
			if m := awsmiddle.GetOperationName(ctx); m != "" {
				o.Properties.Set(attrMethod, m)
			}
		}
		o.Properties.Set(attrPartition, partition)
		o.Properties.Set(name, value)
	}
}

// retry counts e; a skipped deadline check that its hand-off's eviction
// counted already (skipCounted) is not counted again.
func (m *meter) retry(ctx context.Context, e RetryEvent, skipCounted bool) {
	mctx := orBackground(ctx)
	m.retries.Add(mctx, 1, attrs(ctx, e.Partition, attrClass, e.Class.String()))
	m.backoff.Record(mctx, e.Delay.Seconds(), attrs(ctx, e.Partition, attrClass, e.Class.String()))
	if e.Unchecked && !skipCounted {
		m.uncheckable.Add(mctx, 1, attrs(ctx, e.Partition, attrReason, "unpaired"))
	}
}

func (m *meter) giveUp(ctx context.Context, e *GiveUpError) {
	m.giveUps.Add(orBackground(ctx), 1, attrs(ctx, e.Partition, attrReason, e.Reason.String()))
}

func (m *meter) sendWait(ctx context.Context, partition string, d time.Duration, reason string) {
	m.waits.Record(orBackground(ctx), d.Seconds(), attrs(ctx, partition, attrReason, reason))
}

// uncheckedEvictions counts n hand-offs of partition with a deadline check
// due that no RetryDelay took before another error needed their slot, or
// within a second: a wrapper replaced RetryDelay, or the retry never came
// (yet).
func (m *meter) uncheckedEvictions(partition string, n int) {
	m.uncheckable.Add(context.Background(), int64(n), attrs(nil, partition, attrReason, "evicted"))
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// traceRetry adds the retry decision to the SDK's attempt span, with the
// tokens left when the lane's RateLimiter can tell them (known).
func traceRetry(span tracing.Span, e RetryEvent, cost, tokensLeft uint, known bool) {
	span.AddEvent("jitterretry.retry", func(o *tracing.EventOptions) {
		o.Properties.Set(attrClass, e.Class.String())
		o.Properties.Set("jitterretry.attempt", e.Attempt)
		o.Properties.Set("jitterretry.delay_ms", e.Delay.Milliseconds())
		o.Properties.Set("jitterretry.cost", int64(cost))
		if known {
			o.Properties.Set("jitterretry.tokens_left", int64(tokensLeft))
		}
		o.Properties.Set("jitterretry.unchecked", e.Unchecked)
	})
}

// traceGiveUp adds a refusal to the SDK's attempt span.
func traceGiveUp(span tracing.Span, e *GiveUpError) {
	span.AddEvent("jitterretry.give_up", func(o *tracing.EventOptions) {
		o.Properties.Set(attrReason, e.Reason.String())
		o.Properties.Set("jitterretry.attempt", e.Attempt)
		if e.Reason == GiveUpDeadline {
			o.Properties.Set("jitterretry.delay_ms", e.Delay.Milliseconds())
			o.Properties.Set("jitterretry.remaining_ms", e.remaining.Milliseconds())
		}
	})
}

// recordingSpan returns the span ctx carries, if a tracer made one: the
// SDK's no-op tracer puts none in the context.
func recordingSpan(ctx context.Context) (tracing.Span, bool) {
	if ctx == nil {
		return nil, false
	}
	return tracing.GetSpan(ctx)
}
