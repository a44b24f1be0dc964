package jitterretry

import (
	"context"
	"errors"
	"math"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jitterretry/jitterretry/delayers"
)

// Special MaxAttempts values.
const (
	// DefaultMaxAttempts is the SDK's default: 3 attempts, so 2 retries.
	DefaultMaxAttempts = 3
	// NoRetries makes one attempt and never retries.
	NoRetries = 1
	// UnlimitedAttempts retries for as long as errors are retryable, the
	// retry budget lasts and the context allows. MaxAttempts() then reports
	// 0, the SDK's value for "no limit".
	UnlimitedAttempts = -1
)

// Options configures a Retryer. New starts from the SDK's retry behaviour
// 2.1 defaults, so a Retryer built with no options behaves like
// retry.NewStandard(), apart from the fixes listed in the README.
type Options struct {
	// MaxAttempts is the most attempts an operation makes, the first one
	// included. Default DefaultMaxAttempts (3). Use NoRetries (1) for a
	// single attempt and UnlimitedAttempts (-1) for no limit; 0 and other
	// negative values are invalid (the SDK silently turns them into 3).
	MaxAttempts int

	// Jitter selects the backoff strategy. Default delayers.StrategyFull,
	// the SDK's. Ignored when Backoff is set.
	Jitter delayers.Strategy

	// BaseDelay is the first retry's backoff window after an error that is
	// not a throttle, doubling per attempt. Default 50 ms. Ignored when
	// Backoff is set.
	BaseDelay time.Duration

	// ThrottleBaseDelay is BaseDelay for throttling errors. Default 1 s, or
	// MaxBackoff when that is smaller. Ignored when Backoff is set.
	ThrottleBaseDelay time.Duration

	// MaxBackoff caps every delay, before jitter. Default 20 s. Ignored when
	// Backoff is set.
	MaxBackoff time.Duration

	// BackoffGrowth is the factor the backoff window grows by per attempt
	// for Jitter exponential, full and equal. Zero means 2 (doubling);
	// otherwise it must be within [delayers.MinGrowth, delayers.MaxGrowth],
	// and zero with Jitter decorrelated. In the blog's contention experiment
	// full jitter with 1.5 made 16% fewer calls in 5% less time than with 2
	// (BENCHMARKS.md). Ignored when Backoff is set.
	BackoffGrowth float64

	// Backoff, when set, computes every delay instead of Jitter, BaseDelay,
	// ThrottleBaseDelay and MaxBackoff.
	Backoff retry.BackoffDelayer

	// Source supplies the jitter's randomness. Nil means the Go runtime's
	// generator; use delayers.NewSource(seed) for deterministic tests.
	Source delayers.Source

	// Retryables are checks consulted before the built-in classification;
	// the first answer that is not unknown decides. Default none.
	Retryables []retry.IsErrorRetryable

	// Throttles are checks consulted before the built-in throttle
	// classification. Default none.
	Throttles []retry.IsErrorThrottle

	// RetryCost is the tokens a retry after a non-throttling error takes
	// from the bucket. Default DefaultRetryCost (14).
	RetryCost uint

	// ThrottlingRetryCost is the tokens a retry after a throttling error
	// takes. Default DefaultThrottlingRetryCost (5).
	ThrottlingRetryCost uint

	// NoRetryIncrement is the tokens an operation that succeeds on its first
	// attempt adds back. Default DefaultNoRetryIncrement (1).
	NoRetryIncrement uint

	// Bucket configures the retry token bucket (capacity 500, no refill by
	// default), and every partition's bucket when PartitionKey is set.
	Bucket TokenBucketOptions

	// RateLimiter replaces the retry token bucket, for example with the
	// SDK's ratelimit.None to disable it, or the SDK's own
	// ratelimit.NewTokenRateLimit. Cannot be combined with PartitionKey.
	RateLimiter retry.RateLimiter

	// PartitionKey, when set, gives each key its own retry token bucket, so
	// one hot table or operation cannot spend every other call's budget.
	// See PartitionByOperation and WithPartition. Keys should be few: each
	// key's bucket lives as long as the Retryer.
	PartitionKey func(ctx context.Context) string

	// DisableDeadlineGiveUp turns off the deadline check: by default, when
	// the context has a deadline, a retry whose backoff would end past it is
	// not started, and the operation fails at once with a *GiveUpError that
	// wraps the last error.
	DisableDeadlineGiveUp bool

	// DeadlineMargin is the time a retry must leave after its backoff and
	// before the deadline, for the attempt itself. Default 0; negative is
	// invalid.
	DeadlineMargin time.Duration

	// OnRetry, when set, is called for every retry about to be made, after
	// its delay is known. It must be safe for concurrent use and quick.
	OnRetry func(RetryEvent)

	// OnGiveUp, when set, is called when the retryer refuses a retry. It
	// must be safe for concurrent use and quick. Under the SDK's retry
	// middleware, the max-attempts check happens before the retryer is
	// consulted, so GiveUpMaxAttempts is reported only by Do.
	OnGiveUp func(GiveUpEvent)

	// SendRate, when set, turns on the adaptive client-side send-rate
	// limiter (see SendRateLimiter): every attempt waits in GetAttemptToken
	// for its turn to send, at a rate learnt from the service's throttles, one
	// limiter per PartitionKey. With it on, ThrottleBaseDelay defaults to
	// BaseDelay, since the limiter already slows the client down. Default nil
	// (off), as the SDK's standard mode.
	SendRate *SendRateOptions

	// OnSendWait, when set, is called once for every attempt the send-rate
	// limiter makes wait, before the wait. It must be safe for concurrent use
	// and quick.
	OnSendWait func(SendWaitEvent)

	// FailFastOnEmptyBudget returns the *BudgetError at once when the retry
	// token bucket is empty, as the SDK does. By default the retryer first
	// waits the retry's backoff (never past the context's deadline), so that
	// callers in closed loops, which send again as soon as an operation
	// fails, cannot turn an empty budget into a retry storm.
	FailFastOnEmptyBudget bool

	// Clock returns the current time for deadline checks and the send-rate
	// limiter. Nil means time.Now.
	Clock func() time.Time
}

