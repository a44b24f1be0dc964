package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/jitterretry/jitterretry/delayers"
)

// Backoff yields one client's sleeps in the OCC experiment. It is not safe
// for concurrent use; each client owns one.
type Backoff interface {
	// Delay returns the sleep before the client's retry-th retry, counted as
	// the blog counts: retry is 1 on the first retry.
	Delay(retry int) (time.Duration, error)
}

// ConflictBackoff is a Backoff that learns from what a failed write
// reports: at is when the conflict reached the client, took how long its
// attempt took (its read and write; with Params.AllOld, after the first
// attempt, its write alone), seen the version its write expected (the one it
// read, or with AllOld the one its previous failed write returned) and
// current the version the write found (a real client has it with ReturnValuesOnConditionCheckFailure
// set to ALL_OLD). The OCC experiment calls Conflict instead of Delay.
type ConflictBackoff interface {
	Backoff
	Conflict(at, took time.Duration, seen, current int) time.Duration
}

// DelayerAttempt maps the blog's retry number n to the attempt number that
// our delayers and the SDK's RetryDelay take.
//
// The blog's window for its n-th retry is min(cap, base*2^n), with n = 1 on
// the first retry, so its first window is 2*base. Our delayers (and the SDK)
// are called with the 1-based number of the attempt that failed and use the
// window min(cap, base*2^(attempt-1)), so their first window is base. The
// first retry follows the failure of attempt 2 in the blog's terms, hence
// attempt = n+1: min(cap, base*2^((n+1)-1)) = min(cap, base*2^n). Passing
// 2*base with attempt = n is the same window; the tests check both.
func DelayerAttempt(blogRetry int) int { return blogRetry + 1 }

// errConflict is the error a client's failed write carries to its backoff: a
// version conflict, which is not a throttle, so every strategy uses Base.
var errConflict error = &smithy.GenericAPIError{
	Code:    "ConditionalCheckFailedException",
	Message: "the row's version changed since it was read",
	Fault:   smithy.FaultClient,
}

// Strategy is one backoff strategy of the OCC experiment.
type Strategy struct {
	// Name is what the -strategies flag and the output call it.
	Name string
	// Description says in one line what it computes.
	Description string
	// Reproducible is false when the strategy draws randomness the seed does
	// not control, so its figures vary between runs with the same seed
	// within their standard errors.
	Reproducible bool

	// newRun returns, for one run, a constructor of one client's Backoff;
	// the seeded randomness of the run comes from src.
	newRun func(p Params, src delayers.Source) (func() Backoff, error)
}

// Names of the blog's strategies and the SDK's, as the -strategies flag
// takes them.
const (
	StrategyNone         = "none"
	StrategyExponential  = string(delayers.StrategyExponential)
	StrategyFull         = string(delayers.StrategyFull)
	StrategyEqual        = string(delayers.StrategyEqual)
	StrategyDecorrelated = string(delayers.StrategyDecorrelated)
	StrategySDK          = "sdk"
	StrategyContention   = "contention"
)

// BlogStrategies returns the strategies of the blog post, in its order, and
// the SDK's standard backoff.
func BlogStrategies() []Strategy {
	return []Strategy{
		{
			Name: StrategyNone, Description: "no backoff: retry as soon as the failed write returns", Reproducible: true,
			newRun: func(Params, delayers.Source) (func() Backoff, error) {
				return func() Backoff { return noBackoff{} }, nil
			},
		},
		windowedStrategy(delayers.StrategyExponential, "min(cap, base*2^n)"),
		windowedStrategy(delayers.StrategyFull, "uniform[0, min(cap, base*2^n))"),
		windowedStrategy(delayers.StrategyEqual, "w/2 + uniform[0, w/2), w = min(cap, base*2^n)"),
		{
			Name: StrategyDecorrelated, Description: "min(cap, uniform[base, 3*prev)), prev per client from base", Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				d, err := delayers.NewDecorrelated(delayerOptions(p.Base, p.Cap, src))
				if err != nil {
					return nil, err
				}
				return func() Backoff { return sequenceBackoff{d.NewSequence()} }, nil
			},
		},
		{
			Name: StrategyContention, Description: "delayers.Contention: sleeps sized from the versions a conflict reports (what Do uses)", Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				return func() Backoff { return &contentionBackoff{c: delayers.Contention{Cap: p.Cap, Source: src}} }, nil
			},
		},
		{
			Name: StrategySDK, Description: "the SDK's retry.NewStandard RetryDelay (crypto/rand: not seedable)", Reproducible: false,
			newRun: func(p Params, _ delayers.Source) (func() Backoff, error) {
				return func() Backoff {
					return sdkBackoff{retry.NewStandard(func(o *retry.StandardOptions) {
						o.BaseDelay = p.Base
						o.MaxBackoff = p.Cap
					})}
				}, nil
			},
		},
	}
}

