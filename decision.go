package jitterretry

// This file owns the retry decision: whether a retry goes ahead, what it
// costs and how long it waits. GetRetryToken and RetryDelay (the SDK's
// middleware) and Do run the same two steps, admit and schedule; only where
// the backoff comes from and who sleeps differ.

import (
	"context"
	"math"
	"time"
)

// admit is the first step of a retry after opErr failed attempt number
// attempt (0 when the SDK does not say), the failure-th of the operation
// that its backoffs count (Do counts no conflicts; 0: not known, taken as
// the first); p holds the retry's context, lane,
// class, x-amz-retry-after hint, margin and deadline. It refuses a retry
// whose context is done, or whose deadline is too close for even the
// shortest wait (the hint alone) plus the margin, and pays cost from the
// lane's bucket. On an empty bucket it first reclaims the tokens of retries
// abandoned with their context, then backs off once (unless
// FailFastOnEmptyBudget), takes the tokens that came back meanwhile if
// they are enough, and otherwise refuses.
//
// On success it records the paid ticket, the cost and the time it read,
// when it read one (for a deadline), in p.
//
// joined says that the SDK's middleware will join the refusal with opErr, so
// its message leaves opErr out.
func (r *Retryer) admit(p *pendingRetry, attempt, failure int, opErr error, cost uint, joined bool) *GiveUpError {
	ctx, l := p.ctx, p.lane
	if p.class == ClassThrottle {
		markThrottle(ctx) // for the Do loop whose fn made this call, if any
		l.bucketOwner().throttles.note()
	}
	if err := ctx.Err(); err != nil {
		return r.hooks.giveUp(ctx, canceledGiveUp(attempt, l.key, opErr, err, joined))
	}
	if p.hasDeadline {
		p.at = r.now()
		if wait, remaining := p.hint.wait(0), p.deadline.Sub(p.at); exceeds(wait, p.margin, remaining) {
			return r.refuseForDeadline(p, &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Partition: l.key, Delay: wait, margin: p.margin, cutMargin: p.cutMargin, remaining: remaining, Err: opErr, joined: joined})
		}
	}
	forConflict := p.class == ClassConflict // its release refunds no conflict's answer
	release, foreign, refused, ok := l.take(ctx, cost, forConflict)
	if ok && p.hasDeadline && l.bucket == nil {
		// A foreign RateLimiter's GetToken may have blocked: the deadline
		// check and the hand-off count from now.
		p.at = r.now()
	}
	if !ok && r.tracked.reclaim() {
		// Tokens of retries abandoned with their context came back.
		release, foreign, refused, ok = l.take(ctx, cost, forConflict)
	}
	if !ok && p.paced && p.class == ClassThrottle && !r.failFast && l.ownBucket && l.sender != nil && l.sender.holdsBack() {
		// The limiter holds the partition's callers back, at a rate it
		// cuts on these throttles: a throttle's retry waits its turn
		// behind them, and cannot add to a storm the budget would have
		// to stop. Only a retry whose attempt will wait: Do's fn need not
		// call the SDK at all.
		release, cost, ok = l.pacedRetryRelease, 0, true
	}
	if !ok {
		waited, shortened, err := r.backOffBeforeFailing(ctx, max(failure, 1), opErr, p.class, p.margin, l, !p.uncounted)
		// Tokens may have come back during the wait: first-attempt
		// successes' (a service that recovered), a refill's, or an
		// abandoned retry's, which a sweep refunds reclaimGrace after it
		// first sees its context done (the wait gave the one above that
		// time). Refused anyway, every caller waiting when a failing
		// service recovered failed for the budget (an outside review:
		// one per worker, up to 54 ms after the recovery, the bucket
		// full again). A custom RateLimiter, whose level the retryer
		// cannot see, is asked again only when abandoned retries gave it
		// tokens back: asked after every wait, it counted each refusal
		// twice, and one that blocks for a token would block twice
		// (helper-148). After a wait cut short by the deadline the retry's
		// backoff does not fit: the tokens are left to others, and the
		// budget refuses.
		if err == nil && waited > 0 && !shortened && (r.tracked.reclaim() || l.ownBucket) {
			release, foreign, refused, ok = l.take(ctx, cost, forConflict)
		}
		if err == nil && !ok && !shortened {
			// A custom RateLimiter that waits for a token refuses when
			// the caller leaves. (After a wait cut short, the deadline
			// the wait was cut for may have come: the budget refused.)
			err = ctx.Err()
		}
		if err != nil {
			// The caller left, during the wait or the limiter's: that,
			// not the budget, ends the operation.
			return r.hooks.giveUp(ctx, canceledGiveUp(attempt, l.key, opErr, err, joined))
		}
		if !ok {
			return r.hooks.giveUp(ctx, &GiveUpError{Reason: GiveUpBudget, Attempt: attempt, Partition: l.key, Err: opErr, available: refused.available, requested: cost, limiterErr: refused.err, joined: joined, waited: waited})
		}
		// Admitted after all: the backoff is shorter by the wait, and the
		// deadline check that follows must count from now.
		p.waited = waited
		if p.hasDeadline {
			p.at = r.now()
		}
	}
	p.paid, p.cost = ticket{lane: l, cost: cost, foreign: foreign, release: release, forConflict: forConflict}, cost
	return nil
}

