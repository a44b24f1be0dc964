package delayers

import "time"

// MaxDecorrelatedChain is the longest chain BackoffDelay draws for
// decorrelated jitter. Attempts beyond it reuse this chain length: by then
// the chain has long reached the cap's neighbourhood, where its distribution
// no longer changes from one step to the next in any way a retry can notice,
// and the cost of a call stays bounded for attempt numbers up to math.MaxInt.
const MaxDecorrelatedChain = 64

// Decorrelated is decorrelated jitter: sleep = min(cap, uniform[base,
// 3*prev)), with prev starting at base, so each delay grows from the one
// before it rather than from the attempt number.
//
// The SDK's BackoffDelayer interface carries no per-request state and one
// delayer serves every concurrent request of a client, so a shared prev would
// couple unrelated requests. BackoffDelay therefore draws the chain afresh,
// from base up to attempt, on every call: the delay for attempt n has exactly
// the distribution of the n-th step of the blog's formula, with no shared
// mutable state. It costs one random draw per step, at most
// MaxDecorrelatedChain. A Sequence, for one application loop, keeps its real
// prev instead. Safe for concurrent use by multiple goroutines.
type Decorrelated struct {
	settings
}

// NewDecorrelated returns decorrelated jitter, configured by optFns.
func NewDecorrelated(optFns ...func(*Options)) (*Decorrelated, error) {
	s, err := newSettings(optFns)
	if err != nil {
		return nil, err
	}
	return &Decorrelated{s}, nil
}

// BackoffDelay returns the delay of the attempt-th step of a decorrelated
// chain (attempt is 1-based; values below 1 count as 1). The result is within
// [base, cap]. Throttling errors use ThrottleBase. The error result is always
// nil.
func (d *Decorrelated) BackoffDelay(attempt int, err error) (time.Duration, error) {
	base := d.baseFor(err)
	steps := min(max(attempt, 1), MaxDecorrelatedChain)
	prev := base
	for i := 1; i <= steps; i++ {
		prev = d.step(&d.settings, base, i, prev, d.source.Uint64())
	}
	return prev, nil
}

func (d *Decorrelated) step(s *settings, base time.Duration, _ int, prev time.Duration, x uint64) time.Duration {
	return decorrelatedJitter(base, s.cap, prev, x)
}

func decorrelatedJitter(base, cap, prev time.Duration, x uint64) time.Duration {
	return min(cap, between(base, triple(max(prev, base)), x))
}

// NewSequence returns a Sequence that keeps the real previous delay, as the
// blog's formula does for one client.
func (d *Decorrelated) NewSequence() *Sequence { return newSequence(&d.settings, d) }
