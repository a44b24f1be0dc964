package jitterretry

// This file owns Do, the retry loop for what only the application can
// retry.

import (
	"context"
	"errors"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/jitterretry/jitterretry/delayers"
)

// DoOptions configures one Do loop. Do fills in the defaults before it runs
// the option functions, as New does.
type DoOptions struct {
	// Classify decides what the loop retries. The default retries
	// conflicts (ClassConflict: a ConditionalCheckFailedException, a
	// TransactionConflictException, a transaction cancelled for conflicts
	// only, an error marked with Conflict) and, as throttles, transactions
	// cancelled for throttles only (which the SDK's middleware does not
	// retry); leaves alone an error the SDK's retry middleware already
	// gave up on (a *retry.MaxAttemptsError, a *GiveUpError, also that of
	// a Do loop inside fn that ran out of conflicts or time), unless it
	// gave up on a conflict it was told to retry (retry.AddWithErrorCodes)
	// for attempts or the budget, which the loop retries as a conflict;
	// and classifies the rest as the Retryer does. So around SDK calls,
	// whose throttles and 5xx the SDK already retried, the loop retries
	// conflicts (and throttled transactions) only; around other functions,
	// what the SDK would: a context.DeadlineExceeded of a context of fn's
	// own (a per-call context.WithTimeout) is a timeout, and retried, as
	// the SDK's checks retry one, while a cancel of fn's own, and the end
	// of the context Do was given, are not. Nil means the default. A value
	// other than the four classes is not retried.
	Classify func(error) ErrorClass

	// MaxAttempts is the most calls of fn that fail with a transient or
	// throttling error before the loop gives up with GiveUpMaxAttempts;
	// conflicts do not count. Default the Retryer's own MaxAttempts, not
	// AWS_MAX_ATTEMPTS or config.WithRetryMaxAttempts, which at most wrap
	// the retryer a client gets (retry.AddWithMaxAttempts, and only when it
	// is set per client: with config.WithRetryer the SDK ignores them) and
	// never reach Do; UnlimitedAttempts means no limit; 0 and other
	// negative values are invalid.
	MaxAttempts int

	// MaxConflicts is the most conflicts the loop retries before it gives
	// up with GiveUpConflicts; the context's deadline bounds the loop too.
	// Default 100, which 32 workers incrementing one item never reached in
	// our runs (BENCHMARKS.md, section 2b); UnlimitedAttempts means no limit
	// but the context; 0 retries no conflict. A conflict that carries no
	// versions (a bare ConditionalCheckFailedException, not marked with
	// Conflict) backs off blindly, growing toward the Retryer's MaxBackoff
	// (20 s by default), so a hundred of them can take many minutes: give
	// such a loop a deadline.
	MaxConflicts int
}

const defaultMaxConflicts = 100

