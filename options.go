package jitterretry

// This file owns the options of a Retryer: their defaults, which option
// functions see, and their validation, in the names the caller wrote.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/metrics"

	"github.com/jitterretry/jitterretry/delayers"
)

// UnlimitedAttempts, as Options.MaxAttempts, retries for as long as errors
// are retryable, the retry budget lasts and the context allows.
// Retryer.MaxAttempts then reports 0, the SDK's value for "no limit".
const UnlimitedAttempts = -1

// Options configures a Retryer. As with the SDK's retry.StandardOptions, New
// fills in the defaults before it runs the option functions, so they see
// them and what they leave is used as it is: a zero means zero where zero has
// a meaning (a cost, a margin, a refill), and is invalid where it has none
// (MaxAttempts, Jitter, the delays, BackoffGrowth). The defaults are the SDK's retry
// behaviour 2.1 numbers, so a Retryer built with no options behaves like
// retry.NewStandard(), apart from the differences the README lists.
type Options struct {
	// MaxAttempts is the most attempts an operation makes, the first one
	// included. Default 3. Use 1 for a single attempt and UnlimitedAttempts
	// (-1) for no limit; 0 and other negative values are invalid (the SDK
	// silently turns them into 3).
	MaxAttempts int

	// Jitter selects the backoff strategy. Default delayers.StrategyFull,
	// the SDK's. Ignored when Backoff is set.
	Jitter delayers.Strategy

	// BaseDelay is the first retry's backoff window after an error that is
	// not a throttle, growing by BackoffGrowth per attempt. Default 50 ms;
	// must be positive. A BaseDelay above MaxBackoff is capped, as in the
	// SDK. Ignored when Backoff is set, and still checked then.
	BaseDelay time.Duration

	// ThrottleBaseDelay is BaseDelay for throttling errors. Default 1 s;
	// must be positive. With SendRate set and ThrottleBaseDelay at 1 s
	// (left at its default, or set to it: the two are the same value; set
	// 1 s + 1 ns to keep a second's throttle backoff always), a throttle
	// uses BaseDelay while the limiter paces its
	// partition and at most a tenth of the last 100-200 ms's answers were
	// throttled: the limiter already slows the client down, and the
	// throttle was a near miss; that is, a throttle the limiter counted
	// among the answers (in a Do loop, fn's call was answered with one):
	// not one found in a success (a BatchWriteItem's UnprocessedItems,
	// answered with a 200), whatever names it a throttle, which backs off
	// from ThrottleBaseDelay. Ignored when Backoff is set,
	// and still checked then.
	ThrottleBaseDelay time.Duration

	// MaxBackoff caps every delay, before jitter, so full jitter stays
	// jittered at the cap; the SDK's middleware then applies an
	// x-amz-retry-after hint to the delay, which may take the sleep past
	// it, as with retry.NewStandard(). Default 20 s; must be positive,
	// also when Backoff is set: then it caps only Do's backoff after a
	// conflict, which Backoff does not compute (and not that either when
	// Backoff is a delayer of package delayers: its own cap does).
	MaxBackoff time.Duration

	// BackoffGrowth is the factor the backoff window grows by per attempt.
	// Default 2 (doubling); otherwise within [delayers.MinGrowth,
	// delayers.MaxGrowth] = [1.01, 8] for the exponential, full and equal
	// strategies; 0 is invalid here (unlike delayers.Options.Growth, whose
	// zero means the default: New has filled the default in already).
	// Decorrelated jitter grows from its previous delay and takes only the
	// default. In the blog's contention experiment full jitter growing by
	// 1.5 from a first window of four round trips made 16% fewer calls in
	// 5% less time than doubling from 10 ms; doubling from one round trip
	// made 10% fewer (BENCHMARKS.md, section 2). Ignored when Backoff is
	// set.
	BackoffGrowth float64

	// Backoff, when set, computes every delay instead of Jitter, BaseDelay,
	// ThrottleBaseDelay, MaxBackoff and BackoffGrowth, and tells a throttle
	// by the error it is asked with. Default nil. In Do, a throttle only
	// DoOptions.Classify knows is a throttle to a delayer of package
	// delayers (its Delay(n, true)); another Backoff is asked with
	// errors.Join(err, a ThrottlingException), err first, so that a
	// throttle check of its own that knows err finds it, and the SDK's
	// checks find the stand-in when err has no error code of its own (one
	// that has is found first, and is no throttle to them); a transaction
	// cancelled for throttles is asked as the ThrottlingException alone.
	Backoff retry.BackoffDelayer

	// Source supplies the jitter's randomness and must be safe for
	// concurrent use (math/rand's generators are not, and are refused).
	// Nil (the default) means the Go runtime's generator;
	// use delayers.NewSource(seed) for deterministic tests. Do's backoff
	// after a conflict also reads the measured time of fn's calls, so its
	// delays repeat only as far as those times do.
	Source delayers.Source

	// Retryables are checks consulted before the built-in classification;
	// the first answer that is not unknown decides. Default none. One
	// answer is read otherwise: the SDK's retry.RetryableError{} refusing
	// an attempt AttemptTimeout cut at the deadline, by the cut's own mark
	// (see AttemptTimeout), is passed over, so that its retry is refused
	// for the deadline, as without the list.
	Retryables []retry.IsErrorRetryable

	// Throttles are checks consulted before the built-in throttle
	// classification. Default none.
	Throttles []retry.IsErrorThrottle

	// RetryCost is the tokens a retry after an error that is not a throttle
	// takes from the bucket. Default 14. A cost above BucketCapacity, or
	// above the capacity of a *TokenBucket given as RateLimiter (unless 0,
	// which refuses every retry, as the SDK's ratelimit.NewTokenRateLimit(0)
	// does), is invalid: no such retry could ever be paid.
	RetryCost uint

	// ThrottlingRetryCost is the tokens a retry after a throttling error
	// takes. Default 5; at most BucketCapacity (or the capacity of a
	// *TokenBucket given as RateLimiter).
	ThrottlingRetryCost uint

	// NoRetryIncrement is the tokens an operation that succeeds on its first
	// attempt adds back. Default 1.
	NoRetryIncrement uint

	// BucketCapacity is the size of the retry token bucket, and its content
	// at start. Default 500. With PartitionKey set, every partition has a
	// bucket of this size. Ignored when RateLimiter is set. Zero is
	// invalid while a retry costs tokens (RetryCost, ThrottlingRetryCost):
	// for no retries, set MaxAttempts to 1 and leave BucketCapacity at its
	// default.
	BucketCapacity uint

	// BucketRefill adds tokens continuously, in tokens per second, up to
	// BucketCapacity, so that a fleet of workers that are all retrying
	// cannot drain the bucket for good (the SDK's bucket refills only on
	// first-attempt successes). Default 0, no refill, as the SDK; +Inf keeps
	// the bucket full; negative and NaN are invalid, and so is any refill
	// with a RateLimiter, which it would not reach (give a shared bucket
	// its refill through NewTokenBucket, which takes negative and NaN as
	// zero).
	BucketRefill float64

	// RateLimiter replaces the retry token bucket, for example with the
	// SDK's ratelimit.None to disable it, or a shared *TokenBucket. Default
	// nil: the Retryer's own bucket. Cannot be combined with PartitionKey.
	RateLimiter retry.RateLimiter

	// PartitionKey, when set, gives each key it returns its own retry token
	// bucket (and send-rate limiters: see SendRate): a partition is the scope of a retry
	// budget, a key of the caller's choosing, not a DynamoDB partition or
	// partition key. So one hot table or tenant cannot
	// spend every other call's budget; "" is the shared partition. See
	// PartitionByOperation and WithPartition. At most 1024 keys are kept: a
	// new key arriving 5 minutes or more after the last sweep sweeps the
	// table, forgetting the keys unused since that sweep (so a key goes
	// some 5 to 10 minutes after its last use while new keys arrive, and
	// stays while none do), once its bucket is full again (and its
	// send-rate limiter, if any, has been idle for a minute, after which
	// it starts over anyway), and a new key
	// that finds 1024 makes such idle keys unused since the previous such
	// sweep be forgotten (at a full table, unused in the last 64 new keys),
	// then, if the table is still full, the 64 least recently used,
	// whatever their buckets hold (each starts again with a full one), but
	// for those whose send-rate limiter has callers waiting (more than
	// 1024 are kept only while more than 1024 have callers waiting, then
	// at most 64 more than those, and a sweep comes once in 64 new keys). A
	// key longer than 256 bytes, or not valid UTF-8, is kept, and named in
	// metrics, events and errors, as its first 64 bytes (whole characters,
	// invalid bytes left out), "…" and 32 hex digits of its SHA-256, so
	// that the keys kept hold little memory whatever their length and a
	// metrics exporter takes every name (hashed on every call that names
	// it; a key spelled as another's short form shares its partition);
	// another key is kept as a copy, not the string it may have been cut
	// from. Retryer.Remaining reads the shared partition only. Partitions
	// need the RetryerV2 interface: behind a decorator that hides it, a
	// partition earns no tokens back from first attempts (see
	// Retryer.GetInitialToken). Default nil.
	PartitionKey func(ctx context.Context) string

	// DisableDeadlineGiveUp turns the deadline check off: by default, when
	// the context has a deadline, a retry whose backoff plus the deadline
	// margin would end past it is not started, and the operation fails at
	// once with a *GiveUpError that wraps the last error.
	DisableDeadlineGiveUp bool

	// DeadlineMargin is the time a retry must leave after its backoff,
	// before the deadline, for the attempt itself. Zero (the default) means
	// learnt, per partition and SDK operation (service and operation name;
	// 64 operations a partition at most, beyond which an operation's
	// margin is 0, and each region's operations count apart; for Do, over
	// every operation of the slowest client fn's calls used), from
	// the time from GetAttemptToken to its release: every attempt of a
	// partition is measured until 32 warm ones have been, then, at random,
	// one in 2, 4, 8 and at last 16, the interval doubling each time the
	// window of 32 samples turns over, in every case only while fewer than
	// 8 are measured at once; the margin is twice the largest of an
	// operation's samples until 4 were taken, then twice the second largest
	// of its last 32 (of a full window about their 95th percentile; one
	// stall alone does not raise it). It is 0, as the
	// SDK's, until a warm attempt of the operation was measured: a new
	// client's first attempts, begun before any measured one came back,
	// are cold (they hold its credential fetch and handshakes, which a
	// retry does not pay) and keep none, nor does the first measured
	// attempt of a client first seen once the sampling has thinned. An
	// attempt the caller cancelled, or that AttemptTimeout cut at its own
	// limit, is not counted: after a stall cut at its limit the retry
	// needs the usual attempt time and AttemptTimeout's 5 ms reserve, and
	// one that stalls again is cut before the deadline. One the caller's
	// deadline ended (or AttemptTimeout cut at it) is a lower bound that
	// the margin keeps none of: until a warm attempt of the operation was
	// timed, the send-rate limiter's wait leaves at least the longest such
	// cut (of an attempt begun after the client's first one came back)
	// before the deadline, and a retry refused with less than it left is
	// held before the refusal.
	// After an attempt cut at the deadline no retry is made,
	// DeadlineMargin or not. Set, it is Do's margin too; learnt, Do's
	// is learnt over all the operations of the slowest client (service and
	// region) fn's calls used, kept for the whole loop (over the
	// partition's before fn's first call through the Retryer), or fn's
	// whole last time when longer (the SDK's sleeps inside fn included),
	// less the time that call spent in measured attempts judged cold
	// (they held a new client's credential fetch; what fn did in
	// parallel with them is left out too), and at
	// least 5 ms, so that a loop whose fn is quick does not back off into
	// its deadline. Negative is invalid.
	DeadlineMargin time.Duration

	// OnRetry, when set, is called for every retry about to be made, after
	// its delay is known: in RetryDelay, so not under a wrapper that
	// replaces it (retry.AddWithMaxBackoffDelay), and also for a retry
	// whose caller then gives up during the backoff. It must be safe for
	// concurrent use and quick, and must not panic: a panic reaches the
	// operation's caller, and the retry it stopped, already paid for,
	// gives its tokens back (twice, when a wrapper of RetryDelay recovers
	// the panic and lets the retry go ahead under a context without a
	// deadline or cancel: its release refunds a retry that then succeeds).
	// Its time is not covered by the deadline checks, which ran before it:
	// a hook that takes 500 ms before a retry whose deadline was 200 ms
	// away holds the operation until the SDK's sleep sees the context end.
	OnRetry func(RetryEvent)

	// OnGiveUp, when set, is called with every refusal, also of a wait for
	// the send-rate limiter and, with reason GiveUpNotRetryable, of an
	// error that is not retryable (but a conflict, or a DynamoDB
	// transaction cancelled for throttles only, which are Do's to retry;
	// an attempt the caller's context ended is GiveUpCanceled, with the
	// context's error). It must be safe for concurrent use and quick, and
	// must not change the error: the operation's error holds it (errors.As
	// finds it), but for GiveUpNotRetryable, and for what Do reports of an
	// error fn returned that it does not retry (a call the caller's context
	// ended, an SDK call out of attempts, whose GiveUpMaxAttempts counts the
	// SDK's attempts), where the operation returns Err itself. It must not
	// panic: a panic reaches the operation's caller (the retry refused holds
	// no tokens by then).
	OnGiveUp func(*GiveUpError)

	// SendRate, when set, turns on the adaptive client-side send-rate
	// limiter: every attempt waits in GetAttemptToken for its turn to send,
	// at a rate learnt from the service's throttles, retries ahead of first
	// attempts.
	//
	// A retry is told by its context's Done channel, which the SDK hands on
	// from the operation to every attempt, and by the end of the wait
	// RetryDelay scheduled (the backoff, or an x-amz-retry-after hint's
	// longer wait, as the middleware sleeps it), before which the SDK does
	// not ask for it; that end is on the monotonic clock whatever Clock is.
	// Under context.Background, or a context concurrent operations share,
	// an attempt asking while that context's retries still wait is a first
	// attempt; one asking between the end of a retry's wait and the
	// retry's own attempt takes the retry's turn. A retry not asked for
	// within a second of its wait's end, one past the 256 a limiter
	// expects at once (a full set forgets those whose operations' contexts
	// ended during their waits), and every retry under a wrapper that replaces
	// RetryDelay (retry.AddWithMaxBackoffDelay) or shortens what it
	// returned wait with the first attempts. A Do loop's retry is told by
	// the loop: the first attempt through this Retryer of fn's later
	// calls, when the failed call's waited its turn.
	//
	// There is one limiter per partition and SDK service (the service ID of the
	// operation's context: DynamoDB, STS) and region, a partition's over its
	// one retry bucket, so that a credential refresh through an STS client the
	// retryer also serves, made in the partition of the operation that needed
	// it, does not wait in a throttled table's queue: the partition's first
	// service has the partition's own limiter, which paces its attempts outside
	// an SDK operation too, 4 more services (64 in "") one each, and the
	// services past those go unpaced, over the partition's bucket. The key is
	// the service and the operation's region: a service's clients in two
	// regions on one retryer are paced apart (each pair counts towards the
	// bound). MaxRate caps each limiter apart. For a client that serves several
	// tables, partition by table, or a hot table's throttles set the rate every
	// table's calls wait for. While a partition's limiter holds its callers
	// back (at a finite rate, one had 1 ms or more to wait for its turn in the
	// last second, in a queue that sent at half its rate or more: not a few
	// callers arriving together at a rate far above what they send), a
	// throttle's retry on an empty bucket takes no tokens and waits its turn
	// instead of failing, unless FailFastOnEmptyBudget or RateLimiter is set:
	// what is sent is the limiter's rate however many of those waiting are
	// retries. Only retries whose next attempt waits its turn: GetRetryToken's,
	// and Do's when fn's last call waited in this Retryer's queue; none within
	// a minute after GetInitialToken was last called (a decorator of the older
	// aws.Retryer interface, whose attempts never wait). With UnlimitedAttempts
	// and no deadline, such an operation can retry as long as others wait.
	// Default nil (off), as the SDK's standard mode.
	SendRate *SendRateOptions

	// FailFastOnEmptyBudget returns the refusal at once when the retry token
	// bucket is empty, as the SDK does; the refusal is the same
	// *GiveUpError (GiveUpBudget, matching ratelimit.QuotaExceededError)
	// either way. By default the retryer first waits
	// the retry's backoff, or, when that would pass the context's deadline
	// less the deadline margin and 5 ms, until then, but at least half the
	// time left less 5 ms (at once when no more than 5 ms is left), so that
	// callers in closed loops, which send again as soon as an operation
	// fails, cannot turn an empty budget into a retry storm.
	FailFastOnEmptyBudget bool

	// Clock returns the current time for the deadline checks, the refill
	// of the retryer's own buckets (BucketRefill; a *TokenBucket given as
	// RateLimiter refills on time.Now, whatever Clock says), the send-rate
	// limiter and the learnt margin. Default time.Now;
	// nil means time.Now. Sleeps use real timers. The retryer calls it
	// while holding its own locks (the limiter's, the bucket's, the
	// partition table's), so that readings arrive in order: it must be
	// fast, must not block and must not call the retryer. The send-rate
	// limiter also reads it outside its lock to count an unthrottled
	// attempt, and compares that reading only with its last one under
	// the lock: one before it is counted under the lock. It is called
	// from the goroutines that call the retryer, and, when MeterProvider
	// is set, from the one that collects the jitterretry.bucket.tokens
	// gauge, which reads the buckets as of now (helper-256); never from
	// another of the retryer's own (the hand-off table's sweep reads no
	// clock): a test's fake clock needs no more synchronisation than its
	// calls, and that collection's. A clock without
	// a monotonic reading may step back: the limiter and the refill hold
	// their time where it was until the clock passes it again; a step of
	// a second or more is taken for good once three readings in a row,
	// rising over 100 ms, stayed that far behind, less a second, and they
	// then go on from where they were. Readings moving back and forth
	// within ±0.5 s count no time twice, whatever their pattern, nor does
	// such jitter on top of a step; wider jitter does (helper-235: a
	// limiter held at 200 a second sent 336 under ±0.7 s, 4,620 under
	// ±1 s). The deadline checks
	// compare its readings with the context's deadline, which
	// context.WithTimeout set from the wall clock: a Clock ahead of the
	// wall clock refuses retries that would fit, one behind lets a backoff
	// run into the deadline. Give a Clock that keeps to the wall clock
	// (tests may move it to bring a deadline near). With SendRate, the
	// limiter counts its turns on this clock: one that stands still (a
	// test's fixed time) lets attempts through while the rate is
	// unlimited, but once it is finite (an InitialRate, or the first cut
	// on the service's throttles) one attempt takes the turn and every
	// later one waits until its context ends, for ever under
	// context.Background(); advance a test's clock, or leave SendRate
	// off. (The retries a limiter expects are kept on the monotonic clock
	// instead: the SDK sleeps their backoffs on timers.) Its panic passes
	// through to the caller of whatever read it, New included (New reads
	// it once), as a Backoff's does; the retry whose decision it stopped
	// gives its tokens back.
	Clock func() time.Time

	// MeterProvider, when set, receives the retryer's metrics, under the
	// meter scope github.com/jitterretry/jitterretry: the counters
	// jitterretry.retries ({retry}, by class) and jitterretry.give_ups
	// ({refusal}, by reason), the histogram jitterretry.backoff.duration
	// (s), the gauge jitterretry.bucket.tokens ({token}, by partition), and
	// with SendRate the gauge jitterretry.send_rate.limit ({request}/s) and
	// the histogram jitterretry.send_rate.wait_duration (s); and the
	// counter jitterretry.deadline_checks.skipped ({check}). The README's
	// "Hooks and observability" section gives their attributes and
	// meaning. Pass the same provider as the service client's
	// Options.MeterProvider. Default nil: nothing is
	// recorded and nothing allocated. A provider that panics when New asks
	// it for the meter or an instrument (smithyotelmetrics.Adapt(nil), an
	// adapter of a provider never set, is not nil) is invalid: Err reports
	// it. The gauges are stopped when the Retryer is garbage-collected; a
	// panic of their Stop is recovered there. With a PartitionKey, the counters and
	// histograms have a series for every key they ever saw: for keys that
	// come and go (tenants), drop the jitterretry.partition attribute with
	// a view, as the README shows.
	MeterProvider metrics.MeterProvider
}

