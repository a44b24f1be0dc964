package jitterretry

// This file owns the Retryer: its construction and the aws.RetryerV2
// methods the SDK's retry middleware calls.

import (
	"context"
	"reflect"
	"runtime"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jitterretry/jitterretry/delayers"
)

var _ aws.RetryerV2 = (*Retryer)(nil)

// Retryer is an aws.RetryerV2 with selectable jitter, a client-side retry
// token bucket and deadline-aware backoff. Build one with New. It is safe for
// concurrent use by multiple goroutines.
//
// Each Retryer has its own bucket: give each client its own (a new one in
// each call of the config.WithRetryer function), unless the clients should
// share one budget. The zero value refuses every operation with an
// *OptionsError; it never panics.
type Retryer struct {
	err error // invalid options, or the zero value: every operation fails with it

	maxAttempts      int // as the SDK reads it: 0 means no limit
	backoff          retry.BackoffDelayer
	delayer          delayers.Delayer // backoff, when it is one of ours; nil otherwise
	maxBackoff       time.Duration    // Options.MaxBackoff: Do's conflict cap beside a Backoff of the caller's
	pacedThrottles   bool             // a throttle the send-rate limiter paces backs off from BaseDelay
	source           delayers.Source  // nil: the runtime's generator
	classes          *classifier
	costs            costs
	lanes            *lanes
	handoff          *handoff
	classCache       *classCache
	tracked          *tracked
	now              func() time.Time
	hooks            hooks
	fixedMargin      time.Duration
	noDeadlineGiveUp bool
	failFast         bool
}

// errZeroRetryer is the error of every operation of a Retryer not built
// with New.
var errZeroRetryer = &OptionsError{Option: "Retryer", Reason: "a nil or zero Retryer is not usable; build one with jitterretry.New"}

// New returns a Retryer configured by optFns over the SDK's standard
// defaults (see Options). It never fails: invalid options give a Retryer
// whose Err reports an *OptionsError and that fails every operation with it,
// so that New can be used inline in config.WithRetryer. Check Err at
// startup.
//
// A Retryer is meant to be shared: by every operation of a client, or of
// several. It costs about 12 KB in 52 allocations and 7 µs to make
// (retry.NewStandard: 0.7 KB, under 1 µs; BenchmarkNew). Its first retry
// makes some 170 KB more (mostly the hand-off table), and each retry
// waiting in its backoff at once with a context that can end takes a slot
// of about 150 bytes, kept for reuse (0.8 MB in all after 4,096), so one
// per operation costs that per request, and gives every operation a bucket
// of its own, as retry.NewStandard per operation does.
func New(optFns ...func(*Options)) *Retryer {
	o := defaultOptions()
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	// The send-rate limiter reads the monotonic clock alone (see
	// sendRate.clock) unless the caller gave a clock of their own.
	limiterClock := o.Clock
	if reflect.ValueOf(o.Clock).Pointer() == reflect.ValueOf(time.Now).Pointer() {
		limiterClock = nil
	}
	// The caller's slices may be appended to later; keep copies.
	o.Retryables = append([]retry.IsErrorRetryable(nil), o.Retryables...)
	o.Throttles = append([]retry.IsErrorThrottle(nil), o.Throttles...)

	r := &Retryer{
		maxAttempts:      max(o.MaxAttempts, 0),
		source:           o.Source,
		classes:          newClassifier(o.Retryables, o.Throttles),
		costs:            costs{retry: o.RetryCost, throttle: o.ThrottlingRetryCost, success: o.NoRetryIncrement},
		handoff:          &handoff{},
		classCache:       &classCache{},
		tracked:          newTracked(o.Clock),
		now:              o.Clock,
		hooks:            hooks{onRetry: o.OnRetry, onGiveUp: o.OnGiveUp},
		fixedMargin:      o.DeadlineMargin,
		noDeadlineGiveUp: o.DisableDeadlineGiveUp,
		failFast:         o.FailFastOnEmptyBudget,
		maxBackoff:       o.MaxBackoff,
	}
	r.err = o.validate()
	if r.err == nil {
		r.backoff, r.err = o.newBackoff(retry.IsErrorThrottleFunc(r.classes.isThrottle))
	}
	if r.err != nil {
		return r.refuseAll(r.err)
	}
	if o.Backoff == nil {
		// Our own delayer: its throttle check is the classifier's, whose
		// class the retryer knows already. A delayer of the caller's
		// keeps its own check (BackoffDelay), as the SDK's Backoff does.
		r.delayer, _ = r.backoff.(delayers.Delayer)
	}
	// A Backoff of the caller's computes every delay, throttles' included.
	r.pacedThrottles = o.SendRate != nil && o.ThrottleBaseDelay == defaultThrottleBaseDelay && o.Backoff == nil
	if o.SendRate != nil {
		sr := *o.SendRate
		o.SendRate = &sr
	}
	classes := r.classes
	r.lanes = newLanes(laneConfig{
		costs:        r.costs,
		capacity:     o.BucketCapacity,
		refill:       o.BucketRefill,
		foreign:      o.RateLimiter,
		sendRate:     o.SendRate,
		now:          o.Clock,
		limiterClock: limiterClock,
		partition:    o.PartitionKey,
		// Not a method value of r: the metrics' gauges hold the lanes, and
		// must not keep r alive (see below).
		rateSignal: func(err error) (throttled, counted bool) {
			return classes.rateSignal(err)
		},
		isConflict: func(err error) bool {
			return classes.classify(err) == ClassConflict
		},
	})
	// The sweep's timer holds the Retryer weakly: a retryer made per
	// operation and dropped after one retry must not live on (some 20 KB
	// of tables, 200 KB once they are made whole) until its timer fires,
	// nor for good under a Clock that creeps so that its hand-offs never
	// go stale. A Retryer from New is on the heap, where weak.Make is safe
	// on every Go this module takes.
	self := weak.Make(r)
	r.handoff.onSweep = func() {
		if r := self.Value(); r != nil {
			r.sweepHandoff()
		}
	}
	meter, gauges, err := newMeter(o.MeterProvider, r.lanes, r.tracked.reclaim)
	if err != nil {
		return r.refuseAll(err)
	}
	r.hooks.meter = meter
	if len(gauges) > 0 {
		// A retryer made per client (config.WithRetryer) and dropped must
		// stop being observed: the provider would otherwise report its
		// buckets, and keep its lanes, for as long as the provider lives.
		runtime.AddCleanup(r, stopGauges, gauges)
	}
	return r
}