// Do calls fn until it returns nil, returns an error that is not to be
// retried, or the loop gives up, and sleeps between calls.
//
// Conflicts (ClassConflict) are the normal price of contention, not a sign
// of a struggling service: they take no tokens from the Retryer's bucket,
// which stays for the SDK's own retries of throttles and 5xx; they have a
// budget of their own (MaxConflicts); and their backoff follows the
// contention the loop measures (see Conflict and delayers.Contention). When
// the loop met a throttle since fn's previous call ended (fn failed with
// one, or an SDK call inside fn that uses fn's ctx, a context derived from
// ctx, was throttled and retried, also inside a Do loop of fn's own), a
// conflict waits at least the Retryer's backoff after as many throttles in
// a row: a table at capacity holds the win rate down, which looks like
// little contention. In a named partition (see Options.PartitionKey; one
// per table, say) the throttles of any operation of the partition count
// too, so that the loops on a table at capacity back off together; in the
// default partition, which is the whole client, other operations'
// throttles do not count. Transient
// and throttling errors go through the same retry decision as the SDK's
// middleware: the Retryer's jitter (a decorrelated chain keeps the
// loop's real previous delay), its bucket (with the send-rate limiter's
// exception for throttles, see Options.SendRate, taken only when fn's
// last call waited its turn in this Retryer's queue), the
// x-amz-retry-after hint, the empty-budget backoff. For every retry, a backoff that would end past ctx's
// deadline, with a margin of Options.DeadlineMargin when set, otherwise of
// twice the Retryer's learnt attempt time (over every operation of the
// slowest client, service and region, fn's SDK calls used, since fn may
// call several; of the partition before fn called through the Retryer) or
// of fn's own last duration (the
// SDK's backoff sleeps inside it included), whichever is larger, and at
// least 5 ms when learnt, ends the loop: at once, or, after a throttle,
// once it was held as GetRetryToken holds a throttle's caller; but a
// conflict's contention backoff, which only spaces the
// loop's attempts, is drawn again uniformly within the time left before the
// margin when that is shorter, so the loop gives up on conflicts only when
// less than the margin is left, or the throttle floor above (not shortened)
// or the service's x-amz-retry-after asks for longer. (Loops that share one
// deadline so crowd their last attempts toward its end; with
// Options.DisableDeadlineGiveUp nothing is fitted, as nothing is checked.)
//
// Do returns nil on success; fn's own error when it is not to be retried;
// otherwise a *GiveUpError wrapping fn's last error, with reason
// GiveUpMaxAttempts, GiveUpConflicts, GiveUpBudget, GiveUpDeadline or
// GiveUpCanceled (also for a conflict fn returns after ctx ended); when a
// custom Options.Backoff fails, its error joined with fn's last, as the
// SDK's middleware returns RetryDelay's (with fn's error, which that
// loses). A nil fn, invalid options or a zero Retryer give an
// *OptionsError; a nil ctx counts as context.Background(); nothing panics
// but the caller's own code (fn, Classify, the hooks, a custom Backoff,
// PartitionKey, Clock), whose panics go through Do to its caller; after a
// panic in fn the retry in flight, if any, gets its tokens back.
// Options.OnGiveUp and the metrics hear of each give-up once: not again
// from Do when fn returns one the Retryer reported inside fn (its
// middleware's refusal of an SDK call fn made, an inner Do's); where Do
// cannot tell (see the README's Hooks section), it reports rather than
// risk losing one.
//
// Do pays only for its own retries: a retry that succeeds gets its cost
// back, and Do adds no NoRetryIncrement for a first-call success, since the
// SDK calls inside fn earn theirs.
func Do(ctx context.Context, r *Retryer, fn func(ctx context.Context) error, optFns ...func(*DoOptions)) error {
	if err := r.ready(); err != nil {
		return err
	}
	if fn == nil {
		return &OptionsError{Option: "fn", Reason: "must not be nil"}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o := DoOptions{Classify: r.classes.doClass, MaxAttempts: r.maxAttempts, MaxConflicts: defaultMaxConflicts}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = UnlimitedAttempts
	}
	for _, f := range optFns {
		if f != nil {
			f(&o)
		}
	}
	if o.Classify == nil {
		o.Classify = r.classes.doClass
	}
	switch {
	case o.MaxAttempts == 0 || o.MaxAttempts < UnlimitedAttempts:
		return &OptionsError{Option: "DoOptions.MaxAttempts", Reason: "must be at least 1, or UnlimitedAttempts (-1)"}
	case o.MaxConflicts < UnlimitedAttempts:
		return &OptionsError{Option: "DoOptions.MaxConflicts", Reason: "must be 0 or more, or UnlimitedAttempts (-1)"}
	}
	home, held := r.lanes.holdForLoop(ctx)
	defer held.letGo()
	loop := doLoop{r: r, o: o, home: home, lane: home}
	loop.partitionNews()
	if r.delayer != nil {
		loop.seq = r.delayer.NewSequence()
	}
	loop.conflictBackoff = delayers.Contention{Cap: loop.cap(), Source: r.source}
	return loop.run(ctx, fn)
}

