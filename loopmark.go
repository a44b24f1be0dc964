package jitterretry

// This file owns the mark a Do loop puts in the context it gives fn, through
// which the Retryer, deciding for the SDK calls inside fn, tells the loop
// what it met there: a throttle, and the give-ups it already reported, so
// that the loop does not report them again.

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go"
)

// markMemory is how many failed attempts one call of fn remembers (the
// latest), how many errors standing for give-ups (up to two for each), and
// how many refusals the refusal log keeps: enough for the SDK calls one fn
// makes, in a row or at once. Beyond it a give-up may be reported twice.
const markMemory = 32

// loopMark is what the retry decisions made under a context that carries it
// (the SDK calls of one Do loop's fn, which get the loop's context, and no
// other operation of the client) tell that loop. A Do loop inside fn carries
// its own mark, which passes what it hears to the outer loop's: the inner
// loop's throttles and give-ups are the outer fn's too.
type loopMark struct {
	// owner is the hooks of the Retryer whose loop this is: only that
	// Retryer's give-ups are the loop's to leave unreported. (Throttles
	// are the table's, whichever Retryer met them.)
	owner     *hooks
	throttled atomic.Bool
	// client is the estimate of the slowest client (see
	// attemptEstimate.client) whose attempts fn's SDK calls through the
	// owner made, nil before one: the loop's margin and round trip are
	// that client's, not the partition's, which holds every region's
	// clients (helper-148: a near region's conflicts refused for a far
	// one's times). The slowest, so that an fn that calls a far region
	// and then a near one keeps the far one's headroom (helper-150).
	client atomic.Pointer[attemptEstimate]
	outer  *loopMark // the mark of the Do loop whose fn runs this one; nil at the top
	// sent: an attempt of the current call of fn took a place in the
	// owner's send-rate limiter's queue; waited: one waited there, for
	// its turn, before it was sent; answeredThrottled: one was answered
	// with a throttle that its limiter counted (see Retryer.throttleBackoff).
	sent, waited, answeredThrottled atomic.Bool
	// throttledLane: lane is that of an attempt answered with a counted
	// throttle.
	throttledLane atomic.Bool
	// calls counts fn's calls: an attempt's release that comes in a later
	// call than its attempt's (a goroutine fn left behind) says nothing of
	// that call.
	calls atomic.Uint64
	// retryNext: the loop retries a call of fn that sent through the
	// owner's limiter, and the first attempt of a later call of fn to take
	// a place there has not yet been made; it waits in the retries' line
	// (see sendQueue), in whichever partition and under whatever context
	// fn derived from the loop's. A retry of a call that sent nothing
	// there gets none: its attempt never waited its turn (helper-158).
	retryNext atomic.Bool
	// lane is the lane (with its limiter, one per partition and SDK
	// service, or none past a partition's bound: see lanes.getFor) the
	// current call of fn's attempts through the owner went through: the
	// first attempt's answered with a
	// throttle its limiter counted, else the latest failed attempt's (the
	// error fn returns is mostly its), else the first attempt's. A
	// credential refresh (STS) runs inside the attempt of the SDK call that
	// needs it, and succeeds; fn may call STS before the call that fails
	// (helper-222): neither is the call's. The loop's own lane
	// is its partition's, whose limiter may be another service's, or
	// none's: the loop's retry is paced as that service's (see
	// doLoop.callLane).
	lane atomic.Pointer[lane]

	mu sync.Mutex
	// failed holds the errors of the latest attempts that failed inside
	// the current call of fn, as the owner's middleware released them,
	// right before asking IsErrorRetryable, which reports a refusal with
	// no context to say whose it is (see refusalLog).
	failed recentErrors
	// reported holds the errors that stand for the latest give-ups the
	// owner reported during the current call of fn, each a pointer of one
	// give-up: a *GiveUpError reported under fn's context (a refusal of
	// GetRetryToken, RetryDelay or the send-rate limiter, one of a Do loop
	// inside fn); the SDK's operation errors within the error an inner Do
	// returned as its own after reporting it (not that error itself,
	// which may be fn's own sentinel that stands for many, or wrap one);
	// what an inner loop found reported and passed on.
	reported recentErrors
	// callStart is when the current call of fn began; queued is how long
	// since then at least one SDK call of fn waited in the send-rate
	// limiter's queue (see markQueued), cold how long at least one of its
	// attempts that were timed and judged cold ran (see markCold).
	callStart    time.Time
	queued, cold callSpans
}

