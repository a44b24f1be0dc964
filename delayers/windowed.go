package delayers

import "time"

// windowed is the shared body of the strategies whose delay is a function of
// the window w = min(cap, base*2^(attempt-1)) alone.
type windowed struct {
	settings
	jitter func(w time.Duration, x uint64) time.Duration
}

func newWindowed(optFns []func(*Options), jitter func(time.Duration, uint64) time.Duration) (windowed, error) {
	s, err := newSettings(optFns)
	return windowed{settings: s, jitter: jitter}, err
}

// BackoffDelay returns the delay before the retry that follows the failed
// attempt number attempt (1-based; values below 1 count as 1). Throttling
// errors use ThrottleBase. The error result is always nil.
func (d *windowed) BackoffDelay(attempt int, err error) (time.Duration, error) {
	return d.step(&d.settings, d.baseFor(err), attempt, 0, d.source.Uint64()), nil
}

func (d *windowed) step(s *settings, base time.Duration, attempt int, _ time.Duration, x uint64) time.Duration {
	return d.jitter(window(base, s.cap, attempt), x)
}

// NewSequence returns a Sequence of this delayer's delays for one loop.
func (d *windowed) NewSequence() *Sequence { return newSequence(&d.settings, d) }

// Exponential is capped exponential backoff without jitter: the delay is the
// window w itself. It is the baseline of the blog post; under contention it
// keeps competing clients in lock step, so prefer a jittered strategy.
// Safe for concurrent use by multiple goroutines.
type Exponential struct{ windowed }

// NewExponential returns capped exponential backoff, configured by optFns.
func NewExponential(optFns ...func(*Options)) (*Exponential, error) {
	w, err := newWindowed(optFns, func(w time.Duration, _ uint64) time.Duration { return w })
	if err != nil {
		return nil, err
	}
	return &Exponential{w}, nil
}

// Full is full jitter: a delay uniform in [0, w). It makes the fewest calls
// of the blog's strategies and is the SDK's default. Safe for concurrent use
// by multiple goroutines.
type Full struct{ windowed }

// NewFull returns full jitter, configured by optFns.
func NewFull(optFns ...func(*Options)) (*Full, error) {
	w, err := newWindowed(optFns, fullJitter)
	if err != nil {
		return nil, err
	}
	return &Full{w}, nil
}

func fullJitter(w time.Duration, x uint64) time.Duration { return between(0, w, x) }

// Equal is equal jitter: w/2 plus a delay uniform in [0, w-w/2), so it never
// retries sooner than half the window. Safe for concurrent use by multiple
// goroutines.
type Equal struct{ windowed }

// NewEqual returns equal jitter, configured by optFns.
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
