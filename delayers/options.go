package delayers

import (
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

	// Throttle decides which errors use ThrottleBase. Nil means the SDK's
	// retry.IsErrorThrottles(retry.DefaultThrottles). An unknown answer counts
	// as not a throttle.
	Throttle retry.IsErrorThrottle

	// Source supplies the randomness. Nil means the Go runtime's generator;
	// use NewSource(seed) for deterministic results.
	Source Source
}

// OptionError reports a delayer setting that cannot be used.
type OptionError struct {
	// Option is the name of the Options field.
	Option string
	// Value is the value it was given.
	Value time.Duration
	// Reason says what is wrong with it.
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("delayers: invalid %s %v: %s", e.Option, e.Value, e.Reason)
}

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

// Base returns the base for errors that are not throttles, after defaults.
func (s *settings) Base() time.Duration { return s.base }

// ThrottleBase returns the base for throttling errors, after defaults.
func (s *settings) ThrottleBase() time.Duration { return s.throttleBase }

// Cap returns the largest delay, after defaults.
func (s *settings) Cap() time.Duration { return s.cap }