// callSpans is how long, within a call of fn, at least one of some spans
// of time ran: their union, noted as each ends, up to to. Only the end of
// the spans noted is kept: a span that began before one noted earlier, and
// ends after it, counts from that one's end, short.
type callSpans struct {
	total time.Duration
	to    time.Time
}

// add notes the span from start to end, within the call that began at
// callStart: the part of it no span noted before covers.
func (c *callSpans) add(start, end, callStart time.Time) {
	if from := latest(start, callStart, c.to); end.After(from) {
		c.total += end.Sub(from)
		c.to = end
	}
}

type loopMarkKey struct{}

// withLoopMark returns ctx carrying m, under the mark ctx carries, if any.
func withLoopMark(ctx context.Context, m *loopMark) context.Context {
	m.outer = loopMarkOf(ctx)
	return context.WithValue(ctx, loopMarkKey{}, m)
}

// loopMarkOf returns the mark ctx carries, or nil.
func loopMarkOf(ctx context.Context) *loopMark {
	m, _ := ctx.Value(loopMarkKey{}).(*loopMark)
	return m
}

// markThrottle sets the throttle mark ctx carries, if any.
func markThrottle(ctx context.Context) {
	if m := loopMarkOf(ctx); m != nil {
		m.noteThrottle()
	}
}

// noteThrottle sets the throttle mark, and those of the loops around its
// own.
func (m *loopMark) noteThrottle() {
	for ; m != nil; m = m.outer {
		m.throttled.Store(true)
	}
}

// markClient notes, for the Do loops of owner around the call of ctx, the
// client (in a, the attempt times of the Retryer's lane) of the attempt
// being made. Only attempts inside such a loop pay for finding it.
func markClient(ctx context.Context, owner *hooks, a *attemptTimes) {
	var c *attemptEstimate
	for m := loopMarkOf(ctx); m != nil; m = m.outer {
		if m.owner != owner {
			continue
		}
		if c == nil {
			if c = a.clientFor(operationOf(ctx)); c == nil {
				return
			}
		}
		m.noteClient(c)
	}
}

// noteClient makes c the loop's client unless the one it has is slower.
func (m *loopMark) noteClient(c *attemptEstimate) {
	for {
		had := m.client.Load()
		if had == c || had != nil && had.clientAll.estimate() > c.clientAll.estimate() {
			return
		}
		if m.client.CompareAndSwap(had, c) {
			return
		}
	}
}

// markLane notes l, the lane of an attempt (see loopMark.lane), for the Do
// loops of owner around the call of ctx that have none yet.
func markLane(ctx context.Context, owner *hooks, l *lane) {
	for m := loopMarkOf(ctx); m != nil; m = m.outer {
		if m.owner == owner && m.lane.Load() == nil {
			m.lane.CompareAndSwap(nil, l)
		}
	}
}

// markSend notes, for the Do loops of owner around the call of ctx, that
// an attempt takes a place in owner's send queue, and reports whether it is
// the first of a retry of such a loop (see loopMark.retryNext), which it
// then no longer is.
func markSend(ctx context.Context, owner *hooks) (retry bool) {
	for m := loopMarkOf(ctx); m != nil; m = m.outer {
		if m.owner != owner {
			continue
		}
		if !m.sent.Load() {
			m.sent.Store(true)
		}
		if !retry && m.retryNext.CompareAndSwap(true, false) {
			retry = true
		}
	}
	return retry
}

// markQueued adds an attempt's wait in the send-rate limiter's queue, from
// start to end, to the mark ctx carries, if any, and those around it: the
// part of it within the current call of fn that no wait noted before
// covers (see callSpans). So the waits of SDK calls made in parallel count
// once, and a goroutine that outlived its call of fn adds to the next only
// what it waited during it. (A wait counted short is rare: the queue
// serves its places in order, so the first in line is the first out; and
// a goroutine that notes its wait late counts short too.) The waits count
// for every loop, since they took fn's time whichever Retryer's queue
// they were in; the loops of owner, the Retryer of that queue, also note
// that fn's call waited at their limiter (see loopMark.waited).
func markQueued(ctx context.Context, owner *hooks, start, end time.Time) {
	for m := loopMarkOf(ctx); m != nil; m = m.outer {
		if m.owner == owner && !m.waited.Load() {
			m.waited.Store(true)
		}
		m.mu.Lock()
		m.queued.add(start, end, m.callStart)
		m.mu.Unlock()
	}
}

