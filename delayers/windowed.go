package delayers

import "time"

// windowed is the shared body of the strategies whose delay is a function of
// the window w = min(cap, base*growth^(attempt-1)) alone, growth being 2
// unless Options.Growth says otherwise.
type windowed struct {
	settings
	jitter func(w time.Duration, x uint64) time.Duration
}

func newWindowed(optFns []func(*Options), jitter func(time.Duration, uint64) time.Duration) (windowed, error) {
	s, err := newSettings(optFns, true)
	return windowed{settings: s, jitter: jitter}, err
}

// Growth returns the factor the window grows by per attempt, after defaults:
// Options.Growth, or DefaultGrowth (2) when that was zero. It is 2 or within
// [MinGrowth, MaxGrowth].
func (d *windowed) Growth() float64 { return d.growth }

// BackoffDelay returns the delay before the retry that follows failed
// attempt number attempt (1-based, as the SDK's retry middleware passes it),
// from the window w = min(Cap(), base*Growth()^(attempt-1)), which is
// base*2^(attempt-1) by default: w itself for Exponential, uniform in [0, w)
// for Full, uniform in [w/2, w) for Equal. Attempts below 1 count as 1; the
// window never shrinks as attempt grows, and saturates at Cap() for any
// larger attempt, up to math.MaxInt. base is ThrottleBase() when
// Options.Throttle classifies err as a throttle, Base() otherwise (a nil err
// is not a throttle). The result is within [0, Cap()]; it draws one value
// from the Source. The error result is always nil.
func (d *windowed) BackoffDelay(attempt int, err error) (time.Duration, error) {
	return d.step(&d.settings, d.baseFor(err), attempt, 0, d.source.Uint64()), nil
}

func (d *windowed) step(s *settings, base time.Duration, attempt int, _ time.Duration, x uint64) time.Duration {
	return d.jitter(grownWindow(base, s.cap, s.growth, attempt), x)
}

// NewSequence returns a Sequence for one retry loop: its k-th Next returns
// what BackoffDelay(k, err) would. It shares this delayer's settings and
// Source.
func (d *windowed) NewSequence() *Sequence { return newSequence(&d.settings, d) }

// Exponential is capped exponential backoff without jitter: the delay is the
// window w itself. It is the baseline of the blog post; under contention it
// keeps competing clients in lock step, so prefer a jittered strategy. It
// still draws one value per call from its Source, so a Source shared with
// other delayers advances the same way whichever strategy is chosen. Create
// one with NewExponential or New; the zero value is not usable. Safe for
// concurrent use by multiple goroutines.
type Exponential struct{ windowed }

// NewExponential returns capped exponential backoff. optFns are applied in
// order to a zero Options, whose zero fields then take their defaults (Base
// 50 ms, ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped.
// Invalid options give a nil delayer and an *OptionError.
func NewExponential(optFns ...func(*Options)) (*Exponential, error) {
	w, err := newWindowed(optFns, func(w time.Duration, _ uint64) time.Duration { return w })
	if err != nil {
		return nil, err
	}
	return &Exponential{w}, nil
}

// Full is full jitter: a delay uniform in [0, w). It makes the fewest calls
// of the blog's strategies and is the SDK's default. A delay can be 0. Create
// one with NewFull or New; the zero value is not usable. Safe for concurrent
// use by multiple goroutines.
type Full struct{ windowed }

// NewFull returns full jitter. optFns are applied in order to a zero
// Options, whose zero fields then take their defaults (Base 50 ms,
// ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped. Invalid
// options give a nil delayer and an *OptionError.
func NewFull(optFns ...func(*Options)) (*Full, error) {
	w, err := newWindowed(optFns, fullJitter)
	if err != nil {
		return nil, err
	}
	return &Full{w}, nil
}

func fullJitter(w time.Duration, x uint64) time.Duration { return between(0, w, x) }

// Equal is equal jitter: w/2 plus a delay uniform in [0, w-w/2), so it never
// retries sooner than half the window. Create one with NewEqual or New; the
// zero value is not usable. Safe for concurrent use by multiple goroutines.
type Equal struct{ windowed }

// NewEqual returns equal jitter. optFns are applied in order to a zero
// Options, whose zero fields then take their defaults (Base 50 ms,
// ThrottleBase 1 s, Cap 20 s, Growth 2); nil funcs are skipped. Invalid
// options give a nil delayer and an *OptionError.
func NewEqual(optFns ...func(*Options)) (*Equal, error) {
	w, err := newWindowed(optFns, equalJitter)
	if err != nil {
		return nil, err
	}
	return &Equal{w}, nil
}

func equalJitter(w time.Duration, x uint64) time.Duration {
	half := w / 2
	return between(half, w, x)
}
