package occ

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/metrics"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// SDKStandard names the baseline policy: the SDK's own retry.NewStandard.
const SDKStandard = "sdk-standard"

// Contention names the policy that retries conflicts as jitterretry.Do does
// by default: with the versions each conflict reports (jitterretry.Conflict),
// a backoff that follows the contention it measures, a budget of its own and
// no retry tokens. Throttles and 5xx take full jitter, the SDK's default.
const Contention = "contention"

// BlindConflictAttempts is the most calls of one increment's Do loop in the
// blind policies (every policy but Contention) before the increment goes
// back to the worker's queue: the same budget as the Contention policy's
// (Do's default DoOptions.MaxConflicts), so that the rows differ only in the
// backoff between conflicts.
const BlindConflictAttempts = 100

// StrategyNames lists every policy NewPolicy accepts: the SDK's standard
// retryer and the jitter strategies in the blog post's order, which back
// off blindly after a conflict, then Contention.
func StrategyNames() []string {
	names := []string{SDKStandard}
	for _, s := range delayers.Strategies() {
		names = append(names, string(s))
	}
	return append(names, Contention)
}

// PolicyOptions tunes a Policy. Zero values mean the SDK's numbers.
type PolicyOptions struct {
	// Seed makes the jitter deterministic for a given order of draws.
	Seed uint64
	// BaseDelay is the first retry's window after an error that is not a
	// throttle (a 500, a dropped connection, and a conflict in the blind
	// policies). Zero means 50 ms. The Contention policy's conflicts take
	// Do's contention backoff instead, capped at MaxBackoff.
	BaseDelay time.Duration
	// ThrottleBaseDelay is the first retry's window after a throttle. Zero
	// means 1 s. The SDK's own standard retryer always uses 1 s and ignores
	// it.
	ThrottleBaseDelay time.Duration
	// MaxBackoff caps every delay but the blind policies' conflict
	// backoff. Zero means 20 s.
	MaxBackoff time.Duration
	// BlindMaxBackoff caps the blind policies' backoff after a conflict
	// (their Do loop's). Zero means MaxBackoff.
	BlindMaxBackoff time.Duration
	// RequeueCap caps the delay before an increment that Do gave up on is
	// tried again, as a job queue bounds its redelivery delay. Zero means
	// 1 s.
	RequeueCap time.Duration
	// OnRetry, when set, sees every retry Retries counts. It must be safe
	// for concurrent use and quick.
	OnRetry func(jitterretry.RetryEvent)
	// MeterProvider, when set, receives the metrics of every
	// jitterretry.Retryer the policy builds (the SDK's standard retryer
	// records none); give the DynamoDB client the same one.
	MeterProvider metrics.MeterProvider
}

// Policy is one retry strategy. SDK is the DynamoDB client's retryer: it
// retries throttles and 5xx within one call, from its retry token bucket.
// Loop is the retryer jitterretry.Do uses for conflicts (and for
// transactions cancelled by throttling), with the options DoOptions sets:
//
//   - Contention: Loop is SDK, and Do handles conflicts as it does by
//     default (the contention backoff, a budget of its own, no tokens);
//   - the blind policies (SDKStandard and the jitter strategies): Loop is a
//     retryer of its own with the policy's backoff and no token bucket
//     (ratelimit.None), and a conflict is retried as a transient error, up
//     to BlindConflictAttempts calls, with its backoff capped at
//     BlindMaxBackoff. Without the bucket the comparison is about the
//     backoff alone: a conflict costs no tokens in any row, as in the
//     Contention row, so no row fails for want of budget (a transaction
//     cancelled by throttling takes none either in these rows).
//
// Requeue spaces the tries of an increment that Do gave up on. Safe for
// concurrent use by multiple goroutines.
type Policy struct {
	// Name is the strategy's name, as in StrategyNames.
	Name string
	// SDK is the retryer to set on the DynamoDB client.
	SDK aws.Retryer
	// Loop is the retryer jitterretry.Do uses: SDK itself for Contention,
	// one without a token bucket for the blind policies.
	Loop *jitterretry.Retryer
	// Requeue gives the delay before an increment that Do gave up on is
	// tried again; attempt counts those give-ups.
	Requeue retry.BackoffDelayer

	blind            bool
	refused, retries atomic.Int64
}