// doLoop is the state of one Do call.
type doLoop struct {
	r *Retryer
	o DoOptions
	// home is the lane of the loop's context: its partition's, or its
	// SDK service's there.
	home *lane
	// lane is the lane of fn's last call (see callLane): home, or the
	// lane of the SDK service whose limiter paced the call.
	lane            *lane
	seq             *delayers.Sequence // the Retryer's own delayer's delays for this loop; nil with a Backoff of the caller's
	conflictBackoff delayers.Contention
	failures        int // calls that failed with a transient or throttling error
	conflicts       int // conflicts retried
	// mark hears of the throttles this loop met (those the SDK calls
	// inside fn retried, fn's context carrying it, and fn's own) and of
	// the give-ups reported inside fn.
	mark loopMark
	// seenThrottles is the edition of a named partition's throttle news
	// when the loop last looked.
	seenThrottles uint64
	throttled     bool  // the loop, or its named partition, met a throttle since the previous call of fn ended
	capped        int   // conflicts in a row after such a throttle
	lastThrottle  error // fn's error of the previous call, when Do classed it a throttle
	// answered: an attempt of fn's last call was answered with a throttle
	// that the send-rate limiter counted (see Retryer.throttleBackoff);
	// lastAnswered, the same of the call that failed with lastThrottle.
	answered, lastAnswered bool
	paid                   *ticket // the tokens of the retry in flight, if any
}

func (d *doLoop) run(ctx context.Context, fn func(ctx context.Context) error) error {
	d.r.hooks.loops.Add(1)
	defer func() {
		if d.r.hooks.loops.Add(-1) == 0 {
			d.r.hooks.refusals.reset(&d.r.hooks.loops)
		}
	}()
	// Every return leaves no retry in flight; a panic in fn may: it says
	// nothing of the service, so the retry's tokens go back.
	defer d.refund()
	d.mark.owner = &d.r.hooks
	// A goroutine fn left behind, sending later under fn's context, is no
	// retry of the loop's.
	defer d.mark.retryNext.Store(false)
	fnCtx := withLoopMark(ctx, &d.mark)
	var lastErr error
	for attempt := 1; ; attempt++ {
		if cerr := ctx.Err(); cerr != nil {
			d.refund()
			return d.r.hooks.giveUp(ctx, canceledGiveUp(attempt-1, d.lane.key, lastErr, cerr, false))
		}
		start := d.r.now()
		d.mark.startCall(start)
		err := fn(fnCtx)
		end := d.r.now()
		// fn returned: the retry in flight has its answer, settled below
		// (left spent, as a failed retry's, if the caller's Classify
		// panics first).
		paid := d.paid
		d.paid = nil
		queued := d.mark.queuedInCall()
		d.answered = d.mark.answeredThrottled.Load()
		d.lane = d.callLane()
		own := d.mark.takeThrottle()
		d.throttled = d.partitionNews() || own
		took := end.Sub(start)
		var class ErrorClass
		if err != nil {
			class = d.o.Classify(err) // once: the caller's Classify may count or log
		}
		if paid != nil && (err == nil || class == ClassConflict) {
			// A successful retry gets its cost back, and one answered by a
			// conflict too, as under the SDK's middleware (see
			// lane.retryRelease). Not through its SDK-style release, which
			// leaves the increment of the attempt release that follows it
			// under the SDK's middleware to be skipped: Do has none.
			paid.refund()
		}
		if err == nil {
			return nil
		}
		lastErr = err

		wait, nerr := d.next(ctx, attempt, err, class, end, took, queued)
		if nerr != nil {
			if g, ok := nerr.(*GiveUpError); ok && g.notRetried {
				return err
			}
			return nerr
		}
		// For the throttle floor of a conflict in the next call (see next).
		d.lastThrottle = nil
		if class == ClassThrottle {
			d.lastThrottle, d.lastAnswered = err, d.answered
		}
		if serr := sleep(ctx, wait); serr != nil {
			d.refund()
			return d.r.hooks.giveUp(ctx, canceledGiveUp(attempt, d.lane.key, err, serr, false))
		}
	}
}

