// Package jitterretry is a retryer for the AWS SDK for Go v2 with selectable
// jitter over a client-side retry token bucket.
//
// A *Retryer implements aws.RetryerV2, so it plugs into config.WithRetryer,
// a client's Options.Retryer or one operation's options. Its defaults are the
// SDK's retry behaviour 2.1 numbers (full jitter, 50 ms and 1 s bases, 20 s
// cap, 3 attempts, a 500-token bucket charging 14 or 5 tokens a retry), and
// on top of them it never starts a backoff that would end past the context's
// deadline, keeps full jitter jittered at the cap, classifies errors without
// formatting them, and returns typed errors that keep their cause.
package jitterretry

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

var _ aws.RetryerV2 = (*Retryer)(nil)

// Retryer is an aws.RetryerV2 with selectable jitter, a client-side retry
// token bucket and deadline-aware backoff. Build one with New; each
// config.WithRetryer call should build its own, so clients do not share a
// bucket by accident. It is safe for concurrent use by multiple goroutines.
type Retryer struct {
	err error // invalid options: every operation fails with it

	maxAttempts int // as the SDK reads it: 0 means no limit
	backoff     retry.BackoffDelayer
	classifier  *classifier
	costs       costs
	partition   func(context.Context) string
	bucketOpts  TokenBucketOptions
	limiter     retry.RateLimiter // a foreign RateLimiter, or nil

	deadlineGiveUp bool
	margin         time.Duration
	now            func() time.Time
	onRetry        func(RetryEvent)
	onGiveUp       func(GiveUpEvent)
	onSendWait     func(SendWaitEvent)
	sendRate       *SendRateOptions
	failFast       bool

	main    *lane
	mu      sync.RWMutex
	lanes   map[string]*lane
	pending pendingRetries
}

type costs struct{ retry, throttle, success uint }

// New returns a Retryer configured by optFns over the SDK's standard
// defaults. It never fails: invalid options give a Retryer whose Err reports
// an *OptionsError and that fails every operation with it, so that New can be
// used inline in config.WithRetryer. Check Err at startup.
func New(optFns ...func(*Options)) *Retryer {
	o := defaultOptions()
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	// The caller's slices may be appended to later; keep copies.
	o.Retryables = append([]retry.IsErrorRetryable(nil), o.Retryables...)
	o.Throttles = append([]retry.IsErrorThrottle(nil), o.Throttles...)

	r := &Retryer{
		maxAttempts:    max(o.MaxAttempts, 0),
		classifier:     newClassifier(o.Retryables, o.Throttles),
		costs:          costs{retry: o.RetryCost, throttle: o.ThrottlingRetryCost, success: o.NoRetryIncrement},
		partition:      o.PartitionKey,
		bucketOpts:     o.Bucket,
		limiter:        o.RateLimiter,
		deadlineGiveUp: !o.DisableDeadlineGiveUp,
		margin:         o.DeadlineMargin,
		now:            o.Clock,
		onRetry:        o.OnRetry,
		onGiveUp:       o.OnGiveUp,
		onSendWait:     o.OnSendWait,
		failFast:       o.FailFastOnEmptyBudget,
	}
	if o.SendRate != nil {
		sr := *o.SendRate
		r.sendRate = &sr
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.err = o.validate()
	if r.err == nil {
		r.backoff, r.err = o.newBackoff(retry.IsErrorThrottleFunc(r.classifier.isThrottle))
	}
	if r.err != nil {
		r.maxAttempts = 1
	}
	r.main = r.newLane("")
	return r
}

// Err returns the *OptionsError that New found in its options, or nil.
func (r *Retryer) Err() error { return r.err }

// MaxAttempts returns the most attempts an operation makes, or 0 for no
// limit (UnlimitedAttempts), as the SDK's retry middleware reads it. Invalid
// options give 1.
func (r *Retryer) MaxAttempts() int { return r.maxAttempts }

// IsErrorRetryable reports whether err may be retried, by the SDK's default
// rules with the README's documented differences: a cancelled context is
// never retried, and errors are classified without being formatted.
func (r *Retryer) IsErrorRetryable(err error) bool {
	if r.err != nil || err == nil {
		return false
	}
	if r.classifier.classify(err) != ClassNotRetryable {
		return true
	}
	r.giveUp(GiveUpEvent{Reason: GiveUpNotRetryable, Err: err})
	return false
}

// Classify returns the class of err under this Retryer's rules.
func (r *Retryer) Classify(err error) ErrorClass { return r.classifier.classify(err) }

// GetAttemptToken is called by the SDK before every attempt. The returned
// release adds NoRetryIncrement tokens to the bucket when the attempt
// succeeds.
//
// With the send-rate limiter on, it first waits for a send slot. It never
// waits past a deadline it can see: when the wait would end past ctx's
// deadline it fails at once with a *GiveUpError (GiveUpDeadline), and when
// ctx is done during the wait, with a *GiveUpError (GiveUpCanceled). It also
// fails for invalid options.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if r.err != nil {
		return nil, r.err
	}
	l := r.laneFor(ctx)
	if l.sender == nil {
		return l.onSuccess, nil
	}
	now := r.now()
	if wait := l.sender.ReserveAt(now); wait > 0 {
		if deadline, ok := ctx.Deadline(); ok && r.deadlineGiveUp {
			if remaining := deadline.Sub(now); wait+r.margin > remaining {
				return nil, &GiveUpError{Reason: GiveUpDeadline, Delay: wait, Remaining: remaining}
			}
		}
		if r.onSendWait != nil {
			r.onSendWait(SendWaitEvent{Partition: l.key, Wait: wait, Rate: l.sender.Rate()})
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, &GiveUpError{Reason: GiveUpCanceled, Context: err}
		}
	}
	sentAt := r.now()
	return func(err error) error {
		switch {
		case err == nil:
			l.sender.ObserveAt(sentAt, r.now(), false)
		case r.classifier.classify(err) == ClassThrottle:
			l.sender.ObserveAt(sentAt, r.now(), true)
		}
		return l.onSuccess(err)
	}, nil
}

