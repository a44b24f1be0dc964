package jitterretry

// This file owns the learnt deadline margin: estimates of how long a
// lane's attempts take, one per SDK operation and one over all of them,
// kept from a sample of the attempts without allocating.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
)

// The deadline check refuses a retry whose backoff plus the attempt after it
// would end past the deadline. Unless Options.DeadlineMargin fixes it, the
// attempt's time is estimated from the last attemptSamples measured attempts
// of the same operation (service, operation name and region) in the lane:
// a Scan that takes a second says nothing of how long a PutItem takes, and
// a margin learnt from it would refuse the PutItem's retries; nor does a
// PutItem in another region (see operationKey). Every attempt
// of a lane is measured until attemptSamples have been, so that a new
// client (a Lambda cold start) has an estimate from its first failed
// attempt on, then, at random, one in 2, 4, 8 and at last
// attemptSampleEvery, the interval doubling as the window turns over (see
// draw), in every case only while fewer than attemptProbes are being
// measured at once; but an
// attempt drawn (or made before the lane's estimate is full) of an
// operation with no sample yet is timed on a probe of its own when every
// probe is taken (more first attempts in flight than probes left one
// untimed to fail first, with a margin of 0: helper-123). An operation
// first seen once the lane's estimate is full (a client of another region
// joining a warm retryer) has its attempts timed as rarely as the rest, so its margin is 0, as without a deadline check, until
// one of them is: looking its estimate up on every attempt would cost
// every attempt of the lane a hash of its name (helper-148). Only the
// attempts inside a Do loop look it up every time (see clientFor).
// The draw is
// the runtime's per-thread generator's, not Options.Source's: it writes
// nothing that other cores read, where a shared count of attempts would
// move one cache line between cores on every attempt, and it leaves the
// jitter's sequence from a seeded Source as it was; which attempts are
// timed never decides a delay. The estimate is the largest sample while
// there are fewer than attemptSamplesForSecond, then the second largest: of
// a full window, about the 95th percentile, and one stall alone does not
// make it (the largest until the window was full let one 1.5 s answer
// among a new client's first ten of 2 ms refuse the next 21 operations'
// retries under 2 s deadlines: helper-200; of two samples, one slow, which
// is the stall is not known). An attempt
// during which its caller's context ended is not a sample: it took what
// the caller allowed, not what the service needed. Ended by the caller's
// deadline (or cut by AttemptTimeout at it), it is a lower bound, which
// only sendMargin uses (the send-rate limiter's wait, and whether a
// refusal for the deadline holds its caller), and only until the estimate
// has a warm sample (see attemptEstimate.cutFloor): a new client whose
// every attempt after its cold first ones was ended by its deadline
// learnt nothing, and the limiter, whose queue hands its turns first come,
// first served, to the callers that have waited longest and so have the
// least time left, sent each turn with whatever time was left (a new client,
// 150 ms answers, 32 callers with deadlines of 50-300 ms and 20 sends a
// second: 2 successes in 5 s, 104 sends ending past their deadlines:
// helper-207). Counted as samples, such cuts made margins of a deadline's
// length that refused the retries RetryDelay judges, where
// retry.NewStandard() made them: a client of 50 ms answers, a fifth of
// them hanging past 400 ms deadlines, refused 30-54 retries of fast 5xx in
// 10 s against 0-4; a slow period kept refusing for some 500 attempts
// after it; two hangs of a new client refused its next retry (helper-211).
//
// The SDK's middleware skips an attempt's release when it cannot rewind the
// request's body for a retry (an upload from a pipe). A probe whose release
// has not come for probeStuckAfter is replaced when every probe is taken,
// so that such attempts cannot stop the sampling; a release that comes
// after all still times its attempt, on the probe it was given.
//
// An attempt that began before any measured attempt of its estimate (the
// lane's, or its operation's) came back is cold: it waited for what a new
// client does once (credentials fetched for its signature from IMDS, a
// container endpoint or STS, hundreds of milliseconds; DNS, TCP and TLS
// handshakes), which the attempts after it do not. Its time is the
// estimate while nothing better is known (Do's first conflict window is
// sized from it), but keeps no margin (see Retryer.margin): how much of it
// a retry would not pay is unknown. The first warm sample of an estimate
// replaces its cold ones, and a cold one that comes back after it is left
// out. (Counted as any sample, a 400 ms credential fetch in a PutItem's
// first attempt made a margin of 805 ms that refused its retry with 598 ms
// left, where the retry needed a millisecond and retry.NewStandard() made
// it; and Do sized its first conflict's window from it, 1-5 s against
// 0.5-7 ms warm: an outside hunt, hunt277. Counted once, an 800 ms one
// still refused it: helper-174.)
//
// A lane keeps the estimates of maxOperationTimes operations at most; an
// operation beyond them has no estimate of its own (a margin of 0, as
// before its first attempt). Every sample also feeds the lane's estimate
// over all its operations: the round trip the send-rate limiter uses, and
// Do before fn made an SDK call through the Retryer (after, Do reads the
// estimate over that call's client's operations: see clientAll).
const (
	attemptSamples          = 32
	attemptSamplesForSecond = 4
	attemptSampleEvery      = 16
	attemptProbes           = 8
	probeStuckAfter         = 10 * time.Second
	maxOperationTimes       = 64
)

