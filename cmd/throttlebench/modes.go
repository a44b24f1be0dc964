package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/metrics"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/cmd/internal/listflag"
	"github.com/jitterretry/jitterretry/delayers"
)

// The SDK's modes.
const (
	modeSDKDefault  = "sdk-default"  // no retryer given: the DynamoDB client's own (standard, 4 attempts, 25 ms base)
	modeSDKStandard = "sdk-standard" // retry.NewStandard(): 3 attempts, 50 ms base
	modeSDKAdaptive = "sdk-adaptive" // retry.NewAdaptiveMode()
)

// Ours are named "ours-JITTER" with the suffixes "+rate" (the send-rate
// limiter on) and "+failfast" (FailFastOnEmptyBudget), in that order.
const (
	oursPrefix     = "ours-"
	suffixRate     = "+rate"
	suffixFailFast = "+failfast"
)

// defaultModes is every mode issue 6 asks for, in the order of the tables.
var defaultModes = []string{
	modeSDKDefault, modeSDKStandard, modeSDKAdaptive,
	"ours-full", "ours-equal", "ours-decorrelated",
	"ours-full+rate", "ours-equal+rate", "ours-decorrelated+rate",
	"ours-full+failfast",
}

// mode is one retry configuration under test.
type mode struct {
	name string
	// retryer builds a fresh retryer for one run; nil keeps the client's
	// default.
	retryer func() aws.Retryer
	// metered builds the same retryer recording into a meter provider
	// (-plot-metrics); nil for the SDK's modes, whose retryers take none.
	metered func(metrics.MeterProvider) aws.Retryer
	// rate is set for ours with the send-rate limiter on, whose sends
	// -trace reports.
	rate bool
}

// tuning is what the command line sets on ours beyond the mode's name.
type tuning struct {
	// initialRate is the rate, requests per second, the "+rate" modes
	// start their limiter at (0: unlimited).
	initialRate float64
	// maxAttempts replaces the DynamoDB preset's 4 attempts (0: keep 4;
	// 3 is New's default, as retry.NewStandard()'s).
	maxAttempts int
}

// parseMode returns the mode called name, ours tuned by t.
func parseMode(name string, t tuning) (mode, error) {
	switch name {
	case modeSDKDefault:
		return mode{name: name}, nil
	case modeSDKStandard:
		return mode{name: name, retryer: func() aws.Retryer { return retry.NewStandard() }}, nil
	case modeSDKAdaptive:
		return mode{name: name, retryer: func() aws.Retryer { return retry.NewAdaptiveMode() }}, nil
	}
	rest, ok := strings.CutPrefix(name, oursPrefix)
	if !ok {
		return mode{}, fmt.Errorf("invalid mode %q: want %s, %s, %s or %sJITTER[%s][%s]",
			name, modeSDKDefault, modeSDKStandard, modeSDKAdaptive, oursPrefix, suffixRate, suffixFailFast)
	}
	rest, failFast := strings.CutSuffix(rest, suffixFailFast)
	rest, rate := strings.CutSuffix(rest, suffixRate)
	jitter, err := delayers.ParseStrategy(rest)
	if err != nil {
		return mode{}, fmt.Errorf("invalid mode %q: %w", name, err)
	}
	opts := func(o *jitterretry.Options) {
		o.Jitter = jitter
		o.FailFastOnEmptyBudget = failFast
		if rate {
			o.SendRate = &jitterretry.SendRateOptions{InitialRate: t.initialRate}
		}
		if t.maxAttempts != 0 {
			o.MaxAttempts = t.maxAttempts
		}
	}
	if err := jitterretry.New(jitterretry.DynamoDB, opts).Err(); err != nil {
		return mode{}, fmt.Errorf("invalid mode %q: %w", name, err)
	}
	// retryer is metered without a provider, so that a run with
	// -plot-metrics differs from one without only by the provider.
	metered := func(p metrics.MeterProvider) aws.Retryer {
		return jitterretry.New(jitterretry.DynamoDB, opts, func(o *jitterretry.Options) { o.MeterProvider = p })
	}
	return mode{name: name, retryer: func() aws.Retryer { return metered(nil) }, metered: metered, rate: rate}, nil
}

// parseModes parses a comma-separated list of modes; "all" is defaultModes.
func parseModes(s string, t tuning) ([]mode, error) {
	names := listflag.Split(s)
	if len(names) == 1 && names[0] == "all" {
		names = defaultModes
	}
	if len(names) == 0 {
		return nil, errors.New("invalid -modes: empty list")
	}
	var out []mode
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("invalid -modes: %q twice", n)
		}
		seen[n] = true
		m, err := parseMode(n, t)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// failureKind sorts an operation's error into the report's columns.
func failureKind(err error) failures {
	var qe ratelimit.QuotaExceededError
	var ma *retry.MaxAttemptsError
	switch {
	case errors.Is(err, jitterretry.ErrRetryBudgetExhausted), errors.As(err, &qe):
		return failures{budget: 1}
	case errors.As(err, &ma):
		return failures{maxAttempts: 1}
	case errors.Is(err, context.DeadlineExceeded):
		return failures{deadline: 1}
	default:
		return failures{other: 1}
	}
}