// GetInitialToken is the deprecated form of GetAttemptToken, for callers that
// still use aws.Retryer.
//
// Deprecated: use GetAttemptToken.
func (r *Retryer) GetInitialToken() func(error) error {
	return r.main.onSuccess
}

// GetRetryToken takes the cost of a retry after opErr from the bucket:
// ThrottlingRetryCost for a throttle, RetryCost otherwise. The returned
// release refunds the cost when the retry succeeds. It fails with a
// *BudgetError when the bucket is empty, and with a *GiveUpError when ctx is
// already done; both wrap opErr.
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	if r.err != nil {
		return nil, r.err
	}
	l := r.laneFor(ctx)
	if err := ctx.Err(); err != nil {
		r.giveUp(GiveUpEvent{Reason: GiveUpCanceled, Partition: l.key, Err: opErr})
		return nil, &GiveUpError{Reason: GiveUpCanceled, Context: err, Err: opErr}
	}
	cost := r.costs.retry
	if r.classifier.classify(opErr) == ClassThrottle {
		cost = r.costs.throttle
	}
	release, held, err := l.take(ctx, cost)
	if err != nil {
		r.giveUp(GiveUpEvent{Reason: GiveUpBudget, Partition: l.key, Err: opErr})
		r.backOffBeforeFailing(ctx, opErr)
		var be *BudgetError
		if errors.As(err, &be) {
			return nil, &BudgetError{Available: be.Available, Requested: be.Requested, Partition: l.key, Err: opErr}
		}
		return nil, err
	}
	if ctx.Done() != nil {
		release, held = refundIfAbandoned(ctx, release, held)
	}
	if deadline, ok := ctx.Deadline(); ok && r.deadlineGiveUp {
		r.pending.put(opErr, pendingRetry{deadline: deadline, held: held})
	}
	return release, nil
}

// refundIfAbandoned gives a retry's tokens back when ctx ends before the
// retry is released. The SDK's middleware returns a retry token's release
// when the backoff sleep is cancelled but never calls it, so without this a
// cancelled caller's tokens would be gone until successes earn them back
// (with no refill, for good). Whichever comes first, the release or the
// refund, claims the tokens; the other does nothing.
func refundIfAbandoned(ctx context.Context, release func(error) error, held heldTokens) (func(error) error, heldTokens) {
	claimed := new(atomic.Bool)
	held.claimed = claimed
	stop := context.AfterFunc(ctx, held.refund)
	held.stop = stop
	return func(err error) error {
		stop()
		if !claimed.CompareAndSwap(false, true) {
			return nil
		}
		return release(err)
	}, held
}

// backOffBeforeFailing waits a first retry's backoff before an empty budget
// fails the operation, so that callers that send again at once cannot turn
// the empty budget into a storm. It never waits past ctx's deadline: when the
// backoff would end past it, it returns at once.
func (r *Retryer) backOffBeforeFailing(ctx context.Context, opErr error) {
	if r.failFast {
		return
	}
	d, err := r.backoff.BackoffDelay(1, opErr)
	if err != nil || d <= 0 {
		return
	}
	if deadline, ok := ctx.Deadline(); ok && d+r.margin > deadline.Sub(r.now()) {
		return
	}
	_ = sleep(ctx, d)
}

