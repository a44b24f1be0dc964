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
// token bucket and deadline-aware backoff. Build one with New (the zero value
// is not usable); each
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
// release adds NoRetryIncrement tokens to the bucket when an operation's
// first attempt succeeds (a successful retry refunds its own cost instead).
//
// With the send-rate limiter on, it first queues for its turn to send, and
// the release also reports the attempt's outcome (a success or a throttle)
// to the limiter. Unless DisableDeadlineGiveUp is set, it never waits past a
// deadline it can see: when the wait, plus DeadlineMargin, would end past
// ctx's deadline, at first or after a cut lengthens it, it fails with a
// *GiveUpError (GiveUpDeadline); when ctx is done during the wait, with a
// *GiveUpError (GiveUpCanceled). OnGiveUp sees both. It also fails for
// invalid options.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if r.err != nil {
		return nil, r.err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l := r.laneFor(ctx)
	if l.sender == nil {
		return l.onSuccess, nil
	}
	sentAt, err := r.waitToSend(ctx, l)
	if err != nil {
		return nil, err
	}
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

// waitToSend queues for a place in lane l's send queue and waits until it is
// due, asking again at least once a window and whenever the limiter wakes
// it (a cut, a rise, the first place given back in a window). It gives the
// place back and fails when the delay would end past ctx's visible deadline
// (unless deadline give-ups are off) or ctx ends first. It returns the time
// the place was found due: the send time.
func (r *Retryer) waitToSend(ctx context.Context, l *lane) (time.Time, error) {
	now := r.now()
	res := l.sender.ReserveAt(now)
	due := false
	defer func() {
		if !due { // an error, or a panicking OnSendWait
			l.sender.CancelAt(res, r.now())
		}
	}()
	reported := false
	for {
		wait, changed := l.sender.DelayAt(res, now)
		if wait <= 0 {
			due = true
			return now, nil
		}
		if deadline, ok := ctx.Deadline(); ok && r.deadlineGiveUp {
			if remaining := deadline.Sub(now); exceeds(wait, r.margin, remaining) {
				r.giveUp(GiveUpEvent{Reason: GiveUpDeadline, Partition: l.key})
				return time.Time{}, &GiveUpError{Reason: GiveUpDeadline, Delay: wait, Remaining: remaining}
			}
		}
		if !reported && r.onSendWait != nil {
			r.onSendWait(SendWaitEvent{Partition: l.key, Wait: wait, Rate: l.sender.Rate()})
			reported = true
		}
		if err := sleepUntilChanged(ctx, min(wait, l.sender.window), changed); err != nil {
			r.giveUp(GiveUpEvent{Reason: GiveUpCanceled, Partition: l.key})
			return time.Time{}, &GiveUpError{Reason: GiveUpCanceled, Context: err}
		}
		now = r.now()
	}
}

// GetInitialToken is the deprecated form of GetAttemptToken, for callers that
// still use aws.Retryer. Having no context, it always uses the bucket of
// partition "" and never waits for the send-rate limiter.
//
// Deprecated: use GetAttemptToken.
func (r *Retryer) GetInitialToken() func(error) error {
	return r.main.onSuccess
}

// GetRetryToken takes the cost of a retry after opErr from the bucket:
// ThrottlingRetryCost for a throttle, RetryCost otherwise. The returned
// release refunds the cost when the retry succeeds; if ctx ends during the
// backoff, before the retry is sent, the cost is refunded too. It fails with a
// *BudgetError when the bucket is empty, after waiting the first retry's
// backoff unless FailFastOnEmptyBudget is set (never past ctx's deadline),
// and with a *GiveUpError when ctx is already done; both wrap opErr. A nil
// ctx counts as context.Background().
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	if r.err != nil {
		return nil, r.err
	}
	if ctx == nil {
		ctx = context.Background()
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
		release, held = r.refundIfAbandoned(ctx, release, held)
		p := pendingRetry{held: held}
		if deadline, ok := ctx.Deadline(); ok && r.deadlineGiveUp {
			p.deadline, p.hasDeadline = deadline, true
		}
		r.pending.put(opErr, p)
	}
	return release, nil
}