// The SDK's retry behaviour 2.1 numbers.
const (
	defaultMaxAttempts         = 3
	defaultBaseDelay           = 50 * time.Millisecond
	defaultThrottleBaseDelay   = time.Second
	defaultMaxBackoff          = 20 * time.Second
	defaultGrowth              = 2.0
	defaultRetryCost           = 14
	defaultThrottlingRetryCost = 5
	defaultNoRetryIncrement    = 1
	defaultBucketCapacity      = 500
)

func defaultOptions() Options {
	return Options{
		MaxAttempts:         defaultMaxAttempts,
		Jitter:              delayers.StrategyFull,
		BaseDelay:           defaultBaseDelay,
		ThrottleBaseDelay:   defaultThrottleBaseDelay,
		MaxBackoff:          defaultMaxBackoff,
		BackoffGrowth:       defaultGrowth,
		RetryCost:           defaultRetryCost,
		ThrottlingRetryCost: defaultThrottlingRetryCost,
		NoRetryIncrement:    defaultNoRetryIncrement,
		BucketCapacity:      defaultBucketCapacity,
		Clock:               time.Now,
	}
}

// DynamoDB sets the SDK's DynamoDB client defaults, 4 attempts and a 25 ms
// base delay, which a DynamoDB client built with any custom retryer
// otherwise loses silently.
func DynamoDB(o *Options) {
	o.MaxAttempts = 4
	o.BaseDelay = 25 * time.Millisecond
}