// markCold notes, for the Do loops around the call of ctx, that an attempt
// of it ran from start to end and was cold (see attemptTimes): it waited
// for what a new client does once (a credential fetch), which fn's next
// call does not pay, so that the loop's margin leaves it out of fn's time
// (see doLoop.next): the part within the current call of fn that no cold
// attempt noted before covers, as markQueued notes waits (a prefetch that
// outlived its call of fn, noted whole in the next, dropped that call's
// own 800 ms: helper-180). Every loop's, whichever Retryer timed it, as
// the waits in a queue are.
func markCold(ctx context.Context, start, end time.Time) {
	for m := loopMarkOf(ctx); m != nil; m = m.outer {
		m.mu.Lock()
		m.cold.add(start, end, m.callStart)
		m.mu.Unlock()
	}
}

// latest returns the latest of times.
func latest(times ...time.Time) time.Time {
	var l time.Time
	for _, t := range times {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// queuedInCall returns how long SDK calls of the current call of fn waited
// in the queue (see markQueued).
func (m *loopMark) queuedInCall() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.queued.total
}

// coldInCall returns how long the cold attempts of the current call of fn
// took (see markCold).
func (m *loopMark) coldInCall() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cold.total
}

// takeThrottle reports whether a throttle was noted since the last take,
// and clears the mark.
func (m *loopMark) takeThrottle() bool { return m.throttled.Swap(false) }

// ownedBy returns m, or the nearest mark around it, of owner's loops; nil
// if none.
func (m *loopMark) ownedBy(owner *hooks) *loopMark {
	for ; m != nil && m.owner != owner; m = m.outer {
	}
	return m
}

// each calls fn on m and on the marks around it of the same owner.
func (m *loopMark) each(fn func(*loopMark)) {
	for o := m; o != nil; o = o.outer {
		if o.owner == m.owner {
			o.mu.Lock()
			fn(o)
			o.mu.Unlock()
		}
	}
}

// watchFailures returns release, noting in m and the marks of its owner
// around it the error of an attempt that failed, with failures (for the
// give-ups the loop reports), and, with a limiter that counted it as a
// throttle (counted, nil without a limiter), that the call was answered
// with one, if it is still the call of fn the attempt was made in (a
// goroutine fn left behind, answered in a later call, made that call's
// leftovers near misses: helper-202), and l as the call's lane (see
// loopMark.lane).
func (m *loopMark) watchFailures(release func(error) error, failures bool, counted *classifier, l *lane) func(error) error {
	call := m.calls.Load()
	return func(err error) error {
		if err != nil {
			var e stampedError
			if failures {
				e = m.owner.refusals.stamp(err)
			}
			current, throttled := m.calls.Load() == call, false
			if counted != nil && current {
				throttled, _ = counted.rateSignal(err)
			}
			m.each(func(o *loopMark) {
				if failures {
					o.failed.add(e)
				}
				switch {
				case throttled && !o.throttledLane.Load():
					o.answeredThrottled.Store(true)
					o.lane.Store(l)
					o.throttledLane.Store(true)
				case throttled:
					o.answeredThrottled.Store(true)
				case current && !o.throttledLane.Load():
					o.lane.Store(l) // the latest failed attempt's
				}
			})
		}
		return release(err)
	}
}

// noteGiveUp records g, reported under the context that carries m, in m and
// the marks of its owner around it; with, when g's Do loop returns its
// fn's error for it, the SDK's operation errors in it (see reported): the
// SDK makes one for each operation, so each stands for one SDK call,
// whichever retryer its client has, while fn's error itself may be fn's
// own sentinel, or wrap one.
func (m *loopMark) noteGiveUp(g *GiveUpError) {
	var operations []error
	if g.notRetried {
		operations = operationsWithin(g.Err)
	}
	m.each(func(o *loopMark) {
		o.reported.addOnce(stampedError{err: g})
		for _, op := range operations {
			o.reported.addOnce(stampedError{err: op})
		}
	})
}