// RetryDelay returns the backoff before the retry that follows the failed
// attempt number attempt (1-based). When the operation's context has a
// deadline and the backoff, after the service's x-amz-retry-after hint, plus
// DeadlineMargin would end past it, RetryDelay refunds the retry's tokens and
// returns a *GiveUpError that wraps opErr instead of a delay.
func (r *Retryer) RetryDelay(attempt int, opErr error) (time.Duration, error) {
	if r.err != nil {
		return 0, r.err
	}
	d, err := r.backoff.BackoffDelay(attempt, opErr)
	if err != nil {
		return 0, err
	}
	if p, ok := r.pending.take(opErr); ok {
		wait := withRetryAfter(d, opErr)
		if remaining := p.deadline.Sub(r.now()); wait+r.margin > remaining {
			p.held.refund()
			r.giveUp(GiveUpEvent{Reason: GiveUpDeadline, Attempt: attempt, Partition: p.held.lane.key, Err: opErr})
			return 0, &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Delay: wait, Remaining: remaining, Err: opErr}
		}
	}
	if r.onRetry != nil {
		r.onRetry(RetryEvent{Attempt: attempt, Delay: withRetryAfter(d, opErr), Class: r.classifier.classify(opErr), Err: opErr})
	}
	return d, nil
}

// Remaining returns the tokens left in the retry token bucket (the bucket of
// partition key "" when partitioned), or 0 with a custom RateLimiter that
// does not report it.
func (r *Retryer) Remaining() uint { return r.main.remaining() }

// RemainingIn returns the tokens left in the bucket of partition key, and
// false when that partition has not been used yet.
func (r *Retryer) RemainingIn(key string) (uint, bool) {
	r.mu.RLock()
	l, ok := r.lanes[key]
	r.mu.RUnlock()
	if !ok {
		return 0, false
	}
	return l.remaining(), true
}

// SendRateIn returns the send rate, in requests per second, of the send-rate
// limiter of partition key ("" without partitions): +Inf while unlimited, and
// false when the limiter is off or the partition unused.
func (r *Retryer) SendRateIn(key string) (float64, bool) {
	l := r.main
	if key != "" {
		r.mu.RLock()
		l = r.lanes[key]
		r.mu.RUnlock()
	}
	if l == nil || l.sender == nil {
		return 0, false
	}
	return l.sender.Rate(), true
}

func (r *Retryer) giveUp(e GiveUpEvent) {
	if r.onGiveUp != nil {
		r.onGiveUp(e)
	}
}