// operationKey names an SDK operation: its service ID, operation name and
// the client's region, all "" for attempts outside the SDK's middleware.
// The region keeps apart the clients of a configuration shared across
// regions (one retryer from config.WithRetryer, clients of a global
// table's replicas): a PutItem to a region 300 ms away says nothing of
// one in the caller's own, and a margin learnt from it refused every one of
// the near region's retries under a 450 ms deadline, which
// retry.NewStandard() made (helper-147). Clients of one region and
// service, on different endpoints or credentials, still share an estimate
// (see the README's Deadlines).
type operationKey struct{ service, operation, region string }

// operationOf returns the key of the SDK operation ctx belongs to.
func operationOf(ctx context.Context) operationKey {
	return operationKey{awsmiddle.GetServiceID(ctx), awsmiddle.GetOperationName(ctx), awsmiddle.GetRegion(ctx)}
}

// attemptTimes estimates how long a lane's attempts take.
type attemptTimes struct {
	// failed, when not nil, is told the time of each timed attempt that
	// failed (see init).
	failed func(error, time.Duration)
	now    func() time.Time
	epoch  time.Time         // probes keep their start as the time since it
	then   func(error) error // the lane's release, which every probe's calls

	// probes are the releases that measure an attempt, built once and
	// replaced only when stuck: a sampled attempt takes a free probe,
	// which records its start.
	probes [attemptProbes]atomic.Pointer[attemptProbe]

	all attemptEstimate // every sample of the lane
	// every is how many attempts there are to one timed, a power of two:
	// 0 (every attempt) until the lane's estimate is full, then doubled
	// each time its window turns over, up to attemptSampleEvery (see
	// draw).
	every atomic.Uint32
	// ops maps an operation name to the estimates of the operations of
	// that name, one per service and region, chained. It is replaced, never changed,
	// so that the attempts read it without a lock; keyed by the name
	// alone, a lookup hashes one short string.
	ops   atomic.Pointer[map[string]*attemptEstimate]
	count atomic.Int32 // estimates in ops: none is added beyond maxOperationTimes
	mu    sync.Mutex   // adds to ops

}

type attemptProbe struct {
	busy  atomic.Bool
	start atomic.Int64 // since the epoch; read by measure to find a stuck probe
	// Written by the goroutine that set busy.
	ctx context.Context
	op  *attemptEstimate // nil when the operation has no estimate of its own
	// release records the attempt and calls the lane's release.
	release func(error) error
}

// init starts the estimates on clock now; then is the release every
// attempt's release calls after its timing, and failed, when not nil, is
// told the time of every timed attempt that failed, with its error.
func (a *attemptTimes) init(now func() time.Time, then func(error) error, failed func(error, time.Duration)) {
	a.now, a.epoch, a.then, a.failed = now, now(), then, failed
	a.ops.Store(&map[string]*attemptEstimate{})
	for i := range a.probes {
		a.probes[i].Store(a.newProbe())
	}
}

func (a *attemptTimes) newProbe() *attemptProbe {
	p := &attemptProbe{}
	p.release = func(err error) error {
		// A second release of the same attempt (a caller's bug) finds
		// no context, or another attempt's: it must not panic. An
		// attempt during which the caller's context ended, or that
		// AttemptTimeout cut (at that deadline, less its reserve, so the
		// context had not ended yet, or at its own limit), took what the
		// caller allowed, not what the service takes: it is no sample.
		ctx := p.ctx
		switch {
		case ctx == nil:
		case ctx.Err() == nil && !wasCut(err):
			start, end := time.Duration(p.start.Load()), a.since()
			if a.record(p.op, start, end) {
				markCold(ctx, a.epoch.Add(start), a.epoch.Add(end))
			}
			if err != nil && a.failed != nil {
				a.failed(err, end-start)
			}
		case endedByDeadline(ctx, err):
			a.recordCut(p.op, time.Duration(p.start.Load()), a.since())
		}
		p.ctx, p.op = nil, nil
		p.busy.Store(false)
		return a.then(err)
	}
	return p
}

