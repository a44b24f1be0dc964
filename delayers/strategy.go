package delayers

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Strategy names a jitter strategy; the string is what command-line flags
// use, and ParseStrategy turns one back into a Strategy. The zero value "" is
// not a strategy: New and ParseStrategy reject it.
type Strategy string

// The strategies of "Exponential Backoff And Jitter".
const (
	// StrategyExponential is capped exponential backoff without jitter: the
	// baseline, and the one that synchronises competing clients.
	StrategyExponential Strategy = "exponential"
	// StrategyFull is full jitter, uniform[0, w): the SDK's default.
	StrategyFull Strategy = "full"
	// StrategyEqual is equal jitter, w/2 + uniform[0, w-w/2): half the
	// window fixed, half random.
	StrategyEqual Strategy = "equal"
	// StrategyDecorrelated is decorrelated jitter,
	// min(cap, uniform[base, 3*prev)).
	StrategyDecorrelated Strategy = "decorrelated"
)

// Strategies lists every Strategy in the blog's order: exponential, full,
// equal, decorrelated. It returns a new slice on each call, which the caller
// may modify.
func Strategies() []Strategy {
	return []Strategy{StrategyExponential, StrategyFull, StrategyEqual, StrategyDecorrelated}
}

// ErrUnknownStrategy is what ParseStrategy and New wrap when given a name
// that is not one of Strategies(); test for it with errors.Is.
var ErrUnknownStrategy = errors.New("delayers: unknown strategy")

// ParseStrategy returns the Strategy named s. Names are exact and
// case-sensitive ("full", not "Full"); anything else, including "", gives ""
// and an error that wraps ErrUnknownStrategy and names the valid choices.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w %q, want one of %v", ErrUnknownStrategy, s, Strategies())
}

// Delayer is what every strategy of this package implements: the SDK's
// BackoffDelayer for stateless use by the retry middleware, a per-loop
// Sequence, and its settings after defaults. *Exponential, *Full, *Equal and
// *Decorrelated implement it, and New returns one of them.
type Delayer interface {
	retry.BackoffDelayer

	// Delay is BackoffDelay for a caller that has classified the error
	// already: throttle selects ThrottleBase() over Base(). It never
	// classifies, so it costs no walk of an error chain.
	Delay(attempt int, throttle bool) time.Duration

	// NewSequence returns a Sequence of this strategy's delays for one retry
	// loop.
	NewSequence() *Sequence

	// Base returns the first retry's window for errors that are not
	// throttles, after defaults: in (0, Cap()]. For Decorrelated it is the
	// floor of every delay, whose first is drawn in [base, 3*base).
	Base() time.Duration

	// ThrottleBase returns the first retry's window for throttling errors,
	// after defaults: in (0, Cap()]; Decorrelated's floor, as Base.
	ThrottleBase() time.Duration

	// Cap returns the largest delay any call returns, after defaults:
	// positive.
	Cap() time.Duration
}

// New returns the delayer of the given strategy: an *Exponential, *Full,
// *Equal or *Decorrelated, configured by optFns as its own constructor would
// be. An unknown strategy gives an error wrapping ErrUnknownStrategy (the
// options are not run); invalid Options give an *OptionError. On error the
// Delayer is a true nil interface, so d == nil holds.
func New(strategy Strategy, optFns ...func(*Options)) (Delayer, error) {
	var (
		d   Delayer
		err error
	)
	// Each constructor returns a nil pointer with its error; returning that
	// through the interface directly would give a non-nil Delayer.
	switch strategy {
	case StrategyExponential:
		d, err = nilOnError(NewExponential(optFns...))
	case StrategyFull:
		d, err = nilOnError(NewFull(optFns...))
	case StrategyEqual:
		d, err = nilOnError(NewEqual(optFns...))
	case StrategyDecorrelated:
		d, err = nilOnError(NewDecorrelated(optFns...))
	default:
		_, err = ParseStrategy(string(strategy))
	}
	return d, err
}

// nilOnError converts a constructor's result to a Delayer that is a true nil
// interface when err is not nil.
func nilOnError[T Delayer](d T, err error) (Delayer, error) {
	if err != nil {
		return nil, err
	}
	return d, nil
}

// stepper is one strategy's formula: the delay of attempt, given the base that
// applies, the previous delay of the same loop (only decorrelated jitter uses
// it) and a random value.
type stepper interface {
	step(s *settings, base time.Duration, attempt int, prev time.Duration, x uint64) time.Duration
}
