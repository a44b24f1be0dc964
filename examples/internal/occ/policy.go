package occ

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// SDKStandard names the baseline policy: the SDK's own retry.NewStandard.
const SDKStandard = "sdk-standard"

// StrategyNames lists every policy NewPolicy accepts: the SDK's standard
// retryer, then the jitter strategies in the blog post's order.
func StrategyNames() []string {
	names := []string{SDKStandard}
	for _, s := range delayers.Strategies() {
		names = append(names, string(s))
	}
	return names
}

// PolicyOptions tunes a Policy. Zero values mean the SDK's numbers.
type PolicyOptions struct {
	// Seed makes the jitter deterministic for a given order of draws.
	Seed uint64
	// BaseDelay is the first retry's window after an error that is not a
	// throttle (a 500, a dropped connection). Zero means 50 ms. Conflicts
	// take Do's contention backoff instead, capped at MaxBackoff.
	BaseDelay time.Duration
	// ThrottleBaseDelay is the first retry's window after a throttle. Zero
	// means 1 s. The SDK's own standard retryer always uses 1 s and ignores
	// it.
	ThrottleBaseDelay time.Duration
	// MaxBackoff caps every delay. Zero means 20 s.
	MaxBackoff time.Duration
	// RequeueCap caps the delay before an increment that Do gave up on is
	// tried again, as a job queue bounds its redelivery delay. Zero means
	// 1 s.
	RequeueCap time.Duration
	// OnRetry, when set, sees every retry Retries counts. It must be safe
	// for concurrent use and quick.
	OnRetry func(jitterretry.RetryEvent)
}

// Policy is one retry strategy, wired the same way for every strategy: SDK
// is the DynamoDB client's retryer (throttles and 5xx within one call), Loop
// the jitterretry.Do retryer (conflicts, which take no tokens, and
// transactions cancelled by throttling), both drawing from one retry token
// bucket; Requeue spaces the tries of an increment that Do gave up on.
// Safe for concurrent use by multiple goroutines.
type Policy struct {
	// Name is the strategy's name, as in StrategyNames.
	Name string
	// SDK is the retryer to set on the DynamoDB client.
	SDK aws.Retryer
	// Loop is the retryer jitterretry.Do uses; it shares SDK's bucket.
	Loop *jitterretry.Retryer
	// Requeue gives the delay before an increment that Do gave up on is
	// tried again; attempt counts those give-ups.
	Requeue retry.BackoffDelayer

	refused, retries atomic.Int64
}

// Refused returns how many retries the shared retry token bucket has
// refused so far, at either layer.
func (p *Policy) Refused() int64 { return p.refused.Load() }

// Retries returns how many retries have been made so far, at either layer
// (the jitterretry.Retryer's OnRetry hook). For SDKStandard it counts only
// the application loop's retries: the SDK's own retryer has no hook.
func (p *Policy) Retries() int64 { return p.retries.Load() }

// NewPolicy returns the policy called name (see StrategyNames).
func NewPolicy(name string, o PolicyOptions) (*Policy, error) {
	p := &Policy{Name: name}
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
		p.Loop = jitterretry.New(func(jo *jitterretry.Options) {
			jo.Backoff = retry.BackoffDelayerFunc(std.RetryDelay)
			jo.RateLimiter = bucket
			jo.OnRetry = p.onRetry(o.OnRetry)
		})
		return p, p.Loop.Err()
	}

	strategy, err := delayers.ParseStrategy(name)
	if err != nil {
		return nil, fmt.Errorf("occ: unknown strategy %q, want one of %v", name, StrategyNames())
	}
	r := jitterretry.New(func(jo *jitterretry.Options) {
		jo.Jitter = strategy
		// Zero means the default: New has filled the defaults in already.
		if o.BaseDelay > 0 {
			jo.BaseDelay = o.BaseDelay
		}
		if o.ThrottleBaseDelay > 0 {
			jo.ThrottleBaseDelay = o.ThrottleBaseDelay
		}
		if o.MaxBackoff > 0 {
			jo.MaxBackoff = o.MaxBackoff
		}
		jo.Source = delayers.NewSource(o.Seed)
		jo.OnRetry = p.onRetry(o.OnRetry)
		jo.OnGiveUp = func(e *jitterretry.GiveUpError) {
			if e.Reason == jitterretry.GiveUpBudget {
				p.refused.Add(1)
			}
		}
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
	return p, nil
}

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