// since returns the time since the epoch.
func (a *attemptTimes) since() time.Duration { return a.now().Sub(a.epoch) }

// measure returns a release that records the time of the attempt under ctx
// before calling then, for every attempt until the lane's estimate has
// attemptSamples warm samples (cold ones never fill it) and those draw
// picks after, while a probe is free, and then
// itself otherwise, but for an operation with no warm sample yet, whose
// every attempt that gets here is timed. It never allocates but to add an
// operation, to replace a stuck probe, or to time such an attempt when
// every probe is taken. (An operation first seen once one attempt in 16 is
// timed, a client of another region joining a warm retryer, has its first
// timed attempt judged cold, since nothing tells whether it was the
// client's first: its margin is 0 until a second one is timed, some 32
// attempts. Looking every attempt's operation up to time the second at
// once costs some 150 ns an attempt.) With timeUnwarmed, while a Do loop
// runs, whose attempts look their operation up anyway (see markClient),
// every attempt of an operation with no warm sample is timed, so that a
// loop learns of its client's cold first attempt (left untimed, its
// credential fetch stayed in fn's time, and a 1 s fetch refused the
// conflict's retry with 998 ms left: helper-181).
func (a *attemptTimes) measure(ctx context.Context, then func(error) error, timeUnwarmed bool) func(error) error {
	if a.now == nil {
		return then
	}
	sampled := a.draw()
	if !sampled && !timeUnwarmed {
		return then
	}
	op := a.operation(operationOf(ctx))
	if !sampled && (op == nil || op.warmed.Load()) {
		return then
	}
	for i := range a.probes {
		p := a.probes[i].Load()
		if !p.busy.Load() && p.busy.CompareAndSwap(false, true) {
			p.ctx, p.op = ctx, op
			p.start.Store(int64(a.since()))
			return p.release
		}
	}
	// Every probe is taken: replace one held for probeStuckAfter. (One
	// taken since the load may still show its last attempt's start: it
	// is replaced too, and keeps timing its attempt.)
	now := a.since()
	for i := range a.probes {
		p := a.probes[i].Load()
		if p.busy.Load() && now-time.Duration(p.start.Load()) >= probeStuckAfter {
			fresh := a.startedProbe(ctx, op, now)
			if a.probes[i].CompareAndSwap(p, fresh) {
				return fresh.release
			}
		}
	}
	if op != nil && !op.warmed.Load() {
		// The operation has no warm sample yet: an attempt left untimed
		// may be the first to fail, and its retry would meet a margin of
		// 0 (more first attempts in flight than probes). A probe of its
		// own, for the cold start only.
		return a.startedProbe(ctx, op, now).release
	}
	return then
}

// draw reports whether to time an attempt: every one until the lane's
// estimate is full, then one in 2, 4, 8 and at last attemptSampleEvery, at
// random, the interval doubling each time the estimate's window of
// attemptSamples turns over. So the window holds about the last 64, 128,
// 256 attempts on the way, each sample standing for as many attempts as
// its neighbours: dropping at once to one in 16 left the first 32 attempts
// in the window for some 500 more, and two 800 ms answers among them
// refused every retry under a 1 s deadline for the next 48 to 74
// operations, where each retry needed a millisecond (helper-199).
func (a *attemptTimes) draw() bool {
	every := a.every.Load()
	return every <= 1 || rand.Uint32()&(every-1) == 0
}

// drawLess halves how often draw times an attempt, down to one in
// attemptSampleEvery.
func (a *attemptTimes) drawLess() {
	for {
		every := a.every.Load()
		if every >= attemptSampleEvery || a.every.CompareAndSwap(every, max(2*every, 2)) {
			return
		}
	}
}

// startedProbe returns a new probe, busy timing the attempt under ctx of
// operation op that started at now (since the epoch).
func (a *attemptTimes) startedProbe(ctx context.Context, op *attemptEstimate, now time.Duration) *attemptProbe {
	p := a.newProbe()
	p.busy.Store(true)
	p.ctx, p.op = ctx, op
	p.start.Store(int64(now))
	return p
}