// SendWaitEvent describes an attempt held back by the send-rate limiter.
type SendWaitEvent struct {
	// Partition is the limiter's partition key, if any.
	Partition string
	// Wait is how long the attempt is due to wait before it is sent, at the
	// rate when it joined the queue; a cut during the wait lengthens it, and
	// a rise or places given back ahead shorten it.
	Wait time.Duration
	// Rate is the limiter's send rate, in requests per second, read just
	// after Wait: under concurrency it may already differ from the rate Wait
	// was measured at.
	Rate float64
}

// RetryEvent describes a retry about to be made.
type RetryEvent struct {
	// Attempt is the 1-based number of the attempt that failed.
	Attempt int
	// Delay is the backoff before the next attempt, after the service's
	// x-amz-retry-after hint.
	Delay time.Duration
	// Class is the failed attempt's error class.
	Class ErrorClass
	// Err is the failed attempt's error; nil for a wait for the send-rate
	// limiter.
	Err error
}

// GiveUpEvent describes a retry the retryer refused.
type GiveUpEvent struct {
	// Reason says why.
	Reason GiveUpReason
	// Attempt is the 1-based number of the attempt that failed, or 0 where
	// the SDK does not tell the retryer (GiveUpNotRetryable, GiveUpBudget,
	// GiveUpCanceled under the retry middleware) and for a wait for the
	// send-rate limiter, which comes before an attempt.
	Attempt int
	// Partition is the retry token bucket's partition key, if any.
	Partition string
	// Err is the failed attempt's error; nil for a wait for the send-rate
	// limiter.
	Err error
}

// DynamoDB sets the SDK's DynamoDB client defaults, 4 attempts and a 25 ms
// base delay, which a DynamoDB client built with any custom retryer
// otherwise loses silently.
func DynamoDB(o *Options) {
	o.MaxAttempts = 4
	o.BaseDelay = 25 * time.Millisecond
}