// schedule is the second step: given the backoff drawn for the retry (p
// holds its lane, class, response, deadline and margin), it
// works out what will be slept (after the x-amz-retry-after hint, as the
// SDK's middleware applies it), refuses and refunds a wait that would end,
// with p's margin, past the deadline, and otherwise notes when the backoff
// ends and reports the retry. It returns the wait.
func (r *Retryer) schedule(p *pendingRetry, attempt int, opErr error, backoff time.Duration, check skippedCheck) (time.Duration, *GiveUpError) {
	wait := p.hint.wait(backoff)
	partition := ""
	if p.lane != nil {
		partition = p.lane.key
	}
	if p.hasDeadline || p.ticket.slot != nil {
		// The clock read in GetRetryToken, microseconds ago under the SDK's
		// middleware, is good enough and saves a read.
		now := p.at
		if now.IsZero() {
			now = r.now()
		}
		if remaining := p.deadline.Sub(now); p.hasDeadline && exceeds(wait, p.margin, remaining) {
			p.refund(r.tracked)
			return 0, r.refuseForDeadline(p, &GiveUpError{Reason: GiveUpDeadline, Attempt: attempt, Partition: partition, Delay: wait, margin: p.margin, cutMargin: p.cutMargin, remaining: remaining, Err: opErr, drawn: true, backoff: backoff, fits: p.fits && wait == backoff})
		}
		r.tracked.backoffEnds(p.ticket, now.Add(wait))
	}
	// OnRetry must not panic; one that does (a bug a server may recover
	// from) must not keep the tokens of the retry it stopped: under a
	// context that cannot end, no sweep would give them back.
	reported := false
	defer func() {
		if !reported {
			p.refund(r.tracked)
		}
	}()
	r.hooks.retry(p.ctx, RetryEvent{Attempt: attempt, Delay: wait, Class: p.class, Partition: partition, Err: opErr, Unchecked: check.skipped}, p.cost, p.lane, check.counted)
	reported = true
	return wait, nil
}

// marginAfter is the margin of a retry of the operation of ctx on lane l
// after an attempt whose error inspect found info: Options.DeadlineMargin
// when set, or the learnt margin; at least the attempt's limit after
// AttemptTimeout cut it at the operation's deadline, which is about all the
// time the operation had, so that no retry follows; and, after a stall cut
// at the attempt's own limit, which says nothing of the next attempt's
// time, with AttemptTimeout's reserve on top, so that the next attempt, if
// it stalls too, is cut before the deadline and the refusal names the cut.
//
// cut reports that the cut at the deadline set it, which a refusal says.
func (r *Retryer) marginAfter(ctx context.Context, l *lane, info errorInfo) (m time.Duration, cut bool) {
	return withCut(r.margin(ctx, l), info)
}

// withCut returns the margin learnt (or fixed) after an attempt whose error
// inspect found info, raised as marginAfter says.
func withCut(learnt time.Duration, info errorInfo) (m time.Duration, cut bool) {
	m = max(learnt, info.cut)
	if info.stalled {
		m = addSaturating(m, attemptReserve)
	}
	return m, info.cut > learnt
}

// deadline returns ctx's deadline when the deadline check is on.
func (r *Retryer) deadline(ctx context.Context) (time.Time, bool) {
	if r.noDeadlineGiveUp {
		return time.Time{}, false
	}
	return ctx.Deadline()
}

// addSaturating returns d+extra, extra >= 0, at most the longest duration:
// a DeadlineMargin near it plus a reserve wrapped to a negative margin,
// which let a retry with the reserve or less left pass the deadline check.
func addSaturating(d, extra time.Duration) time.Duration {
	if d > math.MaxInt64-extra {
		return math.MaxInt64
	}
	return d + extra
}

// exceeds reports whether a wait plus margin would end past remaining,
// without overflow for any values.
func exceeds(wait, margin, remaining time.Duration) bool {
	if remaining <= 0 {
		return true
	}
	return wait > remaining-margin
}