// Refused returns how many retries the client's retry token bucket has
// refused so far (the blind policies' loops have none).
func (p *Policy) Refused() int64 { return p.refused.Load() }

// Retries returns how many retries have been made so far, at either layer
// (the jitterretry.Retryer's OnRetry hook). For SDKStandard it counts only
// the application loop's retries: the SDK's own retryer has no hook.
func (p *Policy) Retries() int64 { return p.retries.Load() }

// Blind reports whether the policy backs off blindly after a conflict, as
// after any transient error, rather than with Do's contention backoff.
func (p *Policy) Blind() bool { return p.blind }

// DoOptions returns the options of one increment's Do loop. loopAttempts is
// the most calls that fail with a transaction cancelled by throttling in the
// Contention policy; the blind policies allow BlindConflictAttempts calls
// whatever failed.
func (p *Policy) DoOptions(loopAttempts int) func(*jitterretry.DoOptions) {
	return func(o *jitterretry.DoOptions) {
		def := Classify(o.Classify)
		o.Classify = def
		o.MaxAttempts = loopAttempts
		if p.blind {
			o.Classify = func(err error) jitterretry.ErrorClass {
				if c := def(err); c != jitterretry.ClassConflict {
					return c
				}
				return jitterretry.ClassTransient
			}
			o.MaxAttempts = BlindConflictAttempts
		}
	}
}

// NewPolicy returns the policy called name (see StrategyNames).
func NewPolicy(name string, o PolicyOptions) (*Policy, error) {
	p := &Policy{Name: name, blind: name != Contention}
	if o.RequeueCap <= 0 {
		o.RequeueCap = time.Second
	}
	if name == SDKStandard {
		bucket := countingLimiter{RateLimiter: ratelimit.NewTokenRateLimit(retry.DefaultRetryRateTokens), refused: &p.refused}
		std := retry.NewStandard(func(so *retry.StandardOptions) {
			so.RateLimiter = bucket
			so.BaseDelay = o.BaseDelay
			if o.MaxBackoff > 0 {
				so.MaxBackoff = o.MaxBackoff
			}
		})
		p.SDK = std
		p.Requeue = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
			d, err := std.RetryDelay(attempt, err)
			return min(d, o.RequeueCap), err
		})
		loopStd := retry.NewStandard(func(so *retry.StandardOptions) {
			so.BaseDelay = o.BaseDelay
			if c := o.blindCap(); c > 0 {
				so.MaxBackoff = c
			}
		})
		p.Loop = p.blindLoop(o, func(jo *jitterretry.Options) { jo.Backoff = retry.BackoffDelayerFunc(loopStd.RetryDelay) })
		return p, p.Loop.Err()
	}

	strategy := delayers.StrategyFull // Contention's throttles and 5xx
	if p.blind {
		var err error
		if strategy, err = delayers.ParseStrategy(name); err != nil {
			return nil, fmt.Errorf("occ: unknown strategy %q, want one of %v", name, StrategyNames())
		}
	}
	jitter := func(seed uint64, maxBackoff time.Duration) func(*jitterretry.Options) {
		return func(jo *jitterretry.Options) {
			jo.Jitter = strategy
			// Zero means the default: New has filled the defaults in already.
			if o.BaseDelay > 0 {
				jo.BaseDelay = o.BaseDelay
			}
			if o.ThrottleBaseDelay > 0 {
				jo.ThrottleBaseDelay = o.ThrottleBaseDelay
			}
			if maxBackoff > 0 {
				jo.MaxBackoff = maxBackoff
			}
			jo.Source = delayers.NewSource(seed)
		}
	}
	r := jitterretry.New(jitter(o.Seed, o.MaxBackoff), func(jo *jitterretry.Options) {
		// Run puts the table's name in the context: the table is the
		// partition, so that its Do loops back off together while it
		// throttles (see jitterretry.Do).
		jo.PartitionKey = jitterretry.PartitionFromContext
		jo.OnRetry = p.onRetry(o.OnRetry)
		jo.OnGiveUp = func(e *jitterretry.GiveUpError) {
			if e.Reason == jitterretry.GiveUpBudget {
				p.refused.Add(1)
			}
		}
		jo.MeterProvider = o.MeterProvider
	})
	if err := r.Err(); err != nil {
		return nil, err
	}
	requeue, err := delayers.New(strategy, func(do *delayers.Options) {
		do.Base, do.ThrottleBase, do.Cap = o.BaseDelay, o.ThrottleBaseDelay, o.RequeueCap
		do.Source = delayers.NewSource(o.Seed + 1)
	})
	if err != nil {
		return nil, err
	}
	p.SDK, p.Loop, p.Requeue = r, r, requeue
	if p.blind {
		p.Loop = p.blindLoop(o, jitter(o.Seed+2, o.blindCap()))
	}
	return p, p.Loop.Err()
}

