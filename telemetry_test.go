package jitterretry_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

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

// waitRecorder is a smithy-go Meter that keeps what the send-rate wait
// histogram records, with its reason; it creates no other instrument.
type waitRecorder struct {
	refusingMeter
	mu      sync.Mutex
	reasons map[string][]float64
}

func (m *waitRecorder) Float64Histogram(name string, _ ...metrics.InstrumentOption) (metrics.Float64Histogram, error) {
	if name != "jitterretry.send_rate.wait_duration" {
		return nil, nil
	}
	return waitHistogram{m}, nil
}

type waitHistogram struct{ m *waitRecorder }

func (h waitHistogram) Record(_ context.Context, v float64, opts ...metrics.RecordMetricOption) {
	var o metrics.RecordMetricOptions
	for _, fn := range opts {
		fn(&o)
	}
	reason, _ := o.Properties.Get("jitterretry.reason").(string)
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.reasons[reason] = append(h.m.reasons[reason], v)
}

// TestTheWaitOfACallerThatGivesUpIsRecorded: the send-rate wait histogram
// recorded only the waits of the attempts sent, so an overloaded queue,
// whose callers give up, showed none of its longest waits (helper-58). A
// caller cancelled after waiting is recorded with reason canceled. (Its
// turn 10 s away and the cancel at 1 s, so that no stall of a busy machine
// before the wait sends it or cancels it first: a rate of 1 a second and a
// cancel at 50 ms recorded a wait of 20 µs once, helper-230.)
func TestTheWaitOfACallerThatGivesUpIsRecorded(t *testing.T) {
	m := &waitRecorder{refusingMeter: refusingMeter{way: "nil"}, reasons: map[string][]float64{}}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MeterProvider = refusingProvider{m}
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 0.1, MinRate: 0.1, MaxRate: 0.1}
	})
	require.NoError(t, r.Err())
	release, err := r.GetAttemptToken(context.Background()) // the place due at once
	require.NoError(t, err)
	require.NoError(t, release(nil))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	_, err = r.GetAttemptToken(ctx)
	var gerr *jitterretry.GiveUpError
	require.ErrorAs(t, err, &gerr)
	require.Equal(t, jitterretry.GiveUpCanceled, gerr.Reason)
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.reasons["canceled"], 1, "expect the cancelled wait recorded, got %v", m.reasons)
	assert.GreaterOrEqual(t, m.reasons["canceled"][0], 0.04, "expect the wait until the cancel recorded")
	assert.Empty(t, m.reasons["queued"], "expect no wait recorded for the place due at once")
}

// halfwayMeter registers the bucket gauge, keeping its callback, then
// panics when asked for the send-rate gauge; its gauges' Stop panics too.
type halfwayMeter struct {
	metrics.Meter
	bucketGauge *metrics.Int64Callback
}

func (m halfwayMeter) Int64AsyncGauge(_ string, cb metrics.Int64Callback, _ ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	*m.bucketGauge = cb
	return panickyStop{}, nil
}

func (halfwayMeter) Float64AsyncGauge(string, metrics.Float64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	panic("send-rate gauge refused")
}

type panickyStop struct{}

func (panickyStop) Stop() { panic("cannot stop") }

type halfwayProvider struct{ halfwayMeter }

func (p halfwayProvider) Meter(string, ...metrics.MeterOption) metrics.Meter { return p.halfwayMeter }

// countingObserver counts what a gauge's callback observes.
type countingObserver struct{ n int }

func (o *countingObserver) Observe(context.Context, int64, ...metrics.RecordMetricOption) { o.n++ }

// stopPanickyMeter makes gauges whose Stop closes stopping, once, and
// panics.
type stopPanickyMeter struct {
	metrics.Meter
	stopping chan struct{}
	once     *sync.Once
}

func (m stopPanickyMeter) Int64AsyncGauge(string, metrics.Int64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	return signallingStop(m), nil
}

type signallingStop stopPanickyMeter

func (s signallingStop) Stop() {
	s.once.Do(func() { close(s.stopping) })
	panic("cannot stop")
}

type stopPanickyProvider struct{ stopPanickyMeter }

func (p stopPanickyProvider) Meter(string, ...metrics.MeterOption) metrics.Meter {
	return p.stopPanickyMeter
}

// TestAGaugeWhoseStopPanicsLeavesTheProcessRunning: the gauges of a
// Retryer that is gone are stopped by a cleanup on the runtime's own
// goroutine, where a panic of the provider's Stop ended the process
// (helper-250): New had taken the provider. Run in a child process, so
// that the panic is reported rather than ending the test binary.
func TestAGaugeWhoseStopPanicsLeavesTheProcessRunning(t *testing.T) {
	if !runInChild(t) {
		return
	}
	stopping := make(chan struct{})
	func() {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.MeterProvider = stopPanickyProvider{stopPanickyMeter{metrics.NopMeterProvider{}.Meter(""), stopping, new(sync.Once)}}
		})
		require.NoError(t, r.Err())
	}()
	// Each collection may run the cleanups of what it found unreachable.
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-stopping:
			// The panic, unrecovered, ends the process at once; the
			// runtime's cleanups run one after another, on one goroutine.
			time.Sleep(100 * time.Millisecond)
			return
		case <-time.After(10 * time.Millisecond):
		}
		require.Less(t, i, 1000, "expect the Retryer collected and its gauges stopped")
	}
}

// TestAProviderThatPanicsHalfwayLeavesNoGaugeReading: a provider that
// panics after it registered a gauge is an invalid option (New never
// panics on one), and the gauge it kept, which New could not stop (the
// provider never returned it, or its Stop panics), reads nothing of the
// refused retryer (an outside review: it went on reporting its buckets).
func TestAProviderThatPanicsHalfwayLeavesNoGaugeReading(t *testing.T) {
	var kept metrics.Int64Callback
	p := halfwayProvider{halfwayMeter{Meter: metrics.NopMeterProvider{}.Meter(""), bucketGauge: &kept}}
	var r *jitterretry.Retryer
	require.NotPanics(t, func() {
		r = jitterretry.New(func(o *jitterretry.Options) {
			o.MeterProvider = p
			o.SendRate = &jitterretry.SendRateOptions{}
		})
	})
	var oe *jitterretry.OptionsError
	require.ErrorAs(t, r.Err(), &oe)
	assert.Equal(t, "MeterProvider", oe.Option)
	assert.Contains(t, oe.Reason, "send-rate gauge refused")
	require.NotNil(t, kept, "expect the provider to have kept the bucket gauge")
	var seen countingObserver
	kept(context.Background(), &seen)
	assert.Zero(t, seen.n, "expect the kept gauge to read nothing of the refused retryer")
}