// operationsWithin returns the *smithy.OperationError nodes of err.
func operationsWithin(err error) []error {
	var operations []error
	inChain(err, func(e error) bool {
		if op, ok := e.(*smithy.OperationError); ok {
			operations = append(operations, op)
		}
		return false // every node
	})
	return operations
}

// startCall forgets what the previous call of fn left; the call starts at
// now.
func (m *loopMark) startCall(now time.Time) {
	m.mu.Lock()
	m.failed, m.reported = recentErrors{}, recentErrors{}
	m.callStart, m.queued, m.cold = now, callSpans{}, callSpans{}
	m.mu.Unlock()
	m.sent.Store(false)
	m.waited.Store(false)
	m.answeredThrottled.Store(false)
	m.throttledLane.Store(false)
	m.lane.Store(nil)
	m.calls.Add(1)
}

// reportedAlready reports whether every give-up fn's error err carries was
// reported during the current call of fn, by the owner: so Do does not
// report it again. Then it claims the refusals of IsErrorRetryable it
// counted (see refusalLog.take), and passes on to the owner's loops around
// it what it found, so that they do not report it either.
//
// An error is reported when it is one of reported, or a refusal of
// IsErrorRetryable of an attempt that failed inside fn; or when its Unwrap
// leads to one; or, joined of several, when each is, or is the error of a
// reported refusal the SDK's middleware joins it with (see coveredBy).
// fn's own errors, joined with reported ones, are not.
func (m *loopMark) reportedAlready(err error) bool {
	m.mu.Lock()
	failed, reported := m.failed, m.reported
	m.mu.Unlock()
	refused := m.owner.refusals.snapshot()
	var found, claims []stampedError
	isReported := func(e error, inOperation bool) bool {
		for _, r := range reported.list() {
			if _, refusal := r.err.(*GiveUpError); r.err == e && (refusal || inOperation) {
				found = append(found, r)
				return true
			}
		}
		if !inOperation {
			return false
		}
		if q, ok := refused.refusalOf(e, failed.list()); ok {
			found, claims = append(found, q), append(claims, q)
			return true
		}
		return false
	}
	nodes := 0
	if !coveredBy(err, isReported, false, 0, &nodes) || !m.owner.refusals.take(claims) {
		return false
	}
	if o := m.outer.ownedBy(m.owner); o != nil {
		o.each(func(o *loopMark) {
			for _, f := range found {
				o.reported.addOnce(f)
			}
		})
	}
	return true
}

// coveredBy reports whether err is one known holds, or leads to one by
// Unwrap, or, joined of several, each of them is, or is the error of a
// refusal known holds that the SDK's middleware joins with it (a
// *GiveUpError of GetRetryToken: errors.Join(opErr, refusal)). Only
// pointers are known (see chainHolds), and known is told whether the path
// to one passed (or is) a *smithy.OperationError, which the SDK wraps
// every operation's error in: an SDK error is known only there, since fn
// may fail with the same pointer on its own (a sentinel). Like inChain it
// calls no method but Unwrap and stops at a nil pointer; an error of more
// than maxErrorNodes errors (nodes counts them, a shared one each time it
// is reached), or deeper than maxErrorDepth, is not covered: Do reports
// it.
func coveredBy(err error, known func(e error, inOperation bool) bool, inOperation bool, depth int, nodes *int) bool {
	if err == nil || depth > maxErrorDepth || holdsNil(err) {
		return false
	}
	if *nodes++; *nodes > maxErrorNodes {
		return false
	}
	if _, ok := err.(*smithy.OperationError); ok {
		inOperation = true
	}
	if isPointer(err) && known(err, inOperation) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return coveredBy(u.Unwrap(), known, inOperation, depth+1, nodes)
	case interface{ Unwrap() []error }:
		branches := u.Unwrap()
		if len(branches) > maxErrorNodes {
			return false
		}
		var uncovered []error
		for _, b := range branches {
			if !coveredBy(b, known, inOperation, depth+1, nodes) {
				uncovered = append(uncovered, b)
			}
		}
		for _, b := range uncovered {
			if !isPointer(b) || !slices.ContainsFunc(branches, func(s error) bool {
				g, ok := s.(*GiveUpError)
				return ok && g != nil && g.joined && g.Err == b && known(g, inOperation)
			}) {
				return false
			}
		}
		return len(branches) > 0
	}
	return false
}

