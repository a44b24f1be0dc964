package delayers

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Default values, the SDK's retry behaviour 2.1 numbers.
const (
	// DefaultBase is the first retry's window for errors that are not
	// throttles: 50 ms.
	DefaultBase = 50 * time.Millisecond

	// DefaultThrottleBase is the first retry's window for throttling errors:
	// 1 s.
	DefaultThrottleBase = time.Second

	// DefaultCap is the largest delay any strategy returns: 20 s.
	DefaultCap = 20 * time.Second
)

// Options configures a delayer. The zero value of every field means its
// default, so Options{} gives the SDK's standard numbers.
type Options struct {
	// Base is the window of the first retry after an error that is not a
	// throttle, doubling with each further attempt. Zero means
	// min(DefaultBase, Cap); negative is an error; larger than Cap is an error.
	Base time.Duration

	// ThrottleBase is Base for throttling errors. Zero means
	// min(DefaultThrottleBase, Cap), so a small Cap with the default throttle
	// base is not an error; negative is an error; an explicit value larger
	// than Cap is an error.
	ThrottleBase time.Duration

	// Cap bounds every delay, and is applied before jitter, so full jitter
	// stays jittered at the cap. Zero means DefaultCap; negative is an error.
	Cap time.Duration

	// Throttle decides which errors use ThrottleBase; it is called once per
	// BackoffDelay or Next with a non-nil error, and must be safe for
	// concurrent use. Nil means the SDK's
	// retry.IsErrorThrottles(retry.DefaultThrottles), copied when the delayer
	// is built (later changes to retry.DefaultThrottles do not reach it); pass
	// the same list as retry.StandardOptions.Throttles to keep the two in step.
	// An unknown or false answer counts as not a throttle. The SDK's
	// classifiers use errors.As and cost about one small allocation per
	// non-nil error; the delayers themselves allocate nothing.
	Throttle retry.IsErrorThrottle

	// Source supplies the randomness and must be safe for concurrent use.
	// Nil means the Go runtime's generator, which scales across cores; use
	// NewSource(seed) for deterministic results.
	Source Source
}

// ErrInvalidOption is the sentinel every *OptionError matches with
// errors.Is, for callers that only need to know the settings were rejected.
var ErrInvalidOption = errors.New("delayers: invalid option")

// OptionError reports a delayer setting that cannot be used: a negative
// duration, or an explicit Base or ThrottleBase larger than Cap. The
// constructors return it, with a nil delayer, instead of silently changing
// the setting. Use errors.As to read its fields.
type OptionError struct {
	// Option is the name of the Options field: "Base", "ThrottleBase" or
	// "Cap".
	Option string
	// Value is the value it was given.
	Value time.Duration
	// Reason says what is wrong with it, e.g. "must not be negative".
	Reason string
}

// Error returns "delayers: invalid <Option> <Value>: <Reason>".
func (e *OptionError) Error() string {
	return fmt.Sprintf("delayers: invalid %s %v: %s", e.Option, e.Value, e.Reason)
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }

// settings is Options after defaults and validation: what every strategy
// shares.
type settings struct {
	base, throttleBase, cap time.Duration
	throttle                retry.IsErrorThrottle
	source                  Source
}

func newSettings(optFns []func(*Options)) (settings, error) {
	var o Options
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	return o.settings()
}

func (o Options) settings() (settings, error) {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Base", o.Base}, {"ThrottleBase", o.ThrottleBase}, {"Cap", o.Cap}} {
		if f.v < 0 {
			return settings{}, &OptionError{Option: f.name, Value: f.v, Reason: "must not be negative"}
		}
	}
	s := settings{base: o.Base, throttleBase: o.ThrottleBase, cap: o.Cap, throttle: o.Throttle, source: o.Source}
	if s.cap == 0 {
		s.cap = DefaultCap
	}
	if s.base > s.cap {
		return settings{}, &OptionError{Option: "Base", Value: s.base, Reason: fmt.Sprintf("is larger than Cap %v", s.cap)}
	}
	if s.throttleBase > s.cap {
		return settings{}, &OptionError{Option: "ThrottleBase", Value: s.throttleBase, Reason: fmt.Sprintf("is larger than Cap %v", s.cap)}
	}
	if s.base == 0 {
		s.base = min(DefaultBase, s.cap)
	}
	if s.throttleBase == 0 {
		s.throttleBase = min(DefaultThrottleBase, s.cap)
	}
	if s.throttle == nil {
		s.throttle = retry.IsErrorThrottles(append([]retry.IsErrorThrottle(nil), retry.DefaultThrottles...))
	}
	if s.source == nil {
		s.source = runtimeSource{}
	}
	return s, nil
}

// baseFor returns the base that applies to err. A nil error is not a
// throttle.
func (s *settings) baseFor(err error) time.Duration {
	if err != nil && s.throttle.IsErrorThrottle(err) == aws.TrueTernary {
		return s.throttleBase
	}
	return s.base
}

// The accessors below are defined once on settings and promoted to every
// strategy type (Exponential, Full, Equal, Decorrelated), so d.Base(),
// d.ThrottleBase() and d.Cap() work on each of them and go doc lists them
// there. They report the values in use after defaults were applied, never
// zero: callers such as a retryer's MaxBackoff check can rely on them.

// Base returns the window of the first retry after an error that is not a
// throttle, the value that doubles with each further attempt: Options.Base,
// or min(DefaultBase, Cap) (50 ms by default) when that was zero. It is
// always in (0, Cap()].
func (s *settings) Base() time.Duration { return s.base }

// ThrottleBase returns the window of the first retry after a throttling
// error: Options.ThrottleBase, or min(DefaultThrottleBase, Cap) (1 s by
// default) when that was zero. It is always in (0, Cap()], and may be smaller
// than Base() if the options say so.
func (s *settings) ThrottleBase() time.Duration { return s.throttleBase }

// Cap returns the largest delay any call returns: Options.Cap, or DefaultCap
// (20 s) when that was zero. It is always positive.
func (s *settings) Cap() time.Duration { return s.cap }