// Strategies returns every strategy: the blog's, the SDK's, then the
// experimental ones of ExperimentalStrategies.
func Strategies() []Strategy {
	return append(BlogStrategies(), ExperimentalStrategies()...)
}

// StrategyNames returns the names of Strategies, in order.
func StrategyNames() []string {
	var names []string
	for _, s := range Strategies() {
		names = append(names, s.Name)
	}
	return names
}

// LookupStrategy returns the strategy called name, or an error listing the
// valid names.
func LookupStrategy(name string) (Strategy, error) {
	for _, s := range Strategies() {
		if s.Name == name {
			return s, nil
		}
	}
	return Strategy{}, fmt.Errorf("sim: unknown strategy %q, want one of %s", name, strings.Join(StrategyNames(), ","))
}

func delayerOptions(base, cap time.Duration, src delayers.Source) func(*delayers.Options) {
	return func(o *delayers.Options) {
		o.Base, o.Cap, o.Source = base, cap, src
	}
}

// windowedStrategy is a delayers strategy whose delay depends on the attempt
// number alone; being stateless, one delayer serves every client of a run.
func windowedStrategy(st delayers.Strategy, desc string) Strategy {
	return Strategy{
		Name: string(st), Description: desc, Reproducible: true,
		newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
			d, err := delayers.New(st, delayerOptions(p.Base, p.Cap, src))
			if err != nil {
				return nil, err
			}
			b := attemptBackoff{d}
			return func() Backoff { return b }, nil
		},
	}
}

type noBackoff struct{}

func (noBackoff) Delay(int) (time.Duration, error) { return 0, nil }

// attemptBackoff calls a stateless BackoffDelayer with the blog's retry
// number mapped by DelayerAttempt.
type attemptBackoff struct{ d retry.BackoffDelayer }

func (b attemptBackoff) Delay(n int) (time.Duration, error) {
	return b.d.BackoffDelay(DelayerAttempt(n), errConflict)
}

// sequenceBackoff keeps one client's real previous sleep, as the blog's
// decorrelated jitter does; the sequence counts the retries itself.
type sequenceBackoff struct{ q *delayers.Sequence }

func (b sequenceBackoff) Delay(int) (time.Duration, error) { return b.q.Next(errConflict), nil }

// sdkBackoff drives the SDK's standard retryer through RetryDelay, with the
// same attempt mapping as our delayers: its 2.1 formula is
// rand*min(base*2^(attempt-1), cap).
type sdkBackoff struct{ r *retry.Standard }

func (b sdkBackoff) Delay(n int) (time.Duration, error) {
	return b.r.RetryDelay(DelayerAttempt(n), errConflict)
}

// contentionBackoff drives delayers.Contention, as Do does, with the
// versions the simulated client's conflicts report.
type contentionBackoff struct{ c delayers.Contention }

// epoch turns the experiment's virtual time into the clock Contention takes.
var epoch = time.Unix(0, 0)

func (b *contentionBackoff) Delay(int) (time.Duration, error) {
	return b.c.Next(epoch, 0, 0, 0), nil // no report: the blind fallback
}

func (b *contentionBackoff) Conflict(at, took time.Duration, seen, current int) time.Duration {
	return b.c.Next(epoch.Add(at), took, int64(seen), int64(current))
}