// stampedError is an error and when, in the order of a Retryer's refusal
// log, it was seen.
type stampedError struct {
	err error
	seq uint64
}

// recentErrors holds the latest markMemory errors added.
type recentErrors struct {
	errs [markMemory]stampedError
	n    int
}

func (r *recentErrors) add(e stampedError) {
	r.errs[r.n%markMemory] = e
	r.n++
}

// addOnce adds e unless it holds e's error already: a pointer, or it is
// added anyway (comparing values may panic).
func (r *recentErrors) addOnce(e stampedError) {
	if !isPointer(e.err) || !slices.ContainsFunc(r.list(), func(h stampedError) bool { return h.err == e.err }) {
		r.add(e)
	}
}

// list returns the errors held, in no order.
func (r *recentErrors) list() []stampedError {
	return r.errs[:min(r.n, markMemory)]
}

// refusalLog holds the latest errors IsErrorRetryable reported refusing
// while a Do loop ran, so that the loop can tell, among the attempts that
// failed inside its fn, those the middleware refused (and so reported) from
// those a wrapper of the Retryer answered for it (retry.AddWithErrorCodes)
// or the SDK rewrapped (a clock skew): the class of the error does not say.
// Its order stamps those refusals and the failures the loops note, so that
// a refusal counts only for a failure released before it.
type refusalLog struct {
	seq     atomic.Uint64
	mu      sync.Mutex
	refused recentErrors
}

// stamp returns err stamped with the next place in the log's order.
func (l *refusalLog) stamp(err error) stampedError {
	return stampedError{err: err, seq: l.seq.Add(1)}
}

// add logs err while a Do loop runs (loops counts them), checked under the
// log's lock, as reset checks it: a refusal logged as the last loop ends
// would stay, with what its error reaches, until another loop ends.
func (l *refusalLog) add(err error, loops *atomic.Int64) {
	l.mu.Lock()
	if loops.Load() > 0 {
		l.refused.add(l.stamp(err))
	}
	l.mu.Unlock()
}

// snapshot returns the refusals the log holds.
func (l *refusalLog) snapshot() recentErrors {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// reset forgets every refusal when no Do loop runs (loops counts them):
// none can claim them then, and they would keep what their errors reach (a
// response, its request's context) alive. A loop that starts meanwhile
// counts itself before its refusals can reach the log, so the count read
// under the log's lock spares them.
func (l *refusalLog) reset(loops *atomic.Int64) {
	l.mu.Lock()
	if loops.Load() == 0 {
		l.refused = recentErrors{}
	}
	l.mu.Unlock()
}

// refusalOf returns the refusal of r that is e and, made after one of
// failed was released, is or holds that failure. Errors are matched by
// identity (see chainHolds): an error that is a pointer shared by
// operations (a package-level sentinel), refused in another operation while
// a wrapper answered for this one, can still be taken for this one's.
func (r recentErrors) refusalOf(e error, failed []stampedError) (stampedError, bool) {
	for _, q := range r.list() {
		if q.err != e {
			continue
		}
		for _, f := range failed {
			if q.seq > f.seq && chainHolds(q.err, f.err) {
				return q, true
			}
		}
	}
	return stampedError{}, false
}

// take removes the refusals qs from the log, and reports whether each was
// still there: each excuses one loop's report only.
func (l *refusalLog) take(qs []stampedError) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, q := range qs {
		if slices.ContainsFunc(qs[:k], func(p stampedError) bool { return p.seq == q.seq }) {
			continue // found twice in one error
		}
		i := slices.IndexFunc(l.refused.list(), func(e stampedError) bool { return e.seq == q.seq && e.err != nil })
		if i < 0 {
			return false
		}
		l.refused.errs[i].err = nil
	}
	return true
}

// chainHolds reports whether target itself is err or in err's chain (see
// inChain), by identity: only a pointer is found. Two values can be equal
// without being the same error (a value refused in one operation, and an
// equal one another returns), and comparing some panics (a struct holding a
// slice-based error).
func chainHolds(err, target error) bool {
	if target == nil || reflect.ValueOf(target).Kind() != reflect.Pointer {
		return false
	}
	return inChain(err, func(e error) bool { return e == target })
}