func (o PolicyOptions) blindCap() time.Duration {
	if o.BlindMaxBackoff > 0 {
		return o.BlindMaxBackoff
	}
	return o.MaxBackoff
}

// blindLoop returns the blind policies' Do retryer: the policy's backoff,
// set by backoff, and no token bucket, no limit on attempts (DoOptions sets
// Do's).
func (p *Policy) blindLoop(o PolicyOptions, backoff func(*jitterretry.Options)) *jitterretry.Retryer {
	return jitterretry.New(backoff, func(jo *jitterretry.Options) {
		jo.RateLimiter = ratelimit.None
		jo.MaxAttempts = jitterretry.UnlimitedAttempts
		jo.OnRetry = p.onRetry(o.OnRetry)
		if o.MeterProvider != nil {
			jo.MeterProvider = withoutBucketGauge{o.MeterProvider}
		}
	})
}

// withoutBucketGauge is the blind loops' view of the meter provider: every
// instrument but jitterretry.bucket.tokens. Their retryer has no bucket
// (ratelimit.None), yet it would report one of 0 tokens under the same
// attributes as the client's retryer, and hide the client's real figure:
// the gauge says nothing of which retryer observed it.
type withoutBucketGauge struct{ metrics.MeterProvider }

func (p withoutBucketGauge) Meter(scope string, opts ...metrics.MeterOption) metrics.Meter {
	return meterWithoutBucketGauge{p.MeterProvider.Meter(scope, opts...)}
}

type meterWithoutBucketGauge struct{ metrics.Meter }

func (m meterWithoutBucketGauge) Int64AsyncGauge(name string, cb metrics.Int64Callback, opts ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	if name == bucketGauge {
		return metrics.NopMeterProvider{}.Meter("").Int64AsyncGauge(name, cb, opts...)
	}
	return m.Meter.Int64AsyncGauge(name, cb, opts...)
}

const bucketGauge = "jitterretry.bucket.tokens"

func (p *Policy) onRetry(next func(jitterretry.RetryEvent)) func(jitterretry.RetryEvent) {
	return func(e jitterretry.RetryEvent) {
		p.retries.Add(1)
		if next != nil {
			next(e)
		}
	}
}

// countingLimiter counts the retries the SDK's token bucket refuses.
type countingLimiter struct {
	retry.RateLimiter
	refused *atomic.Int64
}

func (c countingLimiter) GetToken(ctx context.Context, cost uint) (func() error, error) {
	release, err := c.RateLimiter.GetToken(ctx, cost)
	if err != nil {
		c.refused.Add(1)
	}
	return release, err
}