// next decides the retry after fn's call number attempt failed with err, of
// class class, at time at, having taken took, queued of it in the send-rate
// limiter's queue: the wait before the next call, or why not (a
// *GiveUpError, or the error of a custom Backoff joined with err).
func (d *doLoop) next(ctx context.Context, attempt int, err error, class ErrorClass, at time.Time, took, queued time.Duration) (time.Duration, error) {
	r, l := d.r, d.lane
	info := r.classes.inspect(err)
	// A throttle's retry may be left unpaid to the send-rate limiter's
	// pacing only when fn's next call will wait its turn there: fn's last
	// call did (fn need not call the SDK at all, nor through this Retryer:
	// a wait at another's limiter does not count, helper-159).
	p := pendingRetry{ctx: ctx, lane: l, class: class, hint: info.hint, paced: d.mark.waited.Load() && r.lanes.attemptsWait(), uncounted: !d.answered}
	p.margin, p.cutMargin = withCut(d.margin(), info)
	if r.fixedMargin == 0 {
		// fn's call may make several attempts, each of them needed again:
		// its whole time counts. (It also holds the sleeps of the SDK's own
		// retries inside fn, which the next call may not need; bounded as
		// the conflict backoff bounds it, fn's time never counted, and fn
		// that makes several slow calls was started without time to end:
		// helper-73. DeadlineMargin, when set, decides alone.)
		//
		// And at least refusalReserve: a Do loop whose fn is quick (it
		// makes no SDK call through this Retryer, or one answered at once)
		// learns a margin of about nothing, and fitted each conflict's
		// backoff into nearly all the time left, drawing the loop ever
		// closer to the deadline until a sleep, woken a little late, ended
		// past it: every call of such a loop with a 50 ms deadline returned
		// up to 1.2 ms after it, a third of them as GiveUpCanceled
		// (helper-162).
		//
		// But not the time of the call's attempts that were cold: they
		// held the client's one-time costs (a credential fetch), which
		// the next call does not pay, and Retryer.margin keeps no margin
		// for them either. A 1 s fetch refused a conflict's retry with
		// 499 ms left that needed a millisecond (helper-176); left out
		// whole while the client's estimate was cold, the call's time
		// still kept the fetch when the call also made a warm attempt (a
		// GetItem, cold, then a PutItem; a 500 the SDK retried inside fn:
		// helper-178); left out whole when the call began before the
		// client's first answer, it dropped the time of another client's
		// calls and of fn's own work in the same call (helper-179). What
		// fn did beside a cold attempt, in parallel, is left out with it:
		// nothing tells it apart (a prefetch beside 600 ms of warm writes
		// left a margin of the estimate's alone, and the retry ran into
		// the deadline: helper-180).
		fnTime := max(took-d.mark.coldInCall(), 0)
		if floor := max(fnTime, refusalReserve); floor > p.margin {
			p.margin, p.cutMargin = floor, false // fn's time or the reserve, not the cut's
		}
	}
	p.deadline, p.hasDeadline = r.deadline(ctx)
	var backoff time.Duration
	switch class {
	case ClassConflict:
		if cerr := ctx.Err(); cerr != nil {
			// No retry: the caller left, as admit tells a transient
			// error's.
			return 0, r.hooks.giveUp(ctx, canceledGiveUp(attempt, l.key, err, cerr, false))
		}
		if d.o.MaxConflicts != UnlimitedAttempts && d.conflicts >= d.o.MaxConflicts {
			return 0, r.hooks.giveUp(ctx, &GiveUpError{Reason: GiveUpConflicts, Attempt: attempt, Partition: l.key, Err: err, counted: d.conflicts + 1})
		}
		d.conflicts++
		seen, current := conflictReport(err)
		span := d.attemptSpan(took, queued)
		backoff = d.conflictBackoff.Next(at, span, seen, current)
		if _, cold := d.estimate(); cold {
			// fn's call held the client's one-time costs (see
			// attemptTimes): as round trips, they made a first window of
			// seconds. The wait is drawn within one round trip as that
			// call measured it (the Contention's), and the next conflict,
			// warm, is sized from round trips.
			backoff = d.fitConflict(backoff, span/2)
		}
		if p.hasDeadline {
			p.at = r.now()
			if left := p.deadline.Sub(p.at); left > p.margin { // no overflow below
				backoff = d.fitConflict(backoff, left-p.margin)
			}
		}
		// A throttle since the previous call says that the table's
		// capacity, not the item, is the limit, which the conflicts
		// cannot show (a win rate held down by capacity looks like little
		// contention): wait at least what the Retryer would after as many
		// throttles in a row. Which throttles: this loop's own, and, in a
		// named partition (a scope the caller chose, one table say), the
		// partition's, so that the loops on a table at capacity back off
		// together: on loopback, 32 workers on one item of a 100 WCU table
		// made 1,090 calls so, against 1,586 without (full jitter: 1,318).
		// Not the default partition's, the whole client: there one
		// goroutine throttled on another table every 100 ms made 32 loops
		// on an item 50 times slower (an outside review).
		// A throttle's floor is not shortened; a conflict's backoff is,
		// so with no time left before the margin, the margin refuses it.
		p.fits = true
		if !d.throttled {
			d.capped = 0
		} else {
			d.capped++
			// A Backoff of the caller's own tells a throttle by its
			// error: it is asked with one, not with the conflict: fn's
			// own from the call before, when it was one.
			if floor, ferr := d.throttleDelay(d.capped, d.lastThrottle); ferr == nil && floor >= backoff {
				backoff, p.fits, p.floored = floor, false, true
			}
		}
	case ClassTransient, ClassThrottle:
		d.failures++
		if d.o.MaxAttempts != UnlimitedAttempts && d.failures >= d.o.MaxAttempts {
			return 0, r.hooks.giveUp(ctx, &GiveUpError{Reason: GiveUpMaxAttempts, Attempt: attempt, Partition: l.key, Err: err, counted: d.failures})
		}
		cost := r.costs.retry
		if class == ClassThrottle {
			cost = r.costs.throttle
			d.mark.noteThrottle() // fn's own throttle counts for the call after it
		}
		if gerr := r.admit(&p, attempt, d.failures, err, cost, false); gerr != nil {
			return 0, gerr
		}
		d.paid = &p.paid // schedule forgets it when it refunds a refusal
		if d.seq != nil {
			backoff = d.seq.NextFor(r.throttleBackoff(class, l, d.answered))
		} else {
			// A Backoff of the caller's own computes the delay and tells
			// a throttle by its error.
			var derr error
			if class == ClassThrottle {
				backoff, derr = d.throttleDelay(d.failures, err)
			} else {
				backoff, derr = r.backoffFor(d.failures, err, class, nil, d.answered)
			}
			if derr != nil {
				// As the SDK's middleware returns RetryDelay's error, but
				// with fn's, which that loses (once, when they are one).
				d.refund()
				if errors.Is(derr, err) {
					return 0, derr
				}
				return 0, errors.Join(derr, err)
			}
		}
		backoff = max(backoff-p.waited, 0) // admit waited that long for tokens
	default:
		// ClassNotRetryable, or a class a caller's Classify made up,
		// whose cost and backoff nothing says; reported as the context
		// done when the caller's context ended the call (not a context
		// of fn's own), as max attempts when the SDK's middleware ran out
		// of them, and not at all when the Retryer reported it inside fn.
		g := &GiveUpError{Reason: GiveUpNotRetryable, Attempt: attempt, Partition: l.key, Err: err, notRetried: true}
		switch cerr := ctx.Err(); {
		case info.ended != nil && cerr != nil:
			g.Reason, g.ctxErr = GiveUpCanceled, cerr
		case info.outOfAttempts > 0:
			// The SDK's attempts, not Do's calls of fn.
			g.Reason, g.counted = GiveUpMaxAttempts, info.outOfAttempts
		}
		if r.hooks.reportsGiveUps() && d.mark.reportedAlready(err) {
			return 0, g
		}
		return 0, r.hooks.giveUp(ctx, g)
	}
	// schedule refunds a retry it refuses, and forgets its tokens, before the
	// hooks hear of it: a hook that panics then leaves the deferred refund
	// nothing to give back twice, and one that panics on a retry scheduled
	// (OnRetry) leaves it the retry, never sent.
	wait, gerr := r.schedule(&p, attempt, err, backoff, skippedCheck{})
	if gerr != nil {
		d.paid = nil
		return 0, gerr
	}
	// The first attempt through the limiter of fn's next calls goes
	// ahead, if this call's waited its turn there.
	d.mark.retryNext.Store(d.mark.sent.Load())
	return wait, nil
}