// margin is the time a retry of the operation of ctx on lane l must leave
// after its backoff, before the deadline, for the attempt itself:
// Options.DeadlineMargin when set, otherwise twice what recent attempts of
// the same operation on the lane took (see attemptTimes), or of any of its
// operations when ctx is nil: the headroom is for the attempts that take
// longer still and for a backoff sleep that ends late on a busy machine,
// both of which the estimate cannot see. An estimate of cold attempts only
// keeps no margin, as the SDK's retryer keeps none: they held a new
// client's one-time costs (a credential fetch, handshakes), which the retry
// does not pay, in a share of their time nobody knows. Counted even once, an
// 800 ms AssumeRole refused the retry of every cold invocation of a 2 s
// Lambda function answered once with a 500, which retry.NewStandard() made
// in time (helper-174).
// With no lane (a RetryDelay with no GetRetryToken before it) the learnt
// margin is 0. (A Do loop's is doLoop.margin.)
func (r *Retryer) margin(ctx context.Context, l *lane) time.Duration {
	if r.fixedMargin > 0 || l == nil {
		return r.fixedMargin
	}
	if ctx == nil {
		return r.marginOf(l.attempts.read())
	}
	return r.marginOf(l.attempts.estimateOf(operationOf(ctx)))
}

// marginOf returns the learnt margin for an estimate e of an attempt's
// time, cold when it rests on cold attempts only: twice e, or none when
// cold (see margin).
func (r *Retryer) marginOf(e time.Duration, cold bool) time.Duration {
	w := warmOnly(e, cold)
	return addSaturating(w, w) // a clock that leapt forward made an attempt last ages
}

// warmOnly returns an estimate e of an attempt's time, or 0 when it rests
// on cold attempts only: the one rule by which a margin keeps nothing for
// a new client's one-time costs (see margin).
func warmOnly(e time.Duration, cold bool) time.Duration {
	if cold {
		return 0
	}
	return e
}

// sendMargin is the time a wait for the send-rate limiter's queue must
// leave before the deadline for the attempt after it: Options.DeadlineMargin
// when set, otherwise what recent attempts of the operation of ctx on lane
// l took (see attemptTimes), without the retries' headroom. An attempt with
// no wait is sent whatever time is left, as without the limiter; against
// twice the attempt time, a wait of a few milliseconds turned the same
// attempt into a refusal. An estimate of cold attempts only keeps none, as
// margin keeps none, but for what warm attempts that their deadlines ended
// showed (see attemptTimes.sendTimeOf).
func (r *Retryer) sendMargin(ctx context.Context, l *lane) time.Duration {
	if r.fixedMargin > 0 || l == nil {
		return r.fixedMargin // no lane: none learnt, as margin's
	}
	return l.attempts.sendTimeOf(operationOf(ctx))
}

// refusalReserve is what a wait before an empty budget's refusal leaves of
// the caller's deadline beyond the margin (which may be zero), so that the
// refusal reaches the caller before its context ends; and the least margin
// a Do loop learns, for the same reason (see doLoop.next).
const refusalReserve = 5 * time.Millisecond

// refusalHold returns how long a caller refused for its deadline, with
// remaining left until it, is held before it hears of the refusal: until
// the deadline less margin and refusalReserve (the last moment a retry, or
// a turn in the send-rate limiter's queue, could still be used), but at
// least half of what is left before the deadline less refusalReserve, and
// 0 when no more than refusalReserve is left. The floor is for a margin as
// long as the deadline (an attempt time learnt from throttles answered in
// 200 ms, or a DeadlineMargin longer than the callers' deadlines): with
// the deadline less the margin passed already, the refusal came at once,
// and callers in closed loops sent again at once (an outside review: 128
// goroutines with deadlines of 50-300 ms spun some 8,500 refusals a
// second), where the SDK, which sleeps into the deadline, holds them.
// Half, not all: a caller with less time left is never held longer than
// one with more.
func refusalHold(margin, remaining time.Duration) time.Duration {
	if remaining <= refusalReserve {
		return 0
	}
	// remaining > refusalReserve here: no difference below can overflow.
	hold := (remaining - refusalReserve) / 2
	if remaining > margin && remaining-margin-refusalReserve > hold {
		hold = remaining - margin - refusalReserve
	}
	return hold
}

// heldBefore returns how long a caller is held before a refusal whose wait
// was d, with remaining left until its deadline: d, or, when d is longer
// than the refusal's hold (see refusalHold), the hold (shortened).
func heldBefore(d, margin, remaining time.Duration) (held time.Duration, shortened bool) {
	if hold := refusalHold(margin, remaining); d > hold {
		return hold, true
	}
	return d, false
}

