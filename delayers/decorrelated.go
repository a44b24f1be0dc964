package delayers

import "time"

// maxDecorrelatedChain is the longest chain, in steps (one random draw each),
// that Decorrelated.BackoffDelay draws: 64, so that the cost of a call stays
// bounded for attempt numbers up to math.MaxInt. Attempts beyond it reuse
// this chain length. With a cap up to some 400 times the base (the
// defaults: 50 ms and 20 s), the chain has reached the cap's neighbourhood
// by then, where its distribution no longer changes from one step to the
// next in any way a retry can notice. Far below the cap a step multiplies
// the delay by 3U on average in the log (ln 3 - 1, some 0.1), and the chain
// falls back toward the base often, so a larger ratio takes far more steps
// (some 750 to 1,000 for 1 ms and an hour, or a day): there the delays after
// attempt 64 are shorter than the chain's (a median of 24 s at attempt 200
// against the chain's 4m40s-4m50s for 1 ms and an hour, over 40,000 draws
// with three seeds, helper-98; helper-71 had 28 s). A Sequence is
// not limited by it: it takes one step per Next, as a Do loop does.
const maxDecorrelatedChain = 64

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
// maxDecorrelatedChain (64). A Sequence, for one application loop, keeps
// its real prev instead.
//
// Delays are within [base, Cap()], base being Base() or, for throttling
// errors, ThrottleBase(). Create one with NewDecorrelated or New; the zero
// value behaves as NewDecorrelated() with no options, and so does a nil *Decorrelated. Safe for concurrent
// use by multiple goroutines.
type Decorrelated struct {
	settings
}

// NewDecorrelated returns decorrelated jitter. optFns are applied in order to
// a zero Options, whose zero fields then take their defaults (Base 50 ms,
// ThrottleBase 1 s, Cap 20 s); nil funcs are skipped. Invalid options give a
// nil delayer and an *OptionError; so does an Options.Growth other than 0
// and 2, since decorrelated jitter grows from the previous delay, not by a
// window.
func NewDecorrelated(optFns ...func(*Options)) (*Decorrelated, error) {
	s, err := newSettings(optFns, false)
	if err != nil {
		return nil, err
	}
	return &Decorrelated{s}, nil
}

// BackoffDelay returns the delay before the retry that follows failed
// attempt number attempt (1-based, as the SDK's retry middleware passes it):
// the attempt-th step of a decorrelated chain drawn afresh from base. Attempts
// below 1 count as 1, so the first delay is uniform in [base, 3*base) capped
// at Cap(); attempts above maxDecorrelatedChain count as
// maxDecorrelatedChain. base is ThrottleBase() when Options.Throttle
// classifies err as a throttle, Base() otherwise (a nil err is not a
// throttle). The result is within [base, Cap()]; it draws
// min(max(attempt, 1), maxDecorrelatedChain) values from the Source. The error result is always
// nil.
func (d *Decorrelated) BackoffDelay(attempt int, err error) (time.Duration, error) {
	return d.Delay(attempt, use(d).isThrottle(err)), nil
}

// Delay is BackoffDelay for a caller that has classified the error already:
// throttle selects ThrottleBase() over Base().
func (d *Decorrelated) Delay(attempt int, throttle bool) time.Duration {
	s := use(d)
	base := s.baseOf(throttle)
	steps := min(max(attempt, 1), maxDecorrelatedChain)
	prev := base
	for i := 1; i <= steps; i++ {
		prev = d.step(s, base, i, prev, s.source.Uint64())
	}
	return prev
}

func (d *Decorrelated) step(s *settings, base time.Duration, _ int, prev time.Duration, x uint64) time.Duration {
	return decorrelatedJitter(base, s.cap, prev, x)
}

func decorrelatedJitter(base, cap, prev time.Duration, x uint64) time.Duration {
	return min(cap, between(base, triple(max(prev, base)), x))
}

// NewSequence returns a Sequence for one retry loop that keeps the real
// previous delay, as the blog's formula does for one client: each Next is
// uniform in [base, 3*previous) capped at Cap(), starting from prev = base.
// It shares this delayer's settings and Source.
func (d *Decorrelated) NewSequence() *Sequence { return newSequence(use(d), d) }