// callLane returns the lane fn's last call is judged in: the lane of the
// SDK service whose limiter paced it, or of the services past its
// partition's bound, with none (see loopMark.lane), when that lane shares
// the loop's bucket, or the loop's own (a Do called under an SDK
// operation's context has that service's lane: fn's calls of another
// service are judged by theirs). With a limiter per service, the loop's
// own lane has its partition's first service's limiter, or one that paced
// no SDK call: judged by another service's limiter than the one fn's call
// waited at, a throttle's retry was neither paced nor backed off as a near
// miss, as the same call's retries inside the SDK were.
func (d *doLoop) callLane() *lane {
	if l := d.mark.lane.Load(); l != nil && l.bucketOwner() == d.home.bucketOwner() {
		return l
	}
	return d.home
}

// partitionNews looks at the throttle news of the loop's partition and
// reports whether a throttle was noted since it last looked; in the
// default partition, the whole client, it does not look and reports false
// (see Do).
func (d *doLoop) partitionNews() bool {
	if d.home.key == "" {
		return false
	}
	th := d.home.bucketOwner().throttles.look()
	changed := th != d.seenThrottles
	d.seenThrottles = th
	return changed
}

// attemptSpan is the duration of fn's call that took took, as the conflict
// backoff should see it: the round trips of one attempt of the loop. took
// includes whatever the SDK did inside fn, its own retries of a throttle
// and their sleeps, which say nothing of the item's contention and, taken
// for round trips, would stretch the first conflict's window (firstWindow
// times took/2) to seconds. So took is bounded by twice the learnt
// attempt time (see estimate: the slowest client's fn called; the lane's
// while that client has no timed attempt, which would leave took unbounded:
// helper-151 saw first waits of 82-528 ms after an SDK sleep inside fn,
// against 17-72 ms): fn of the usual loop sends a read and a write at most,
// and the estimate, about the 95th percentile of its attempts, already
// covers a slow one. A fn that sends more sees its round trips
// underestimated by as much, which only shortens its first window. The
// waits of fn's SDK calls in the send-rate limiter's queue, queued, are
// the attempt's too: they hold the item open between the read and the
// write (timed apart, round trips of a few milliseconds sized the windows
// of 32 writers whose writes waited hundreds in the queue, and the loops
// spun through it: 6.9 requests per increment against 2.7 without the
// limiter). Before any attempt was measured (an fn that does not go through
// this Retryer's middleware) took is all there is.
func (d *doLoop) attemptSpan(took, queued time.Duration) time.Duration {
	est, _ := d.estimate()
	if est == 0 {
		est = d.lane.attempts.estimate()
	}
	if est > 0 {
		return min(took, addSaturating(addSaturating(est, est), queued))
	}
	return took
}