// refuseAll makes r the Retryer New returns for invalid options: one that
// fails every operation with err, on its first attempt.
func (r *Retryer) refuseAll(err error) *Retryer {
	r.err, r.maxAttempts = err, 1
	return r
}

// ready returns the error every operation fails with, or nil.
func (r *Retryer) ready() error {
	switch {
	case r == nil || (r.err == nil && r.lanes == nil):
		return errZeroRetryer
	case r.err != nil:
		return r.err
	}
	return nil
}

// Err returns the *OptionsError that New found in its options (or that a
// zero Retryer has), or nil.
func (r *Retryer) Err() error { return r.ready() }

// MaxAttempts returns the most attempts an operation makes, or 0 for no
// limit (UnlimitedAttempts), as the SDK's retry middleware reads it. Invalid
// options and the zero value give 1.
func (r *Retryer) MaxAttempts() int {
	if r.ready() != nil {
		return 1
	}
	return r.maxAttempts
}

// IsErrorRetryable reports whether err may be retried, by the SDK's default
// rules with the README's documented differences: a cancelled context is
// never retried, API errors are not searched for words, and conflicts
// (ClassConflict) are left to Do. OnGiveUp sees a refusal with reason
// GiveUpNotRetryable, but not for a conflict, nor for a DynamoDB transaction
// cancelled for throttles only: Do retries those, so they are not
// refusals; an attempt the caller's context ended (its deadline, a cancel)
// is reported as GiveUpCanceled, with the context's error. Having no
// context, such a refusal carries no service, operation or partition in
// the metrics.
func (r *Retryer) IsErrorRetryable(err error) bool {
	if r.ready() != nil || err == nil {
		return false
	}
	info := r.classes.inspect(err)
	switch info.class {
	case ClassTransient, ClassThrottle:
		r.classCache.store(err, keyHash(err), info) // for the GetRetryToken that follows
		return true
	}
	if info.refused() && r.hooks.reportsGiveUps() {
		g := &GiveUpError{Reason: GiveUpNotRetryable, Err: err}
		if info.ended != nil {
			g.Reason, g.ctxErr = GiveUpCanceled, info.ended // the caller's to end
		}
		r.hooks.refuse(err, g)
	}
	return false
}