func (o *Options) validate() error {
	invalid := func(option, reason string) error { return &OptionsError{Option: option, Reason: reason} }
	if err := o.validateCallees(); err != nil {
		return err
	}
	switch {
	case o.MaxAttempts == 0:
		return invalid("MaxAttempts", "0 is ambiguous: use 1 for a single attempt or jitterretry.UnlimitedAttempts (-1) for no limit")
	case o.MaxAttempts < 0 && o.MaxAttempts != UnlimitedAttempts:
		return invalid("MaxAttempts", "must be at least 1, or jitterretry.UnlimitedAttempts (-1)")
	case o.DeadlineMargin < 0:
		return invalid("DeadlineMargin", "must not be negative (0 learns it from the attempts)")
	case o.RateLimiter != nil && o.PartitionKey != nil:
		return invalid("PartitionKey", "cannot be combined with a custom RateLimiter; set BucketCapacity instead")
	case o.BucketRefill < 0 || math.IsNaN(o.BucketRefill):
		return invalid("BucketRefill", "must be zero (no refill) or positive")
	case o.RateLimiter != nil && o.BucketRefill != 0:
		return invalid("BucketRefill", "has no effect with a custom RateLimiter: give the refill to NewTokenBucket")
	}
	if o.RateLimiter == nil && o.BucketCapacity == 0 && max(o.RetryCost, o.ThrottlingRetryCost) > 0 {
		// Zero is what the caller wrote, not a cost: name it (the cost
		// check below named RetryCost, an outside review).
		return invalid("BucketCapacity", fmt.Sprintf(
			"0 can pay no retry (RetryCost %d, ThrottlingRetryCost %d): for no retries set MaxAttempts to 1 and leave BucketCapacity at its default", o.RetryCost, o.ThrottlingRetryCost))
	}
	if capacity, of, known := o.bucketCapacity(); known {
		for _, cost := range []struct {
			option string
			tokens uint
		}{{"RetryCost", o.RetryCost}, {"ThrottlingRetryCost", o.ThrottlingRetryCost}} {
			if cost.tokens > capacity {
				return invalid(cost.option, fmt.Sprintf("%d is more than %s %d: no such retry could ever be paid", cost.tokens, of, capacity))
			}
		}
	}
	if o.SendRate != nil {
		if err := o.SendRate.validate(); err != nil {
			return err
		}
	}
	// Checked with a custom Backoff too: MaxBackoff still caps Do's
	// backoff after a conflict there, and a bad value is bad input
	// whatever reads it.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"BaseDelay", o.BaseDelay}, {"ThrottleBaseDelay", o.ThrottleBaseDelay}, {"MaxBackoff", o.MaxBackoff}} {
		if d.v <= 0 {
			return invalid(d.name, fmt.Sprintf("must be positive, got %v", d.v))
		}
	}
	if o.Backoff != nil {
		return nil
	}
	if _, err := delayers.ParseStrategy(string(o.Jitter)); err != nil {
		return invalid("Jitter", fmt.Sprintf("%q is not a strategy; want one of %v", o.Jitter, delayers.Strategies()))
	}
	switch g := o.BackoffGrowth; {
	case g == defaultGrowth:
	case o.Jitter == delayers.StrategyDecorrelated:
		return invalid("BackoffGrowth", "decorrelated jitter grows from its previous delay; leave BackoffGrowth at 2")
	case !(g >= delayers.MinGrowth && g <= delayers.MaxGrowth):
		return invalid("BackoffGrowth", fmt.Sprintf("must be 2 or within [%v, %v], got %v", delayers.MinGrowth, delayers.MaxGrowth, g))
	}
	return nil
}