// estimate returns the expected time of an attempt of fn's, and whether it
// rests on cold attempts only: over the operations of the slowest client
// fn's SDK calls used (see loopMark.client), taken as cold while none of
// its attempts was timed (its first call may have held a new client's
// one-time costs), or, before fn called through the Retryer, over the
// lane's.
// A partition shared by the clients of several regions holds them all, and
// the near one's loop met the far one's times (helper-148: every
// conflict refused under 450 ms deadlines beside a region 300 ms away,
// none without it).
func (d *doLoop) estimate() (time.Duration, bool) {
	if c := d.mark.client.Load(); c != nil {
		e, cold := c.clientAll.read()
		return e, e == 0 || cold
	}
	return d.lane.attempts.read()
}

// margin is the loop's learnt margin (see Retryer.margin), from estimate,
// or Options.DeadlineMargin when set.
func (d *doLoop) margin() time.Duration {
	if d.r.fixedMargin > 0 {
		return d.r.fixedMargin
	}
	return d.r.marginOf(d.estimate())
}

// fitConflict returns the conflict backoff, or, when it is room or more, a
// wait drawn uniformly in [0, room). With room the time left before the
// deadline's margin: the backoff only spaces the loop's
// attempts among its competitors, and one drawn longer than the time left
// (a window sized for 64 writers, say) gave up calls with most of their
// deadline unused, where an attempt sooner may still win. With no room the
// backoff is left as drawn, and the deadline check refuses it.
func (d *doLoop) fitConflict(backoff, room time.Duration) time.Duration {
	if room <= 0 || backoff < room {
		return backoff
	}
	var x uint64
	if d.r.source != nil {
		x = d.r.source.Uint64()
	} else {
		x = rand.Uint64()
	}
	// The high half of the product, as the delayers map a draw.
	wait, _ := bits.Mul64(x, uint64(room))
	return time.Duration(wait)
}

