package jitterretry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/smithy-go/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// refusingMeter is a smithy-go Meter that creates none of the instruments
// the retryer asks for, in one of the ways a provider can: an error and no
// instrument (OpenTelemetry's adapter when a view does not fit), a nil
// instrument without an error, or a typed nil one.
type refusingMeter struct {
	metrics.Meter // the instruments the retryer does not use
	way           string
}

var errRefused = errors.New("instrument refused")

func (m refusingMeter) Int64Counter(string, ...metrics.InstrumentOption) (metrics.Int64Counter, error) {
	switch m.way {
	case "nil":
		return nil, nil
	case "typed nil":
		return (*nilCounter)(nil), nil
	}
	return nil, errRefused
}

func (m refusingMeter) Float64Histogram(string, ...metrics.InstrumentOption) (metrics.Float64Histogram, error) {
	if m.way == "error" {
		return nil, errRefused
	}
	return nil, nil
}

func (m refusingMeter) Int64AsyncGauge(string, metrics.Int64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	if m.way == "error" {
		return nil, errRefused
	}
	return nil, nil
}

func (m refusingMeter) Float64AsyncGauge(string, metrics.Float64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	return m.Int64AsyncGauge("", nil)
}

// nilCounter is a counter whose methods need a value.
type nilCounter struct{ n int64 }

func (c *nilCounter) Add(_ context.Context, n int64, _ ...metrics.RecordMetricOption) { c.n += n }

type refusingProvider struct{ meter metrics.Meter }

func (p refusingProvider) Meter(string, ...metrics.MeterOption) metrics.Meter { return p.meter }

// TestAProviderThatCreatesNoInstrumentFailsNoOperation: instruments a
// MeterProvider does not create record nothing, and a nil Meter means no
// telemetry; the retry decisions under the SDK's middleware go on as
// without a provider, never a panic.
func TestAProviderThatCreatesNoInstrumentFailsNoOperation(t *testing.T) {
	for name, p := range map[string]metrics.MeterProvider{
		"an error":          refusingProvider{refusingMeter{way: "error"}},
		"no instrument":     refusingProvider{refusingMeter{way: "nil"}},
		"a typed nil":       refusingProvider{refusingMeter{way: "typed nil"}},
		"no meter":          refusingProvider{nil},
		"a typed nil meter": refusingProvider{(*refusingMeter)(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			var r *jitterretry.Retryer
			require.NotPanics(t, func() {
				r = jitterretry.New(fast, func(o *jitterretry.Options) {
					o.MeterProvider = p
					o.SendRate = &jitterretry.SendRateOptions{}
				})
			})
			require.NoError(t, r.Err())
			require.NotPanics(t, func() {
				attempts, err := operation(context.Background(), r, script(fail(serverErr()), fail(throttleErr()), ok))
				requireAttempts(t, 3, attempts, err)
				require.NoError(t, err)
				attempts, err = operation(context.Background(), r, script(fail(validationErr())))
				requireAttempts(t, 1, attempts, err)
				require.Error(t, err)
			})
			assert.Equal(t, uint(500-14-5+5), r.Remaining())
		})
	}
}
