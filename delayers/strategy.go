package delayers

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// Strategy names a jitter strategy. Its String form is what command-line
// flags use.
type Strategy string

// The strategies of "Exponential Backoff And Jitter".
const (
	// StrategyExponential is capped exponential backoff without jitter: the
	// baseline, and the one that synchronises competing clients.
	StrategyExponential Strategy = "exponential"
	// StrategyFull is full jitter, the SDK's default.
	StrategyFull Strategy = "full"
	// StrategyEqual is equal jitter: half the window fixed, half random.
	StrategyEqual Strategy = "equal"
	// StrategyDecorrelated is decorrelated jitter.
	StrategyDecorrelated Strategy = "decorrelated"
)

// Strategies lists every Strategy in the blog's order.
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

// Delayer is what every strategy implements: the SDK's BackoffDelayer for
// stateless use by the retry middleware, and a per-loop Sequence.
type Delayer interface {
	retry.BackoffDelayer

	// NewSequence returns a Sequence of this strategy's delays for one retry
	// loop.
	NewSequence() *Sequence
}

// New returns the delayer of the given strategy. An unknown strategy or
// invalid Options are reported as an error.
func New(strategy Strategy, optFns ...func(*Options)) (Delayer, error) {
	switch strategy {
	case StrategyExponential:
		return NewExponential(optFns...)
	case StrategyFull:
		return NewFull(optFns...)
	case StrategyEqual:
		return NewEqual(optFns...)
	case StrategyDecorrelated:
		return NewDecorrelated(optFns...)
	}
	_, err := ParseStrategy(string(strategy))
	return nil, err
}

// stepper is one strategy's formula: the delay of attempt, given the base that
// applies, the previous delay of the same loop (only decorrelated jitter uses
// it) and a random value.
type stepper interface {
	step(s *settings, base time.Duration, attempt int, prev time.Duration, x uint64) time.Duration
}