func defaultOptions() Options {
	return Options{
		MaxAttempts:         DefaultMaxAttempts,
		Jitter:              delayers.StrategyFull,
		RetryCost:           DefaultRetryCost,
		ThrottlingRetryCost: DefaultThrottlingRetryCost,
		NoRetryIncrement:    DefaultNoRetryIncrement,
	}
}

func (o *Options) validate() error {
	switch {
	case o.MaxAttempts == 0:
		return &OptionsError{Option: "MaxAttempts", Reason: "0 is ambiguous: use jitterretry.NoRetries (1) for a single attempt or jitterretry.UnlimitedAttempts (-1) for no limit"}
	case o.MaxAttempts < 0 && o.MaxAttempts != UnlimitedAttempts:
		return &OptionsError{Option: "MaxAttempts", Reason: "must be at least 1, or jitterretry.UnlimitedAttempts (-1)"}
	case o.DeadlineMargin < 0:
		return &OptionsError{Option: "DeadlineMargin", Reason: "must not be negative"}
	case o.RateLimiter != nil && o.PartitionKey != nil:
		return &OptionsError{Option: "PartitionKey", Reason: "cannot be combined with a custom RateLimiter; configure Bucket instead"}
	case o.Bucket.RefillPerSecond < 0 || math.IsNaN(o.Bucket.RefillPerSecond):
		return &OptionsError{Option: "Bucket.RefillPerSecond", Reason: "must be zero (off) or positive"}
	case o.SendRate != nil:
		return o.SendRate.validate()
	}
	return nil
}

func (o *Options) newBackoff(throttle retry.IsErrorThrottle) (retry.BackoffDelayer, error) {
	if o.Backoff != nil {
		return o.Backoff, nil
	}
	if o.SendRate != nil && o.ThrottleBaseDelay == 0 {
		o.ThrottleBaseDelay = o.BaseDelay
		if o.ThrottleBaseDelay == 0 {
			o.ThrottleBaseDelay = delayers.DefaultBase
			if o.MaxBackoff > 0 {
				o.ThrottleBaseDelay = min(o.ThrottleBaseDelay, o.MaxBackoff)
			}
		}
	}
	d, err := delayers.New(o.Jitter, func(d *delayers.Options) {
		d.Base, d.ThrottleBase, d.Cap, d.Growth = o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff, o.BackoffGrowth
		d.Throttle, d.Source = throttle, o.Source
	})
	if err == nil {
		return d, nil
	}
	option := "Jitter"
	var oe *delayers.OptionError
	if errors.As(err, &oe) {
		option = map[string]string{"Base": "BaseDelay", "ThrottleBase": "ThrottleBaseDelay", "Cap": "MaxBackoff", "Growth": "BackoffGrowth"}[oe.Option]
		if option == "" {
			option = oe.Option
		}
	}
	return nil, &OptionsError{Option: option, Reason: "rejected by the delayer", Err: err}
}

// PartitionByOperation is a PartitionKey that gives each service operation
// its own bucket, such as "DynamoDB.PutItem".
// Outside an SDK operation (in Do, say) it returns "", the unpartitioned
// bucket.
func PartitionByOperation(ctx context.Context) string {
	service, op := awsmiddle.GetServiceID(ctx), awsmiddle.GetOperationName(ctx)
	if service == "" && op == "" {
		return ""
	}
	return service + "." + op
}

type partitionKey struct{}

// WithPartition returns a context whose operations draw retry tokens from the
// bucket of key (a table name, a tenant) when the Retryer's PartitionKey is
// PartitionFromContext.
func WithPartition(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, partitionKey{}, key)
}

// PartitionFromContext is a PartitionKey that uses the key set with
// WithPartition, or the service operation (as PartitionByOperation) when none
// was set.
func PartitionFromContext(ctx context.Context) string {
	if k, ok := ctx.Value(partitionKey{}).(string); ok {
		return k
	}
	return PartitionByOperation(ctx)
}