// GetAttemptToken is called by the SDK before every attempt. The returned
// release adds NoRetryIncrement tokens to the bucket when an operation's
// first attempt succeeds (a successful retry refunds its own cost instead),
// and times a sample of the attempts for the learnt deadline margin.
//
// With the send-rate limiter on, it first waits for its turn to send, and
// the release also reports the attempt's outcome (a success or a throttle)
// to the limiter. It never waits past a deadline it can see (unless
// DisableDeadlineGiveUp): when the wait, plus the time the operation's
// attempts take (Options.DeadlineMargin when set; not the retries' twice
// that), would end past ctx's deadline, at first or after a cut lengthens
// it, it holds its place until the deadline less that time and 5 ms, in
// case the queue speeds up, and then fails with a *GiveUpError
// (GiveUpDeadline) unless served; when ctx is done during the wait, with
// a *GiveUpError (GiveUpCanceled). A nil ctx counts
// as context.Background().
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if err := r.ready(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// The SDK service, looked up once (27 ns), for the limiter's lane and
	// the gauges' note of it.
	var service string
	if r.lanes.cfg.sendRate != nil || r.hooks.meter != nil {
		service = awsmiddle.GetServiceID(ctx)
	}
	l := r.lanes.getFor(ctx, r.lanes.paceOf(ctx, service))
	if r.hooks.meter != nil {
		l.noteService(service)
	}
	release := l.attemptRelease
	if l.sender != nil {
		if err := r.waitToSend(ctx, l); err != nil {
			return nil, err
		}
		release = l.sendRelease
	}
	release = l.attempts.measure(ctx, release, r.hooks.loops.Load() > 0)
	if r.hooks.loops.Load() > 0 {
		markClient(ctx, &r.hooks, &l.attempts)
		// Every lane, paced or not: a call past its partition's services
		// (see lane.serviceLane) was judged by the loop's own lane, whose
		// limiter never saw it (helper-227).
		markLane(ctx, &r.hooks, l)
	}
	if r.hooks.loops.Load() > 0 {
		// IsErrorRetryable, which follows the release, reports a refusal
		// with no context: the Do loop learns of it here; and of a
		// throttle the limiter counted, which makes the loop's own
		// throttle a near miss (see throttleBackoff).
		failures := r.hooks.reportsGiveUps()
		var counted *classifier
		if l.sender != nil {
			counted = r.classes
		}
		if m := loopMarkOf(ctx).ownedBy(&r.hooks); m != nil && (failures || counted != nil) {
			release = m.watchFailures(release, failures, counted, l)
		}
	}
	return release, nil
}

// GetInitialToken is the form of GetAttemptToken for callers of the older
// aws.Retryer interface, such as a decorator that hides the RetryerV2
// methods. Having no context, it uses the shared partition and never waits
// for the send-rate limiter; as the SDK's, its release adds NoRetryIncrement
// on every successful attempt, to the shared partition: with
// Options.PartitionKey, a partition earns back only its successful retries'
// refunds here, and once spent below a retry's cost refuses its operation's
// retries for good, unless Options.BucketRefill is set. Keep RetryerV2 in
// such a decorator (embed aws.RetryerV2). For a minute after each call, a
// throttle's retry on an empty bucket is refused as after any other error,
// in every partition, even while the limiter holds callers back (see
// GetRetryToken), and no retry that GetRetryToken and RetryDelay admit
// goes ahead of first attempts in the limiter's queue: its next attempt
// might not wait its turn. (A Do loop's retry still may: its attempt is
// one that waits.) Its attempts are not timed: the deadline margin learnt
// per operation (see Options.DeadlineMargin) learns nothing from them: a
// retryer called only through this path keeps a margin of 0, as the SDK's,
// unless DeadlineMargin is set.
func (r *Retryer) GetInitialToken() func(error) error {
	if r.ready() != nil {
		return func(error) error { return nil }
	}
	return r.lanes.initialRelease()
}

