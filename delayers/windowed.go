package delayers

import "time"

// windowed is the shared body of the strategies whose delay is a function of
// the window w = min(cap, base*growth^(attempt-1)) alone, growth being 2
// unless Options.Growth says otherwise.
type windowed struct {
	settings
}

func newWindowed(optFns []func(*Options)) (windowed, error) {
	s, err := newSettings(optFns, true)
	return windowed{settings: s}, err
}

// windowDelay is the BackoffDelay of a windowed strategy whose jitter is
// jitter, under settings s.
func windowDelay(s *settings, jitter func(time.Duration, uint64) time.Duration, attempt int, throttle bool) time.Duration {
	return jitter(grownWindow(s.baseOf(throttle), s.cap, s.growth, attempt), s.source.Uint64())
}

// windowStepper is the stepper of a windowed strategy, for its Sequences.
type windowStepper func(time.Duration, uint64) time.Duration

func (j windowStepper) step(s *settings, base time.Duration, attempt int, _ time.Duration, x uint64) time.Duration {
	return j(grownWindow(base, s.cap, s.growth, attempt), x)
}

// Exponential is capped exponential backoff without jitter: the delay is the
// window w itself. It is the baseline of the blog post; under contention it
// keeps competing clients in lock step, so prefer a jittered strategy. It
// still draws one value per call from its Source, so a Source shared with
// other delayers advances the same way whichever strategy is chosen. Create
// one with NewExponential or New; the zero value behaves as
// NewExponential() with no options, and so does a nil *Exponential. Safe for
// concurrent use by multiple goroutines.
type Exponential struct{ windowed }

// BackoffDelay returns the delay before the retry that follows failed
// attempt number attempt (1-based, as the SDK's retry middleware passes it):
// the window w = min(Cap(), base*Growth()^(attempt-1)) itself, base being
// ThrottleBase() when Options.Throttle classifies err as a throttle and
// Base() otherwise (a nil err is not a throttle). Attempts below 1 count as
// 1; the window never shrinks as attempt grows and saturates at Cap() for
// any larger attempt, up to math.MaxInt. It draws one value from the Source.
// The error result is always nil.
func (d *Exponential) BackoffDelay(attempt int, err error) (time.Duration, error) {
	s := use(d)
	return windowDelay(s, exponentialJitter, attempt, s.isThrottle(err)), nil
}

// Delay is BackoffDelay for a caller that has classified the error already:
// throttle selects ThrottleBase() over Base().
func (d *Exponential) Delay(attempt int, throttle bool) time.Duration {
	return windowDelay(use(d), exponentialJitter, attempt, throttle)
}

// NewSequence returns a Sequence for one retry loop: its k-th Next returns
// what BackoffDelay(k, err) would.
func (d *Exponential) NewSequence() *Sequence {
	return newSequence(use(d), windowStepper(exponentialJitter))
}

func exponentialJitter(w time.Duration, _ uint64) time.Duration { return w }

// NewExponential returns capped exponential backoff. optFns are applied in
// order to a zero Options, whose zero fields then take their defaults (Base
// 50 ms, ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped.
// Invalid options give a nil delayer and an *OptionError.
func NewExponential(optFns ...func(*Options)) (*Exponential, error) {
	w, err := newWindowed(optFns)
	if err != nil {
		return nil, err
	}
	return &Exponential{w}, nil
}

// Full is full jitter: a delay uniform in [0, w). It makes the fewest calls
// of the blog's strategies and is the SDK's default. A delay can be 0. Create
// one with NewFull or New; the zero value behaves as NewFull() with no
// options, and so does a nil *Full. Safe for concurrent
// use by multiple goroutines.
type Full struct{ windowed }

// BackoffDelay returns the delay before the retry that follows failed
// attempt number attempt (1-based): uniform in [0, w), with the window w as
// Exponential.BackoffDelay describes it. It draws one value from the
// Source. The error result is always nil.
func (d *Full) BackoffDelay(attempt int, err error) (time.Duration, error) {
	s := use(d)
	return windowDelay(s, fullJitter, attempt, s.isThrottle(err)), nil
}

// Delay is BackoffDelay for a caller that has classified the error already:
// throttle selects ThrottleBase() over Base().
func (d *Full) Delay(attempt int, throttle bool) time.Duration {
	return windowDelay(use(d), fullJitter, attempt, throttle)
}

// NewSequence returns a Sequence for one retry loop: its k-th Next returns
// what BackoffDelay(k, err) would.
func (d *Full) NewSequence() *Sequence { return newSequence(use(d), windowStepper(fullJitter)) }

// NewFull returns full jitter. optFns are applied in order to a zero
// Options, whose zero fields then take their defaults (Base 50 ms,
// ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped. Invalid
// options give a nil delayer and an *OptionError.
func NewFull(optFns ...func(*Options)) (*Full, error) {
	w, err := newWindowed(optFns)
	if err != nil {
		return nil, err
	}
	return &Full{w}, nil
}

func fullJitter(w time.Duration, x uint64) time.Duration { return between(0, w, x) }

// Equal is equal jitter: w/2 plus a delay uniform in [0, w-w/2), so it never
// retries sooner than half the window. Create one with NewEqual or New; the
// zero value behaves as NewEqual() with no options, and so does a nil *Equal. Safe for concurrent use
// by multiple goroutines.
type Equal struct{ windowed }

// BackoffDelay returns the delay before the retry that follows failed
// attempt number attempt (1-based): w/2 plus uniform in [0, w-w/2), with the
// window w as Exponential.BackoffDelay describes it. It draws one value from
// the Source. The error result is always nil.
func (d *Equal) BackoffDelay(attempt int, err error) (time.Duration, error) {
	s := use(d)
	return windowDelay(s, equalJitter, attempt, s.isThrottle(err)), nil
}

// Delay is BackoffDelay for a caller that has classified the error already:
// throttle selects ThrottleBase() over Base().
func (d *Equal) Delay(attempt int, throttle bool) time.Duration {
	return windowDelay(use(d), equalJitter, attempt, throttle)
}

// NewSequence returns a Sequence for one retry loop: its k-th Next returns
// what BackoffDelay(k, err) would.
func (d *Equal) NewSequence() *Sequence {
	return newSequence(use(d), windowStepper(equalJitter))
}

// NewEqual returns equal jitter. optFns are applied in order to a zero
// Options, whose zero fields then take their defaults (Base 50 ms,
// ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped. Invalid
// options give a nil delayer and an *OptionError.
func NewEqual(optFns ...func(*Options)) (*Equal, error) {
	w, err := newWindowed(optFns)
	if err != nil {
		return nil, err
	}
	return &Equal{w}, nil
}

func equalJitter(w time.Duration, x uint64) time.Duration {
	half := w / 2
	return between(half, w, x)
}