// bucketCapacity returns the capacity the retry costs are checked against,
// and what to call it in a message, when there is one: BucketCapacity, or
// the capacity of a *TokenBucket given as RateLimiter, unless 0 (a nil or
// zero one too): a shared bucket of 0 is how the SDK's tests ask for no
// retries at all (ratelimit.NewTokenRateLimit(0)). Another RateLimiter's
// is unknown.
func (o *Options) bucketCapacity() (capacity uint, of string, known bool) {
	switch rl := o.RateLimiter.(type) {
	case nil:
		return o.BucketCapacity, "BucketCapacity", true
	case *TokenBucket:
		c := orZero(rl).capacity
		return c, "the capacity of the *TokenBucket given as RateLimiter,", c > 0
	}
	return 0, "", false
}

// validateCallees rejects an option the Retryer calls through that needs a
// value and holds none (see needsValue): the interface is not nil, so it is
// not defaulted, and the first call through it would panic, at the first
// error (or, for MeterProvider, in New) rather than here. Nil entries of
// Retryables and Throttles likewise.
func (o *Options) validateCallees() error {
	if o.Source != nil {
		// The delayers' own check: the Source is theirs.
		if _, err := delayers.NewFull(func(d *delayers.Options) { d.Source = o.Source }); err != nil {
			var oe *delayers.OptionError
			if errors.As(err, &oe) {
				return &OptionsError{Option: "Source", Reason: oe.Reason}
			}
			return &OptionsError{Option: "Source", Reason: err.Error()}
		}
	}
	for _, c := range []struct {
		name  string
		v     any
		iface reflect.Type
	}{
		{"Backoff", o.Backoff, reflect.TypeFor[retry.BackoffDelayer]()},
		{"RateLimiter", o.RateLimiter, reflect.TypeFor[retry.RateLimiter]()},
		{"MeterProvider", o.MeterProvider, reflect.TypeFor[metrics.MeterProvider]()},
	} {
		if needsValue(c.v, c.iface) {
			return &OptionsError{Option: c.name, Reason: fmt.Sprintf("holds a nil %T; build one, or leave the field nil for the default", c.v)}
		}
		if unusableZero(c.v) {
			t := reflect.TypeOf(c.v).Elem()
			return &OptionsError{Option: c.name, Reason: fmt.Sprintf("holds a pointer to a zero %s.%s, whose methods need one its constructor built", t.PkgPath(), t.Name())}
		}
	}
	if err := nilEntry("Retryables", o.Retryables); err != nil {
		return err
	}
	return nilEntry("Throttles", o.Throttles)
}