// GetRetryToken pays for a retry after opErr from the bucket:
// ThrottlingRetryCost for a throttle, RetryCost otherwise. The returned
// release refunds the cost when the retry succeeds; if ctx ends during the
// backoff, before the retry is sent, the cost is refunded too.
//
// It fails with a *GiveUpError when ctx is done (GiveUpCanceled), when the
// shortest wait the service allows (its x-amz-retry-after hint; none
// without one) and the margin would end past ctx's deadline
// (GiveUpDeadline: after a throttle, once the caller was held, as the
// SDK's sleep into the deadline would hold it, for 1 s at most: until the
// deadline less the margin and 5 ms, or, when that comes sooner, until half
// the time left less 5 ms has passed (a margin as long as the deadline
// refused at once, and closed loops spun);
// GiveUpCanceled if ctx ends during the hold; the backoff itself is drawn
// later, and RetryDelay refuses one that would pass the deadline, giving
// the cost back), and
// when the bucket is empty (GiveUpBudget), after waiting the first retry's
// backoff unless FailFastOnEmptyBudget is set (never past the deadline).
// The wait ends at the deadline less the margin and 5 ms when the backoff
// would pass that, but not before half the time left less 5 ms has passed
// (see the hold of a deadline's refusal above). When tokens came back during a whole backoff's wait
// (first-attempt successes', a refill's, or those of retries abandoned by
// their callers; to a custom RateLimiter, which is asked again only then,
// the last), the retry goes ahead instead,
// and RetryDelay's backoff is shorter by the wait (after a wait cut short
// they are left to others: the backoff cannot fit); when the caller leaves
// before or during the wait, the refusal is GiveUpCanceled, and when the
// deadline ends it (a machine too busy to wake it in time), still
// GiveUpBudget. A throttle's retry in a partition whose send-rate
// limiter holds callers back (see Options.SendRate) is not refused when the
// bucket holds less than its cost, unless FailFastOnEmptyBudget or
// RateLimiter is set, or GetInitialToken was called in the last minute: it takes no
// tokens (and its release gives none back) and waits its turn at the
// limiter in the next GetAttemptToken.
// The SDK's middleware joins the error with opErr, so it does not repeat
// opErr in its message. A nil ctx counts as context.Background().
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	if err := r.ready(); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	l := r.lanes.get(ctx)
	hash := keyHash(opErr)
	info, cached := r.classCache.load(opErr, hash)
	if !cached {
		info = r.classes.inspect(opErr)
	}
	class := r.classes.retryClass(opErr, info.class)
	cost := r.costs.retry
	if class == ClassThrottle {
		cost = r.costs.throttle
	}
	p := pendingRetry{ctx: ctx, lane: l, class: class, hint: info.hint, margin: info.cut, paced: r.lanes.attemptsWait()}
	if p.deadline, p.hasDeadline = r.deadline(ctx); p.hasDeadline {
		p.margin, p.cutMargin = r.marginAfter(ctx, l, info)
	}
	if gerr := r.admit(&p, 0, 0, opErr, cost, true); gerr != nil {
		if gerr.Reason == GiveUpBudget && !r.failFast {
			// A long-polling operation asks RetryDelay for its backoff
			// after a refusal; admit has backed off already, unless the
			// deadline was too close. Under FailFastOnEmptyBudget
			// nothing is handed off, and RetryDelay answers a refused
			// long poll as a retry, as retry.NewStandard() does: handed
			// off, a refusal left every retry of its error value for a
			// second unchecked, and its error and context kept
			// (helper-258), for the few operations that ask.
			r.put(opErr, hash, &pendingRetry{lane: l, class: class, hint: info.hint, at: r.now(), deadline: p.deadline, hasDeadline: p.hasDeadline, refused: true, waited: gerr.waited})
		}
		return nil, gerr
	}
	// RetryDelay learns the class, the response and the lane from the
	// hand-off rather than walk the error again.
	release := p.paid.release
	// A context with a deadline can end; asking Done only when there is
	// none spares a fresh context the channel it makes on first use. A
	// retry that took nothing (a cost of 0, a throttle's retry the
	// send-rate limiter paces) has nothing to give back, and would only
	// take a slot from one that has.
	if (p.paid.cost > 0 || p.paid.foreign != nil) && (p.hasDeadline || ctx.Done() != nil) {
		if ref, tracked := r.tracked.track(ctx, p.paid, p.at, hash); ref.slot != nil {
			p.ticket, p.paid, release = ref, ticket{}, tracked
		}
	}
	r.put(opErr, hash, &p)
	return release, nil
}