// refundIfAbandoned gives a retry's tokens back when ctx ends before the
// retry is released. The SDK's middleware returns a retry token's release
// when the backoff sleep is cancelled but never calls it, so without this a
// cancelled caller's tokens would be gone until successes earn them back
// (with no refill, for good). Whichever comes first, the release or the
// refund, claims the tokens; the other does nothing.
//
// Once RetryDelay has fixed the backoff, the refund applies only while the
// backoff lasts: a retry that was sent has spent its tokens, as in the SDK,
// even if its context ends before the middleware releases it.
func (r *Retryer) refundIfAbandoned(ctx context.Context, release func(error) error, held heldTokens) (func(error) error, heldTokens) {
	held.abandon = &abandonment{}
	a := held.abandon
	a.stop = context.AfterFunc(ctx, func() {
		if w := a.wakeAt.Load(); w != 0 && r.now().UnixNano() >= w {
			return // the retry was sent: its tokens are spent
		}
		held.refund()
	})
	return func(err error) error {
		a.stop()
		if !a.claimed.CompareAndSwap(false, true) {
			return nil
		}
		return release(err)
	}, held
}

// abandonment is the state a retry's release and its refund on an ended
// context share.
type abandonment struct {
	claimed atomic.Bool
	wakeAt  atomic.Int64 // when the backoff ends, in Unix nanoseconds; 0 until RetryDelay
	stop    func() bool
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
	if deadline, ok := ctx.Deadline(); ok && exceeds(d, r.margin, deadline.Sub(r.now())) {
		return
	}
	_ = sleep(ctx, d)
}

// RetryDelay returns the backoff before the retry that follows the failed
// attempt number attempt (1-based). When the operation's context has a
// deadline and the backoff, after the service's x-amz-retry-after hint, plus
// DeadlineMargin would end past it, RetryDelay refunds the retry's tokens and
// returns a *GiveUpError that wraps opErr instead of a delay.
//
// The SDK gives GetRetryToken the context and RetryDelay the attempt number,
// calling one right after the other with the same error value; the deadline
// is handed from one to the other keyed by that error, so the check applies
// when the error is a pointer (every error the SDK's middleware produces is)
// and at most 4096 retries are between the two calls at once. For a
// long-polling operation whose budget is empty, the SDK calls RetryDelay
// after a failed GetRetryToken; OnRetry then reports a retry that is not made.
func (r *Retryer) RetryDelay(attempt int, opErr error) (time.Duration, error) {
	if r.err != nil {
		return 0, r.err
	}
	p, handedOff := r.pending.take(opErr)
	d, err := r.backoff.BackoffDelay(attempt, opErr)
	if err != nil {
		if handedOff {
			p.held.refund()
		}
		return 0, err
	}
	if handedOff {
		now := r.now()
		wait := withRetryAfter(d, opErr)
		if remaining := p.deadline.Sub(now); p.hasDeadline && exceeds(wait, r.margin, remaining) {
			p.held.refund()
			r.giveUp(GiveUpEvent{Reason: GiveUpDeadline, Attempt: attempt, Partition: p.held.lane.key, Err: opErr})
			return 0, &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Delay: wait, Remaining: remaining, Err: opErr}
		}
		if a := p.held.abandon; a != nil {
			a.wakeAt.Store(now.Add(wait).UnixNano())
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
	if key == "" {
		return r.main.remaining(), true
	}
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

	// With a context that can end: shared with the release, so that the
	// tokens are claimed once.
	abandon *abandonment
}

// refund gives the tokens back, unless a release or an earlier refund has
// claimed them.
func (h heldTokens) refund() {
	if a := h.abandon; a != nil {
		a.stop()
		if !a.claimed.CompareAndSwap(false, true) {
			return
		}
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
	deadline    time.Time
	hasDeadline bool
	held        heldTokens
}

// exceeds reports whether a wait plus margin would end past remaining,
// without overflow for any values.
func exceeds(wait, margin, remaining time.Duration) bool {
	if remaining <= 0 {
		return true
	}
	return wait > remaining-margin
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
		// Entries whose claim is settled, or whose deadline passed, will
		// never be needed.
		now := time.Now()
		for k, e := range p.m {
			settled := e.held.abandon != nil && e.held.abandon.claimed.Load()
			if settled || (e.hasDeadline && e.deadline.Before(now)) {
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