// needsValue reports whether v, held in an option of interface type iface,
// is a nil the first call through it panics on: a nil func, or a pointer to
// one whose type has the methods; a nil pointer to
// a type whose methods for iface take the value, which Go's wrapper
// dereferences (the SDK's checks, such as *retry.RetryableErrorCode, and
// smithy-go's *metrics.NopMeterProvider); or a nil pointer of a type whose
// pointer methods dereference it: the SDK's that these options take. This
// module's types answer on a nil pointer as their zero values do (an empty
// bucket, default delays), which is never what a set option meant, so they
// are refused too. A nil pointer of another type is
// left alone, as the SDK leaves it: its methods may work on a nil receiver.
func needsValue(v any, iface reflect.Type) bool {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Func {
		// A pointer to a func type with value methods: Go's wrapper
		// calls the func it points to.
		return rv.Elem().IsNil() && rv.Type().Elem().Implements(iface)
	}
	if !holdsNil(v) {
		return false
	}
	switch t := reflect.TypeOf(v); {
	case t.Kind() == reflect.Func, t.Elem().Implements(iface):
		return true
	}
	switch v.(type) {
	case *TokenBucket, *delayers.Exponential, *delayers.Full, *delayers.Equal, *delayers.Decorrelated,
		*ratelimit.TokenRateLimit, *retry.ExponentialJitterBackoff:
		return true
	}
	return false
}