// refuseForDeadline reports g, the refusal of retry p for its deadline
// (g.Delay the refused wait, g.remaining the time that was left), to the
// hooks and returns it: at once, or, after a throttle (or a conflict whose
// wait is the throttle floor: the table is at capacity), once the caller
// was held (see holdRefusal), then as GiveUpCanceled if the caller
// left during the hold. Whether the wait refused was the service's
// x-amz-retry-after alone (GetRetryToken) or the backoff after it
// (RetryDelay): a hint longer than the time left was refused at once, and
// one goroutine with 300 ms deadlines on a table throttling every write with
// a 500 ms hint sent 8,879 requests in 2 s, against the SDK's 7
// (helper-161). A refusal that came before the backoff was drawn (the hint
// alone, or the margin alone, left no time) holds its caller as long as a
// refusal holds it (see refusalHold), at most maxRefusalHold, as the SDK's
// sleep into the deadline would: held for the hint alone, none without
// one, a margin longer than the deadline refused every throttle at once
// again (2,900 operations a second with 50 ms deadlines and a 200 ms
// DeadlineMargin). No backoff is drawn for it: a draw would move the
// sequence of a seeded Options.Source (helper-206). Any other refusal is
// held so too when the time left would not hold an attempt at all (its
// time, as sendMargin gives it, not the retries' twice that, which held
// callers with time for one attempt: helper-207; a DeadlineMargin longer
// than the deadline): the caller has no use for that time,
// and, refused at once, one goroutine with 50 ms deadlines and a 200 ms
// DeadlineMargin sent 4,396 requests a second to a service answering 500s,
// where retry.NewStandard() sent 978 (helper-206).
func (r *Retryer) refuseForDeadline(p *pendingRetry, g *GiveUpError) *GiveUpError {
	if p.class == ClassThrottle || p.floored || exceeds(0, r.sendMargin(p.ctx, p.lane), g.remaining) {
		wait := g.Delay
		if !g.drawn {
			wait = maxRefusalHold
		}
		held, err := holdRefusal(p.ctx, wait, p.margin, g.remaining)
		if err != nil {
			return r.hooks.giveUp(p.ctx, canceledGiveUp(g.Attempt, g.Partition, g.Err, err, g.joined))
		}
		g.waited, g.floored = held, p.floored
	}
	return r.hooks.giveUp(p.ctx, g)
}

// maxRefusalHold bounds holdRefusal's hold to a throttle's first
// backoff at the SDK's base: a caller with time left whose longer backoff
// was refused (a margin of seconds, a long x-amz-retry-after) hears of it
// within a second, while a closed loop with deadlines shorter than that is
// held about as long as the SDK's sleep would hold it.
const maxRefusalHold = time.Second

// holdRefusal holds the caller of a retry that its deadline refused (after
// a throttle, or with no time left for an attempt: see refuseForDeadline)
// for the refused wait (at most maxRefusalHold), or for less when a
// refusal holds its caller less (see refusalHold): about as long as the
// SDK, which sleeps into the deadline, holds it. Refused at once, a caller
// in a closed loop whose deadline is shorter than the throttle backoff
// sends again at once: one goroutine with 50 ms deadlines on a table
// throttling every write sent 780 requests a second, against the SDK's 20
// (an outside review). It returns the hold, and ctx's error when the
// caller left during it; a deadline that ends it on a busy machine still
// gives the deadline's refusal.
func holdRefusal(ctx context.Context, wait, margin, remaining time.Duration) (time.Duration, error) {
	held, _ := heldBefore(min(wait, maxRefusalHold), margin, remaining)
	if held <= 0 {
		return 0, nil
	}
	if err := sleep(ctx, held); err != nil && ctx.Err() != context.DeadlineExceeded {
		return held, err
	}
	return held, nil
}

// backOffBeforeFailing waits the backoff of failed attempt attempt before an
// empty budget fails the operation, so that callers that send again at once
// cannot turn the empty budget into a storm. It never waits longer than a
// refusal holds its caller (see refusalHold): when the backoff would, it
// waits that long (a caller whose deadline is shorter than the backoffs
// would otherwise be refused at once, and storm), and returns at once
// when no more than refusalReserve is left. It returns how long it waited, whether the
// deadline cut the wait short (also when the deadline itself ended it, on
// a machine too busy to wake it in time: the budget still refused), and
// ctx's error when the caller left, before or during the wait.
func (r *Retryer) backOffBeforeFailing(ctx context.Context, attempt int, opErr error, class ErrorClass, margin time.Duration, l *lane, counted bool) (waited time.Duration, shortened bool, err error) {
	if r.failFast {
		return 0, false, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err // the caller left already (a blocking RateLimiter's wait, say)
	}
	d, err := r.backoffFor(attempt, opErr, class, l, counted)
	if err != nil || d <= 0 {
		return 0, false, nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		if d, shortened = heldBefore(d, margin, deadline.Sub(r.now())); d <= 0 {
			return 0, false, nil
		}
	}
	if err := sleep(ctx, d); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			// The deadline ended the wait the retryer chose (on a
			// machine too busy to wake it in time): cut short by the
			// deadline, and the budget's refusal still.
			return d, true, nil
		}
		return 0, shortened, err
	}
	return d, shortened, nil
}