func (r *Retryer) laneFor(ctx context.Context) *lane {
	if r.partition == nil || ctx == nil {
		return r.main
	}
	key := r.partition(ctx)
	if key == "" {
		return r.main
	}
	r.mu.RLock()
	l, ok := r.lanes[key]
	r.mu.RUnlock()
	if ok {
		return l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok = r.lanes[key]; !ok {
		if r.lanes == nil {
			r.lanes = map[string]*lane{}
		}
		l = r.newLane(key)
		r.lanes[key] = l
	}
	return l
}

// lane is one retry budget with the release functions the retryer hands out
// for it, built once so that handing them out allocates nothing.
//
// The SDK adds NoRetryIncrement only when an operation's first attempt
// succeeds, and learns which attempt it is from retry metadata that only its
// own package can read. The middleware always releases a retry's token right
// before the same attempt's token, with the same error; so a successful
// retry refunds its cost in full and leaves a skip that the next attempt
// release on this lane consumes instead of adding the increment. Under
// concurrency another goroutine may consume it first, but the totals are
// exactly the SDK's: one increment per first-attempt success, one refund per
// successful retry.
type lane struct {
	key     string
	sender  *SendRateLimiter  // nil when the send-rate limiter is off
	bucket  *TokenBucket      // nil with a foreign limiter
	limiter retry.RateLimiter // the foreign limiter, or nil
	costs   costs
	skips   atomic.Int64

	onSuccess                   func(error) error
	retryRefund, throttleRefund func(error) error
}

func (r *Retryer) newLane(key string) *lane {
	l := &lane{key: key, costs: r.costs, limiter: r.limiter}
	if r.sendRate != nil {
		sr := *r.sendRate
		l.sender = NewSendRateLimiter(func(o *SendRateOptions) { *o = sr })
	}
	if tb, ok := r.limiter.(*TokenBucket); ok {
		l.bucket, l.limiter = tb, nil
	} else if r.limiter == nil {
		l.bucket = newTokenBucket(r.bucketOpts)
	}
	l.onSuccess = onSuccess(func() {
		if !l.consumeSkip() {
			l.give(r.costs.success)
		}
	})
	l.retryRefund = l.refundOnSuccess(r.costs.retry)
	l.throttleRefund = l.refundOnSuccess(r.costs.throttle)
	return l
}

func (l *lane) refundOnSuccess(cost uint) func(error) error {
	return onSuccess(func() {
		l.give(cost)
		l.skips.Add(1)
	})
}

func (l *lane) consumeSkip() bool {
	for {
		n := l.skips.Load()
		if n <= 0 {
			return false
		}
		if l.skips.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (l *lane) give(n uint) {
	if l.bucket != nil {
		l.bucket.give(n)
		return
	}
	_ = l.limiter.AddTokens(n)
}

// heldTokens is a retry's tokens, which an abandoned retry gives back.
type heldTokens struct {
	lane *lane
	cost uint
	rel  func() error // the foreign limiter's release, or nil

	// With a context that can end: who has claimed the tokens, and the
	// refund's registration on the context.
	claimed *atomic.Bool
	stop    func() bool
}

// refund gives the tokens back, unless a release or an earlier refund has
// claimed them.
func (h heldTokens) refund() {
	if h.stop != nil {
		h.stop()
	}
	if h.claimed != nil && !h.claimed.CompareAndSwap(false, true) {
		return
	}
	if h.rel != nil {
		_ = h.rel()
		return
	}
	h.lane.give(h.cost)
}

// take takes cost tokens, returning the SDK-style release (refund on
// success) and the held tokens, for a retry that is abandoned.
func (l *lane) take(ctx context.Context, cost uint) (release func(error) error, held heldTokens, err error) {
	held = heldTokens{lane: l, cost: cost}
	if l.bucket == nil {
		rel, err := l.limiter.GetToken(ctx, cost)
		if err != nil {
			return nil, held, err
		}
		held.rel = rel
		return onSuccess(func() { _ = rel(); l.skips.Add(1) }), held, nil
	}
	avail, ok := l.bucket.take(cost)
	if !ok {
		return nil, held, &BudgetError{Available: avail, Requested: cost}
	}
	switch cost {
	case l.costs.retry:
		release = l.retryRefund
	case l.costs.throttle:
		release = l.throttleRefund
	default:
		release = l.refundOnSuccess(cost)
	}
	return release, held, nil
}

func (l *lane) remaining() uint {
	switch {
	case l.bucket != nil:
		return l.bucket.Remaining()
	case l.limiter != nil:
		if v, ok := l.limiter.(interface{ Remaining() uint }); ok {
			return v.Remaining()
		}
	}
	return 0
}

// onSuccess adapts fn to the SDK's release signature: it runs only when the
// attempt succeeded.
func onSuccess(fn func()) func(error) error {
	return func(err error) error {
		if err == nil {
			fn()
		}
		return nil
	}
}

// maxRetryAfterExtra is how far the SDK's middleware lets an x-amz-retry-after
// hint stretch a backoff.
const maxRetryAfterExtra = 5 * time.Second

// withRetryAfter returns the delay the SDK's retry middleware will sleep for
// backoff d: the x-amz-retry-after hint (milliseconds), clamped to
// [d, d+5s]; d when there is no valid hint.
func withRetryAfter(d time.Duration, err error) time.Duration {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return d
	}
	v := re.Response.Header.Get("X-Amz-Retry-After")
	if v == "" {
		return d
	}
	ms, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || ms < 0 {
		return d
	}
	hint := time.Duration(ms) * time.Millisecond
	if ms > int64(maxRetryAfterExtra/time.Millisecond)+int64(d/time.Millisecond)+1 {
		hint = d + maxRetryAfterExtra // also avoids overflow of huge hints
	}
	return min(max(hint, d), d+maxRetryAfterExtra)
}

// pendingRetries hands the deadline seen by GetRetryToken, which has the
// context, to RetryDelay, which has the attempt number: the SDK calls them
// one after the other with the same error value and gives neither both.
type pendingRetries struct {
	n  atomic.Int64 // entries in m, read without the lock on the hot path
	mu sync.Mutex
	m  map[error]pendingRetry
}

type pendingRetry struct {
	deadline time.Time
	held     heldTokens
}

// maxPending bounds the hand-off table should a caller take retry tokens
// without ever asking for the delay.
const maxPending = 4096

// handOffable reports whether err can key the hand-off table: only pointers,
// whose identity is the one value both calls see (a struct error could hold
// an uncomparable value and make the map panic).
func handOffable(err error) bool {
	return err != nil && reflect.TypeOf(err).Kind() == reflect.Pointer
}

func (p *pendingRetries) put(err error, v pendingRetry) {
	if !handOffable(err) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[error]pendingRetry{}
	}
	if len(p.m) >= maxPending {
		now := time.Now()
		for k, e := range p.m {
			if e.deadline.Before(now) {
				delete(p.m, k)
			}
		}
		if len(p.m) >= maxPending {
			p.n.Store(int64(len(p.m)))
			return
		}
	}
	p.m[err] = v
	p.n.Store(int64(len(p.m)))
}

func (p *pendingRetries) take(err error) (pendingRetry, bool) {
	if p.n.Load() == 0 || !handOffable(err) {
		return pendingRetry{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[err]
	if ok {
		delete(p.m, err)
		p.n.Store(int64(len(p.m)))
	}
	return v, ok
}