// unusableZero reports whether v points to the zero value of a type whose
// zero value holds a nil its methods dereference: the SDK's token bucket,
// built only by its constructor. (The Source's checks are the delayers'.)
func unusableZero(v any) bool {
	switch v.(type) {
	case *ratelimit.TokenRateLimit:
		rv := reflect.ValueOf(v)
		return !rv.IsNil() && rv.Elem().IsZero()
	}
	return false
}

// nilEntry reports the first entry of the list named name, or of an SDK
// list of the same checks it holds (a retry.IsErrorRetryables among
// Retryables), that is nil or needs a value it does not hold, and an SDK
// list that holds itself, which the SDK calls again, without end, for an
// error the entries before it do not answer.
func nilEntry[T any](name string, list []T) error {
	return nilEntryWithin(name, list, nil, map[listID]bool{})
}

// listID is a list by identity: where its entries are, and how many. (The
// lists are alive while they are checked, so their addresses stay theirs.)
type listID struct {
	first uintptr
	len   int
}

func idOf[T any](list []T) listID { return listID{reflect.ValueOf(list).Pointer(), len(list)} }

// nilEntryWithin is nilEntry within the lists within, the outermost first;
// checked holds the lists found sound already, which need no second look.
func nilEntryWithin[T any](name string, list []T, within []listID, checked map[listID]bool) error {
	id := idOf(list)
	if len(list) == 0 || checked[id] {
		return nil
	}
	if slices.Contains(within, id) {
		return &OptionsError{Option: name, Reason: "is a list that holds itself: the SDK would call it again, without end, for an error the entries before it do not answer"}
	}
	within = append(within, id)
	for i, f := range list {
		at := fmt.Sprintf("%s[%d]", name, i)
		v := any(f)
		if v == nil || needsValue(v, reflect.TypeFor[T]()) {
			reason := "is nil; leave it out"
			if v != nil {
				reason = fmt.Sprintf("is a nil %T; leave it out", v)
			}
			return &OptionsError{Option: at, Reason: reason}
		}
		if nested, ok := sdkList[T](v); ok {
			if err := nilEntryWithin(at, nested, within, checked); err != nil {
				return err
			}
		}
	}
	checked[id] = true
	return nil
}