// operation returns the estimate of operation k, adding one when there is
// room; nil when there is none.
func (a *attemptTimes) operation(k operationKey) *attemptEstimate {
	if e := a.lookup(k); e != nil || a.count.Load() >= maxOperationTimes {
		return e
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.lookup(k); e != nil || a.count.Load() >= maxOperationTimes {
		return e
	}
	ops := *a.ops.Load()
	grown := make(map[string]*attemptEstimate, len(ops)+1)
	e := &attemptEstimate{service: k.service, region: k.region, next: ops[k.operation]}
	e.client, e.clientAll = e, new(attemptEstimate)
	for name, other := range ops {
		grown[name] = other
		for ; other != nil; other = other.next {
			if other.service == k.service && other.region == k.region {
				e.client, e.clientAll = other.client, nil
			}
		}
	}
	grown[k.operation] = e
	a.ops.Store(&grown)
	a.count.Add(1)
	return e
}

// lookup returns the estimate of operation k, or nil.
func (a *attemptTimes) lookup(k operationKey) *attemptEstimate {
	for e := (*a.ops.Load())[k.operation]; e != nil; e = e.next {
		if e.service == k.service && e.region == k.region {
			return e
		}
	}
	return nil
}

// record adds the time of one attempt, from start to end (since the
// epoch), to the lane's estimate and to op's, if any, each judging
// whether it was cold, and reports whether it was: by op's client, or,
// with no op, by the lane.
func (a *attemptTimes) record(op *attemptEstimate, start, end time.Duration) (cold bool) {
	if end < start {
		return false
	}
	cold = a.all.begunCold(start, end)
	if a.all.record(end-start, cold) {
		a.drawLess()
	}
	if op != nil {
		cold = op.client.begunCold(start, end)
		op.record(end-start, cold)
		op.client.clientAll.record(end-start, cold)
	}
	return cold
}

// recordCut adds the time of one attempt its caller's deadline ended, from
// start to end (since the epoch), a lower bound of the attempt's time, to
// the cut floor of op's estimate, which sendTimeOf reads, when the attempt
// began after op's client's first sample came back (a cut says nothing of
// when the client's one-time costs were paid: taken for that moment, a
// cut during a new client's credential fetch made the attempts that
// waited for the same fetch warm samples, and their margin refused a
// retry that retry.NewStandard() made: helper-212).
func (a *attemptTimes) recordCut(op *attemptEstimate, start, end time.Duration) {
	if op != nil && end >= start && op.client.begunWarm(start) {
		op.recordCut(end - start)
	}
}

// clientFor returns the estimate of the client (see attemptEstimate.client)
// that makes the attempts of operation k, adding k's estimate when there
// is room, as a timed attempt would; nil when there is none. A Do loop
// asks for every attempt of its fn's calls, so that it finds the client
// before any of its attempts was timed (one in attemptSampleEvery, once
// the lane's estimate is full): falling back to the lane's estimate, a
// near region's loop met a far one's times (helper-150). With no room for
// k's estimate, it is the client of another operation of k's service and
// region, if the lane has one (helper-151).
func (a *attemptTimes) clientFor(k operationKey) *attemptEstimate {
	if a.now == nil {
		return nil
	}
	if e := a.operation(k); e != nil {
		return e.client
	}
	for _, e := range *a.ops.Load() {
		for ; e != nil; e = e.next {
			if e.service == k.service && e.region == k.region {
				return e.client
			}
		}
	}
	return nil
}

// estimate returns the expected time of the lane's next attempt, of any
// operation, without headroom: 0 before any attempt was measured.
func (a *attemptTimes) estimate() time.Duration {
	return a.all.estimate()
}

// read returns estimate, and whether it rests on cold samples only.
func (a *attemptTimes) read() (time.Duration, bool) { return a.all.read() }

// estimateOf returns the expected time of the next attempt of operation k,
// without headroom: 0 before any of its attempts was measured; and whether
// it rests on cold samples only.
func (a *attemptTimes) estimateOf(k operationKey) (time.Duration, bool) {
	if a.now == nil {
		return 0, false
	}
	if e := a.lookup(k); e != nil {
		return e.read()
	}
	return 0, false
}

// sendTimeOf returns the time of an attempt of operation k after a wait in
// the send-rate limiter's queue (see Retryer.sendMargin): its estimate,
// once warm; before, its cut floor, the longest warm attempt its caller's
// deadline ended, or 0.
func (a *attemptTimes) sendTimeOf(k operationKey) time.Duration {
	if a.now == nil {
		return 0
	}
	e := a.lookup(k)
	if e == nil {
		return 0
	}
	return max(warmOnly(e.read()), time.Duration(e.cutFloor.Load()))
}

// attemptEstimate is the estimate from one stream of samples: of one
// operation of a service, or of all of a lane's.
type attemptEstimate struct {
	service string           // the operation's service
	region  string           // and its client's region
	next    *attemptEstimate // the estimate of another service's or region's operation of the same name
	// client is the lane's first estimate of the same service and
	// region (this one, if it was the first): its warmFrom says when
	// that client's first attempt came back, which tells its other
	// operations' cold attempts from warm ones.
	client *attemptEstimate
	// clientAll, of a client's estimate, is the estimate over all the
	// client's operations: Do's, whose fn may call several (nil for the
	// others).
	clientAll *attemptEstimate

	// est is the current estimate in nanoseconds, or, while every sample
	// taken is cold (and there is one), -1 less it: one word, so that a
	// reader never pairs a cold estimate with a warm flag (read as warm,
	// twice a credential fetch made the margin) or the other way round.
	est    atomic.Int64
	full   atomic.Bool // attemptSamples warm samples taken
	warmed atomic.Bool // a warm sample was taken

	// warmFrom is when the estimate's first sample came back, since the
	// lane's epoch, plus one: 0 until then. An attempt begun before it is
	// cold: before the lane's for its estimate over all operations, before
	// its client's (see client) for an operation's.
	warmFrom atomic.Int64

	// cutFloor is the longest warm attempt its caller's deadline ended
	// (see recordCut) until a warm sample was taken, 0 after, in
	// nanoseconds.
	cutFloor atomic.Int64

	mu      sync.Mutex
	samples [attemptSamples]time.Duration
	at      int // where the next sample goes
}

// record adds a sample, cold or not (see attemptTimes): the first warm one
// replaces the cold ones, and a cold one after it is left out. Cold
// samples never make the estimate full: while it is not, every attempt is
// timed (see attemptTimes.measure), and a burst of 32 first attempts at once, cold,
// left the attempts after it timed one in 16, with no margin until one was
// (helper-176: 15 attempts on average, 85 at worst). It reports whether a
// warm sample filled the window's last place, turning it over.
func (e *attemptEstimate) record(took time.Duration, cold bool) (turned bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	warm := e.warmed.Load() // written under e.mu only
	switch {
	case cold && warm:
		return false
	case !cold && !warm:
		e.samples, e.at, warm = [attemptSamples]time.Duration{}, 0, true
		e.warmed.Store(true)
		e.cutFloor.Store(0)
	}
	e.samples[e.at] = took
	e.at = (e.at + 1) % attemptSamples
	turned = e.at == 0 && warm
	full := e.full.Load()
	if turned && !full {
		full = true
		e.full.Store(true)
	}
	var first, second time.Duration
	for _, s := range e.samples {
		switch {
		case s > first:
			first, second = s, first
		case s > second:
			second = s
		}
	}
	if !full && e.at < attemptSamplesForSecond {
		second = first
	}
	if cold {
		e.est.Store(-1 - int64(second))
	} else {
		e.est.Store(int64(second))
	}
	return turned
}

// begunCold reports whether the attempt measured from start to end (since the
// lane's epoch) began before the estimate's first sample came back; the
// first sample itself is cold unless it took no time. The operations of
// a service in a region judge by their client's estimate (see client), so
// that a client that joins a warm lane (another region's, sharing the
// retryer) has its cold start counted as one, while a warm client's first
// call of another operation is warm (counted as one, it halved that
// operation's first margin: helper-148).
func (e *attemptEstimate) begunCold(start, end time.Duration) bool {
	e.warmFrom.CompareAndSwap(0, int64(end)+1)
	return start < time.Duration(e.warmFrom.Load()-1)
}

// begunWarm reports whether an attempt that began at start (since the
// lane's epoch) began after the estimate's first sample came back: false
// while none has.
func (e *attemptEstimate) begunWarm(start time.Duration) bool {
	w := e.warmFrom.Load()
	return w != 0 && start >= time.Duration(w-1)
}

// recordCut raises the cut floor to took, the time of a warm attempt its
// caller's deadline ended, while the estimate has no warm sample.
func (e *attemptEstimate) recordCut(took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.warmed.Load() && int64(took) > e.cutFloor.Load() {
		e.cutFloor.Store(int64(took))
	}
}

// read returns the estimate, and whether it rests on cold samples only.
func (e *attemptEstimate) read() (est time.Duration, cold bool) {
	v := e.est.Load()
	if v < 0 {
		return time.Duration(-1 - v), true
	}
	return time.Duration(v), false
}

// estimate returns the estimate, cold or not.
func (e *attemptEstimate) estimate() time.Duration {
	est, _ := e.read()
	return est
}