// throttleDelay returns the backoff after the n-th throttle in a row: err,
// fn's, or nil for throttles met inside fn (that the SDK's middleware
// retried there) or in the partition. A Backoff of the caller's own tells
// a throttle by its error, as under the SDK's middleware: a throttle the
// SDK's rules know is asked as it is. Any other is a throttle all the
// same, but no single error can be one to every check: a delayer of
// package delayers gives its throttle delay; another Backoff is asked with
// the stand-in alone when there is no err, or err is a transaction
// cancelled for throttles (whose code would hide the stand-in), and
// otherwise with err joined with the stand-in, err first, so that a check
// of its own that knows err finds it, and the SDK's checks find the
// stand-in when err carries no error code (one that does is found first,
// no throttle to them). Asked with the stand-in alone, a delayer whose own
// check knew only err's code backed off on its Base (an outside review,
// helper-108); asked with the join, a delayer with the SDK's checks did
// (helper-106).
func (d *doLoop) throttleDelay(n int, err error) (time.Duration, error) {
	r := d.r
	switch {
	case r.delayer != nil:
		// With the call's lane's limiter, as the middleware's: a throttle
		// it counted while it paces with few throttles backs off from
		// BaseDelay (no err: a throttle the SDK's attempts met, counted).
		return r.backoffFor(n, err, ClassThrottle, d.lane, err == nil || d.lastAnswered)
	case err != nil && r.classes.classify(err) == ClassThrottle:
		return r.backoff.BackoffDelay(n, err)
	}
	if dl, ok := ownDelayer(r.backoff); ok {
		return dl.Delay(n, true), nil
	}
	if err == nil || r.classes.doClass(err) == ClassThrottle {
		return r.backoff.BackoffDelay(n, throttleStandIn())
	}
	return r.backoff.BackoffDelay(n, errors.Join(err, throttleStandIn()))
}

// throttleStandIn returns an error that stands for a throttle to the
// SDK's checks: a ThrottlingException.
func throttleStandIn() error {
	return &smithy.GenericAPIError{Code: "ThrottlingException", Message: "jitterretry: stands for a throttle the Do loop met", Fault: smithy.FaultClient}
}

// ownDelayer returns b when it is a delayer of package delayers itself,
// not a type of the caller's that embeds one (whose own BackoffDelay must
// be asked).
func ownDelayer(b retry.BackoffDelayer) (delayers.Delayer, bool) {
	switch dl := b.(type) {
	case *delayers.Exponential, *delayers.Full, *delayers.Equal, *delayers.Decorrelated:
		return dl.(delayers.Delayer), true
	}
	return nil, false
}

// refund gives back the tokens of a retry that will not be sent.
func (d *doLoop) refund() {
	if d.paid != nil && d.paid.lane != nil {
		d.paid.refund()
	}
	d.paid = nil
}

// cap is the longest conflict backoff: the cap of the Retryer's delayer
// when it is one of package delayers (a Backoff of the caller's may be
// one), otherwise MaxBackoff: a Backoff computes the retries' delays, not
// the conflicts' (helper-125: capped at 20 s whatever MaxBackoff said).
func (d *doLoop) cap() time.Duration {
	if dl, ok := d.r.backoff.(delayers.Delayer); ok {
		return dl.Cap()
	}
	return d.r.maxBackoff
}