// sdkList returns the checks v holds when it is one of the SDK's lists of
// them, retry.IsErrorRetryables or retry.IsErrorThrottles, or a pointer to
// one, which call every entry in turn; a list type of the caller's own may
// do otherwise, and is left to it.
func sdkList[T any](v any) ([]T, bool) {
	var list any
	switch l := v.(type) {
	case retry.IsErrorRetryables:
		list = []retry.IsErrorRetryable(l)
	case *retry.IsErrorRetryables:
		if l != nil {
			list = []retry.IsErrorRetryable(*l)
		}
	case retry.IsErrorThrottles:
		list = []retry.IsErrorThrottle(l)
	case *retry.IsErrorThrottles:
		if l != nil {
			list = []retry.IsErrorThrottle(*l)
		}
	}
	checks, ok := list.([]T)
	return checks, ok
}

// newBackoff builds the delayer the options describe, once validate accepted
// them. throttle is the Retryer's own throttle classification.
func (o *Options) newBackoff(throttle retry.IsErrorThrottle) (retry.BackoffDelayer, error) {
	if o.Backoff != nil {
		return o.Backoff, nil
	}
	d, err := delayers.New(o.Jitter, func(d *delayers.Options) {
		d.Base, d.ThrottleBase, d.Cap, d.Growth = o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff, o.BackoffGrowth
		d.Throttle, d.Source = throttle, o.Source
	})
	if err != nil {
		// validate checks every setting the delayers check; this is a
		// backstop that still names the caller's field.
		return nil, &OptionsError{Option: "Jitter", Reason: err.Error()}
	}
	return d, nil
}