// put hands p off to the RetryDelay that follows, and counts the deadline
// checks of the entries it evicted (see handoff.put).
func (r *Retryer) put(opErr error, hash uintptr, p *pendingRetry) {
	if evicted, partition := r.handoff.put(opErr, hash, p, r.now); evicted > 0 {
		r.countEvicted(evicted, partition)
	}
	r.handoff.armSweep()
}

// sweepHandoff sweeps the hand-off table on its timer (see handoff.sweep),
// sets the timer again while there is more to drop, and counts the checks
// of the entries it dropped. The timer runs it on a goroutine of its own,
// where a panic would end the process: a MeterProvider that panics loses
// the count it was given, not the others nor the sweeps.
func (r *Retryer) sweepHandoff() {
	r.handoff.disarmSweep() // first: a put from here on sets the timer again
	swept, left := r.handoff.sweep()
	if left {
		r.handoff.armSweep()
	}
	for _, c := range swept {
		r.countSwept(c)
	}
}

// countSwept counts the checks c of entries a sweep dropped, recovering a
// panic of the MeterProvider's.
func (r *Retryer) countSwept(c sweptChecks) {
	defer func() { _ = recover() }()
	r.countEvicted(c.n, c.partition)
}

// countEvicted counts n deadline checks of partition's retries that the
// hand-off evicted unmade.
func (r *Retryer) countEvicted(n int, partition string) {
	if r.hooks.meter != nil {
		r.hooks.meter.uncheckedEvictions(partition, n)
	}
}

// RetryDelay returns the backoff before the retry that follows the failed
// attempt number attempt (1-based). When GetRetryToken saw a deadline and
// the backoff, after the service's x-amz-retry-after hint, plus the deadline
// margin would end past it, RetryDelay refunds the retry's tokens and
// returns a *GiveUpError (GiveUpDeadline) that wraps opErr instead of a
// delay; the SDK's middleware returns it as the operation's error.
//
// The SDK gives GetRetryToken the context and RetryDelay the attempt number,
// so the retryer pairs the two calls by their error value (see
// RetryEvent.Unchecked for when it cannot). After GetRetryToken refused a
// retry and backed off (a long-polling operation asks for a delay then),
// RetryDelay returns what is left of the attempt's backoff, or, when that
// would end past the deadline, a *GiveUpError (GiveUpDeadline), so that the
// middleware returns the refusal at once instead of sleeping. Under
// FailFastOnEmptyBudget a refusal hands nothing off: RetryDelay answers it
// as a retry's, as retry.NewStandard() does (see the README's long-polling
// row).
func (r *Retryer) RetryDelay(attempt int, opErr error) (time.Duration, error) {
	if err := r.ready(); err != nil {
		return 0, err
	}
	p, status, check := r.handoff.take(opErr, r.now)
	if status != handoffFound {
		info := r.classes.inspect(opErr)
		p.class, p.hint = r.classes.retryClass(opErr, info.class), info.hint
		p.margin, p.cutMargin = r.marginAfter(nil, nil, info)
	}
	if status == handoffFound && p.refused {
		return r.refusedDelay(attempt, opErr, &p)
	}
	// A Backoff or Clock that panics (a bug a server may recover from) must
	// not keep the tokens of the retry it stopped, as OnRetry's must not
	// (see schedule): each recovered panic kept 14 (helper-161, helper-163).
	// A refund is idempotent: schedule's own, of a refusal, leaves nothing.
	scheduled := false
	defer func() {
		if !scheduled {
			p.refund(r.tracked)
		}
	}()
	d, err := r.backoffFor(attempt, opErr, p.class, p.lane, !p.uncounted)
	if err != nil {
		return 0, err
	}
	d = max(d-p.waited, 0) // GetRetryToken waited that long for tokens
	wait, gerr := r.schedule(&p, attempt, opErr, d, check)
	if gerr == nil && p.lane != nil && p.lane.sender != nil && r.lanes.attemptsWait() {
		// The retry's attempt, which waited its turn once already, goes
		// ahead of first attempts (see expectedRetries), once the wait
		// the middleware sleeps, with an x-amz-retry-after hint, ended.
		// Not while attempts through GetInitialToken, which never wait,
		// are made: nothing would claim the entries. Before the retry
		// counts as scheduled: the limiter reads the Clock, and a panic
		// there kept the retry's tokens (helper-235).
		p.lane.sender.expectRetry(p.ctx.Done(), wait, failedAttempt{opErr, attempt})
	}
	scheduled = true
	if gerr != nil {
		return 0, gerr
	}
	return d, nil
}

