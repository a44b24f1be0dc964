package jitterretry

// This file owns the learnt deadline margin: an estimate of how long a
// lane's attempts take, kept from a sample of them without allocating.

import (
	"sync"
	"sync/atomic"
	"time"
)

// The deadline check refuses a retry whose backoff plus the attempt after it
// would end past the deadline. Unless Options.DeadlineMargin fixes it, the
// attempt's time is estimated from the lane's last attemptSamples measured
// attempts: every attempt is measured until attemptSamples have been, so
// that a new client (a Lambda cold start) has an estimate from its first
// failed attempt on, then one in attemptSampleEvery at random, while fewer
// than attemptProbes are being measured at once. The draw comes from
// Options.Source: the default, the runtime's per-thread generator, writes
// nothing that other cores read, where a shared count of attempts would
// move one cache line between cores on every attempt. The estimate is the largest
// sample until the window is full, then the second largest: about the
// 95th percentile, and one stall alone does not make it.
const (
	attemptSamples     = 32
	attemptSampleEvery = 16
	attemptProbes      = 8
)

// attemptTimes estimates a lane's attempt time.
type attemptTimes struct {
	now  func() time.Time
	draw func() uint64 // a uniform random value, for sampling

	// probes are the releases that measure an attempt, built once: a
	// sampled attempt takes a free probe, which records its start.
	probes [attemptProbes]attemptProbe

	est atomic.Int64 // the current estimate, in nanoseconds

	warm atomic.Bool // attemptSamples attempts measured: sample one in attemptSampleEvery

	mu      sync.Mutex
	samples [attemptSamples]time.Duration
	next    int
	full    bool
}

type attemptProbe struct {
	busy    atomic.Bool
	start   time.Time // written by the goroutine that set busy
	release func(error) error
}

func (a *attemptTimes) init(now func() time.Time, draw func() uint64, then func(error) error) {
	a.now, a.draw = now, draw
	for i := range a.probes {
		p := &a.probes[i]
		p.release = func(err error) error {
			a.record(a.now().Sub(p.start))
			p.busy.Store(false)
			return then(err)
		}
	}
}

// measure returns a release that records the attempt's time before calling
// then, for every attempt until the window is full and one in
// attemptSampleEvery (at random) after, while a probe is free, and then itself
// otherwise. It never allocates.
func (a *attemptTimes) measure(then func(error) error) func(error) error {
	if a.now == nil || a.warm.Load() && a.draw()%attemptSampleEvery != 0 {
		return then
	}
	for i := range a.probes {
		p := &a.probes[i]
		if !p.busy.Load() && p.busy.CompareAndSwap(false, true) {
			p.start = a.now()
			return p.release
		}
	}
	return then
}

// record adds one attempt's time.
func (a *attemptTimes) record(took time.Duration) {
	if took < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.samples[a.next] = took
	a.next = (a.next + 1) % attemptSamples
	if a.next == 0 && !a.full {
		a.full = true
		a.warm.Store(true)
	}
	var first, second time.Duration
	for _, s := range a.samples {
		switch {
		case s > first:
			first, second = s, first
		case s > second:
			second = s
		}
	}
	if !a.full {
		second = first
	}
	a.est.Store(int64(second))
}

// estimate returns the expected time of the lane's next attempt, without
// headroom: 0 before any attempt was measured.
func (a *attemptTimes) estimate() time.Duration {
	return time.Duration(a.est.Load())
}