// refusedDelay is the backoff the SDK's middleware asks a long-polling
// operation's retryer for after GetRetryToken refused its retry p on an
// empty budget, and sleeps before returning the refusal: what is left of the
// backoff of failed attempt attempt, of p's class, after the wait
// GetRetryToken made before refusing (with jitter, the two are separate
// draws, so the operation waits the longer of them). When that wait, after
// the x-amz-retry-after hint as the middleware applies it, would end past
// the deadline, it returns a *GiveUpError (GiveUpDeadline) instead, so that
// the middleware returns the refusal at once rather than sleep until the
// context ends.
func (r *Retryer) refusedDelay(attempt int, opErr error, p *pendingRetry) (time.Duration, error) {
	d, err := r.backoffFor(attempt, opErr, p.class, p.lane, !p.uncounted)
	if err != nil {
		return 0, err
	}
	d = max(d-p.waited, 0)
	if p.hasDeadline {
		if wait, remaining := p.hint.wait(d), p.deadline.Sub(r.now()); exceeds(wait, 0, remaining) {
			return 0, &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Partition: p.lane.key, Delay: wait, remaining: remaining, Err: opErr, drawn: true, backoff: d}
		}
	}
	return d, nil
}

// backoffFor returns the backoff after failed attempt attempt with opErr, of
// class class, in lane l (nil when unknown): without classifying opErr again
// when the delayer is ours. A throttle that the lane's send-rate limiter
// counted (see throttleBackoff), while it paces with few throttles, backs
// off as any other error (see Options.ThrottleBaseDelay).
func (r *Retryer) backoffFor(attempt int, opErr error, class ErrorClass, l *lane, counted bool) (time.Duration, error) {
	if r.delayer != nil {
		return r.delayer.Delay(attempt, r.throttleBackoff(class, l, counted)), nil
	}
	return r.backoff.BackoffDelay(attempt, opErr)
}

// throttleBackoff reports whether a failure of class class in lane l (nil
// when unknown) backs off on the throttle base: a throttle, unless the
// lane's send-rate limiter paces it with few throttles and counted it
// (counted): an attempt's answer, as every throttle the SDK's middleware
// retries is, or, for a Do loop, an attempt of fn's call answered with a
// throttle the limiter counted. A throttle it never saw, one a Do loop
// found in a success (a BatchWriteItem's UnprocessedItems, answered with a
// 200, classed a throttle by Classify, by Options.Throttles, or made into
// a throttle's error by fn), is not a near miss the limiter measured:
// backed off from BaseDelay, 16 such loops sent three times the requests
// of the loops without the limiter and emptied the budget (helper-198;
// judged by the error's type, the last two still were: helper-201).
func (r *Retryer) throttleBackoff(class ErrorClass, l *lane, counted bool) bool {
	return class == ClassThrottle && !(counted && r.pacedThrottles && l != nil && l.sender != nil && l.sender.paces())
}

// Remaining returns the tokens left in the retry token bucket of the shared
// partition (""), or what a custom RateLimiter reports through a
// Remaining() uint method (0 when it has none), after giving back the
// tokens of retries abandoned with their context: of those whose context a
// sweep saw end during their backoff, at once; of those first seen after
// their backoff would have ended (the retry may have been sent, and then
// releases its tokens itself), once 50 ms have passed since.
// Per-partition figures are in the retryer's metrics.
func (r *Retryer) Remaining() uint {
	if r.ready() != nil {
		return 0
	}
	_ = r.tracked.reclaim()
	return r.lanes.main.remaining()
}
