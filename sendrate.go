package jitterretry

// This file owns the send-rate limiter's control: the rate it learns from
// the service's answers. Pacing at that rate is the send queue's
// (sendqueue.go); an attempt's wait is sendwait.go's.

import (
	"math"
	"sync"
	"time"
)

// SendRateOptions configures the adaptive send-rate limiter (see
// Options.SendRate). The zero value of every field means its default.
type SendRateOptions struct {
	// InitialRate is the send rate, in requests per second, the limiter
	// starts at, clamped to [MinRate, MaxRate], and returns to after an
	// idle spell; it probes upwards from there like from any rate. Zero (or
	// +Inf) means unlimited: the limiter does nothing until the service
	// throttles.
	InitialRate float64

	// MinRate is the floor the rate never drops below, in requests per
	// second. Zero means 1.
	MinRate float64

	// MaxRate is the ceiling the rate never grows above, in requests per
	// second. Zero means none; a ceiling below MinRate is invalid.
	MaxRate float64
}

// The limiter's numbers. BENCHMARKS.md, section 4, has the measurements
// behind them.
const (
	// sendWindow is how often the limiter closes a window of answers and,
	// when nothing was throttled beyond the background and the rate was in
	// use, raises the rate; the longest a waiting caller sleeps before
	// asking again.
	sendWindow     = 100 * time.Millisecond
	defaultMinRate = 1.0
	// An episode of throttles ends once its answers show, by more than
	// three standard deviations, a throttled share above the background
	// (at least episodeMin answers), or, without a cut, after
	// episodeMaxAnswers answers or episodeMax.
	episodeMin        = 20
	episodeMaxAnswers = 100
	episodeMax        = time.Second
	// A cut is judged on at least evalMin answers to requests sent after
	// it, sooner when they are clear, and after evalMaxAnswers answers or
	// evalMax at the latest.
	evalMin        = 40
	evalMaxAnswers = 200
	evalMax        = time.Second
	// probeStep is the additive probe above the known capacity, in
	// requests per second per window: the same for every client, so that
	// clients sharing a capacity converge to equal shares (AIMD). After
	// streakWindows windows in a row without excess throttles the probe
	// grows multiplicatively instead: the capacity is higher than known.
	probeStep     = 1.0
	streakWindows = 10
	// cutTo is the share of the measured capacity a cut keeps, leaving the
	// service's burst room to refill; minCutTo bounds one cut: a deeper fall
	// of capacity takes a chain of cuts, each judged on the answers after
	// it.
	cutTo    = 0.95
	minCutTo = 0.1
	// The first rise after a cut is firstGrowth, and each further window
	// without excess throttles doubles it, up to maxGrowth: gentle near the
	// capacity just found, and ten times the rate in a second and a half
	// when nothing throttles.
	firstGrowth = 0.05
	maxGrowth   = 0.25
	// holdFirst is how long, after throttles were found not to follow the
	// rate, their level counts as background; each such finding doubles it
	// up to holdMax.
	holdFirst = time.Second
	holdMax   = 30 * time.Second
	// peakHalfLife is how fast the highest rate the service accepted ages;
	// idleReset is the idle spell after which the limiter starts over.
	peakHalfLife = 30 * time.Second
	// A jump back to the peak that the service throttles waits jumpFirst
	// before the next, doubling up to jumpMax.
	jumpFirst = time.Second
	jumpMax   = 8 * time.Second
	idleReset = time.Minute
	// backgroundTau is the time constant with which the background throttle
	// level follows the answers outside episodes.
	backgroundTau = 10 * time.Second
)

// sendRate is an adaptive client-side send-rate limiter. It paces attempts
// through a queue at a rate it learns from the answers, and tells "we send
// too fast" from "throttled anyway":
//
//   - An episode starts with a throttle the background level does not
//     explain. Its first episodeAnswers answers give the throttled share f;
//     when f exceeds the background b (by a margin for the count), the rate
//     is cut to cutTo * S * (1-f)/(1-b), S being the send rate of the last
//     window or two: the capacity this client gets, measured. A cut keeps
//     at least minCutTo of S.
//   - Every cut is tested: the answers to requests sent after it should be
//     throttled much less if the cut helped (capacity throttles), and as
//     much if it did not (throttles that other tenants, or chance, cause,
//     or a share of a fleet so small that this client's rate changes
//     nothing). In the second case the cut is undone and f becomes the
//     background for a hold that doubles with each such finding: the
//     limiter never falls toward its floor on throttles it cannot help.
//   - A window without excess throttles, whose rate was in use, raises the
//     rate: back to the capacity measured at recent cuts at once when it
//     is far below it (the capacity returned), otherwise by a step that
//     starts at firstGrowth and doubles.
//   - After an idle minute it starts over from InitialRate.
//
// A small client of a fleet thus stays unlimited and competes as the SDK's
// retryer does, while the clients whose cuts move the throttle rate cut,
// which hands the capacity toward the smaller ones: shares converge.
//
// It is safe for concurrent use. The zero value is an unlimited limiter
// with the default options.
type sendRate struct {
	mu sync.Mutex
	q  sendQueue

	minRate, maxRate float64
	initialRate      float64 // +Inf when unlimited
	ready            bool

	win, prev answers // the current window and the one before
	lastSeen  time.Time

	episode answers // since the first unexplained throttle; start zero when none
	eval    cutTest // the test of the last cut; active when cutAt is set

	background float64 // throttled share that does not follow the rate
	holdUntil  time.Time
	hold       time.Duration

	// known is the capacity measured: the rate a cut settled at, raised by
	// every window the service accepted more. peak is the highest known,
	// aging, for a quick return when the capacity comes back.
	known    float64
	peak     float64
	peakAt   time.Time
	jumped   time.Time // when the rate last jumped back to the peak
	jumpWait time.Duration
	streak   int // windows in a row without excess throttles, since the last cut
	growth   float64
	cuts     int

	trace func(format string, args ...any) // tests only
}

func (l *sendRate) tracef(format string, args ...any) {
	if l.trace != nil {
		l.trace(format, args...)
	}
}

// answers counts answers (and places sent) from start on.
type answers struct {
	start    time.Time
	ok, thr  int
	sent     float64
	duration time.Duration // of a closed window
}

func (a answers) total() int { return a.ok + a.thr }

// throttled returns the throttled share of the answers, with half an
// answer of each kind added, so that a share is never exactly 0 or 1: a
// cut sized from "all throttled" still measures some capacity.
func (a answers) throttled() float64 {
	return (float64(a.thr) + 0.5) / (float64(a.total()) + 1)
}

// cutTest is a cut under test.
type cutTest struct {
	cutAt      time.Time
	countFrom  time.Time // answers before this are to requests sent before the cut
	from       float64   // the rate before the first cut of the chain
	sendRate   float64   // S, the send rate before the cut
	throttled  float64   // f, the throttled share that caused it
	answers    int       // the answers f was measured on
	background float64   // b then
	after      answers
}

func (c cutTest) active() bool { return !c.cutAt.IsZero() }

func newSendRate(o SendRateOptions) *sendRate {
	l := &sendRate{}
	l.init(o)
	return l
}

func (l *sendRate) init(o SendRateOptions) {
	o = o.withDefaults()
	l.minRate, l.maxRate = o.MinRate, o.MaxRate
	l.initialRate = math.Inf(1)
	if o.InitialRate > 0 {
		l.initialRate = l.clamp(o.InitialRate)
	}
	l.q.init(l.initialRate)
	l.growth, l.ready = firstGrowth, true
}

func (l *sendRate) initLocked() {
	if !l.ready {
		l.init(SendRateOptions{})
	}
}

func (o SendRateOptions) validate() error {
	switch {
	case o.InitialRate < 0 || math.IsNaN(o.InitialRate):
		return &OptionsError{Option: "SendRate.InitialRate", Reason: "must be zero (unlimited) or positive"}
	case o.MinRate < 0 || math.IsNaN(o.MinRate) || math.IsInf(o.MinRate, 1):
		return &OptionsError{Option: "SendRate.MinRate", Reason: "must be zero (default 1) or a positive finite rate"}
	case o.MaxRate < 0 || math.IsNaN(o.MaxRate):
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must be zero (none) or positive"}
	case o.MaxRate > 0 && o.MaxRate < o.withDefaults().MinRate:
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must not be below MinRate (default 1)"}
	}
	return nil
}

func (o SendRateOptions) withDefaults() SendRateOptions {
	if !(o.MinRate > 0) || math.IsInf(o.MinRate, 1) {
		o.MinRate = defaultMinRate
	}
	if !(o.MaxRate > 0) || o.MaxRate < o.MinRate {
		o.MaxRate = math.Inf(1)
	}
	return o
}

// currentRate returns the rate in requests per second; +Inf while unlimited.
func (l *sendRate) currentRate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	return l.q.rate
}

// cutCount returns how many cuts the limiter made (undone ones included).
func (l *sendRate) cutCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts
}

// forgettable reports whether a new limiter would behave the same.
func (l *sendRate) forgettable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	return l.q.rate == l.initialRate && !l.q.waiting() && l.known == 0 && l.peak == 0 && l.background == 0
}

// reserve takes the next place in the queue at time now; the caller then
// asks delay how long to wait, and gives the place back with cancel if it
// does not send.
func (l *sendRate) reserve(now time.Time) sendPlace {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	p, due := l.q.reserve()
	if due {
		l.win.sent++
	}
	return p
}

// delay returns how long, from now and at the current rate, p waits before
// it may be sent, and a channel closed when that may change (see
// sendQueue.delay); a waiter sleeps until the first of the delay, a window
// and the channel, and asks again.
func (l *sendRate) delay(p sendPlace, now time.Time) (time.Duration, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	return l.q.delay(p)
}

// cancel gives back a place that will not be sent.
func (l *sendRate) cancel(p sendPlace, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	l.q.cancel(p, now)
}

// observe records an answer seen at time now: throttled, or a success.
// Other failures carry no rate signal and need not be reported. rtt is the
// expected round trip of a request: answers within it of a cut belong to
// requests sent before the cut.
func (l *sendRate) observe(now time.Time, throttled bool, rtt time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	l.lastSeen = now
	count := func(a *answers) {
		if throttled {
			a.thr++
		} else {
			a.ok++
		}
	}
	count(&l.win)
	switch {
	case l.eval.active():
		if !now.Before(l.eval.countFrom) {
			count(&l.eval.after)
		}
		l.judgeLocked(now, false)
	case !l.episode.start.IsZero():
		count(&l.episode)
		l.endEpisodeLocked(now, rtt)
	case throttled:
		l.episode = answers{start: now, thr: 1}
	}
}

// zAbove returns how many standard deviations a throttled share f over n
// answers lies above the background b, using the larger of the two shares
// for the variance (and at least that of a 5% share).
func zAbove(f, b float64, n int) float64 {
	if n == 0 {
		return 0
	}
	p := max(f, b)
	return (f - b) / math.Sqrt(max(p*(1-p), 0.0475)/float64(n))
}

// zDrop returns how many standard deviations the throttled share fell from
// before (over nb answers) to after (over na answers).
func zDrop(before float64, nb int, after float64, na int) float64 {
	if nb == 0 || na == 0 {
		return 0
	}
	p := (before*float64(nb) + after*float64(na)) / float64(nb+na)
	return (before - after) / math.Sqrt(max(p*(1-p), 0.0475)*(1/float64(nb)+1/float64(na)))
}

// endEpisodeLocked cuts when the episode's answers show throttles the
// background does not explain, or drops the episode when they do not.
func (l *sendRate) endEpisodeLocked(now time.Time, rtt time.Duration) {
	e := l.episode
	n := e.total()
	b := l.background
	if now.Before(l.holdUntil) {
		b = min(b+0.1, 0.99) // just found not to follow the rate: ask for more
	}
	z := zAbove(e.throttled(), b, n)
	last := n >= episodeMaxAnswers || now.Sub(e.start) >= episodeMax
	switch {
	case n >= episodeMin && z >= 3:
		l.episode = answers{}
		l.cutLocked(now, e.throttled(), n, rtt, nil)
	case last, n >= episodeMin && z <= 0:
		l.episode = answers{}
	}
}

// cutLocked cuts for a throttled share f, measured on n answers, and puts
// the cut under test: the first of a chain, or, after chain, the next one.
func (l *sendRate) cutLocked(now time.Time, f float64, n int, rtt time.Duration, chain *cutTest) {
	// What the client sends now: the windows may still hold sends from
	// before the last cut.
	s := min(l.sendRateLocked(now), l.q.rate)
	keep := max((1-f)/(1-min(l.background, 0.9)), minCutTo)
	target := max(cutTo*s*keep, minCutTo*s)
	if !math.IsInf(l.q.rate, 1) {
		target = min(target, l.q.rate*cutTo)
	}
	from := l.q.rate
	if chain != nil {
		from = chain.from
	}
	l.eval = cutTest{
		cutAt: now, countFrom: now.Add(max(rtt, time.Millisecond)),
		from: from, sendRate: s, throttled: f, answers: n, background: l.background,
	}
	l.tracef("%v cut f=%.2f b=%.2f S=%.0f from %.0f to %.0f", now.Sub(t0), f, l.background, s, l.eval.from, target)
	l.setRateLocked(target)
	l.growth, l.streak = firstGrowth, 0
	l.cuts++
}

// judgeLocked judges the last cut on the answers to requests sent after it,
// once they are clear or the test is over (final forces it). Two
// hypotheses predict their throttled share:
//
//   - the throttles were the client's own (it sent more than its share of
//     the capacity, S*(1-f)): the share falls to what is left of the
//     overload at the new rate, or to the background;
//   - they do not follow this client's rate (other tenants, chance, or a
//     fleet in which this client is too small to matter): the share stays
//     f.
//
// The answers pick the likelier; a share worse than either predicts sizes
// the next cut instead (the first was sized from a share the service's
// burst hid). If the client's own, the rate the cut
// settled at measures the capacity, and if the overload is not gone the
// next cut follows; if not, the cut is undone and the share becomes the
// background.
func (l *sendRate) judgeLocked(now time.Time, final bool) {
	c := &l.eval
	n := c.after.total()
	ours, theirs := l.predictLocked(c)
	llr := logLikelihoodRatio(c.after, ours, theirs)
	// Past evalMax, a test still waits for a few answers, up to four times
	// as long: a cut deep enough to leave almost nothing sent says little.
	over := n >= evalMaxAnswers || final ||
		now.Sub(c.cutAt) >= evalMax && (n >= evalMin/4 || now.Sub(c.cutAt) >= 4*evalMax)
	if !(n >= evalMin && math.Abs(llr) >= clearLLR) && !over {
		return
	}
	chain := *c
	l.eval = cutTest{}
	if n == 0 {
		return // nothing sent since: the cut stands, unjudged
	}
	after := chain.after.throttled()
	l.tracef("%v judge after=%.2f (n=%d) ours=%.2f theirs=%.2f llr=%.1f", now.Sub(t0), after, n, ours, theirs, llr)
	rtt := chain.countFrom.Sub(chain.cutAt)
	if zAbove(after, theirs, n) >= 3 {
		// Worse than either predicts: the share the cut was sized from
		// was not the overload's (the service's burst hid it). Size the
		// next cut from this one.
		l.cutLocked(now, after, n, rtt, &chain)
		return
	}
	if llr <= 0 {
		// Not this client's to fix (or no telling): send as without a limiter, as every
		// other client of a fleet does, until the hold is over.
		l.setRateLocked(math.Inf(1))
		l.background = after
		l.hold = min(max(2*l.hold, holdFirst), holdMax)
		l.holdUntil = now.Add(l.hold)
		return
	}
	l.hold = 0
	l.known = l.q.rate / cutTo // the capacity the cut was sized from
	if !l.jumped.IsZero() && now.Sub(l.jumped) < 2*sendWindow {
		l.jumpWait = min(max(2*l.jumpWait, jumpFirst), jumpMax) // the jump was too soon
	}
	if zAbove(after, chain.background, n) >= 3 {
		l.cutLocked(now, after, n, rtt, &chain)
	}
}

// predictLocked returns the throttled shares after cut c under the two
// hypotheses: the throttles were the client's own, or they do not follow
// its rate.
func (l *sendRate) predictLocked(c *cutTest) (ours, theirs float64) {
	theirs = c.throttled
	ours = c.background
	if r := l.q.rate; !math.IsInf(r, 1) && r > 0 {
		ours = max(ours, 1-c.sendRate*(1-c.throttled)/r)
	}
	return min(ours, theirs), theirs
}

// clearLLR is the log-likelihood ratio, 100 to 1, at which a test ends
// before its answers or its time run out.
const clearLLR = 4.6

// logLikelihoodRatio returns the log-likelihood ratio of answers a under a
// throttled share p (positive) against q (negative), each kept off 0 and 1.
func logLikelihoodRatio(a answers, p, q float64) float64 {
	clamp := func(x float64) float64 { return min(max(x, 0.005), 0.995) }
	p, q = clamp(p), clamp(q)
	return float64(a.thr)*math.Log(p/q) + float64(a.ok)*math.Log((1-p)/(1-q))
}

// peakLocked returns the highest capacity known, halved every
// peakHalfLife.
func (l *sendRate) peakLocked(now time.Time) float64 {
	if l.peak == 0 {
		return 0
	}
	return l.peak * math.Exp2(-now.Sub(l.peakAt).Seconds()/peakHalfLife.Seconds())
}

// sendRateLocked returns the places sent per second over the current and
// previous windows (at least 10 ms, so that a client's first answers are
// not taken over a window it has not lived yet).
func (l *sendRate) sendRateLocked(now time.Time) float64 {
	span := max(now.Sub(l.win.start)+l.prev.duration, 10*time.Millisecond)
	return (l.win.sent + l.prev.sent) / span.Seconds()
}

func (l *sendRate) setRateLocked(r float64) {
	if !math.IsInf(r, 1) {
		r = l.clamp(r)
	}
	l.q.setRate(r)
}

// syncLocked brings the queue and the windows up to now.
func (l *sendRate) syncLocked(now time.Time) {
	l.initLocked()
	if now.Before(l.win.start) {
		l.win.start = now // a clock stepped back: go on from now
	}
	l.win.sent += l.q.advance(now)
	if !l.lastSeen.IsZero() && now.Sub(l.lastSeen) >= idleReset && !l.q.waiting() {
		l.startOverLocked(now)
	}
	l.rollLocked(now)
}

// startOverLocked forgets what an idle limiter learnt.
func (l *sendRate) startOverLocked(now time.Time) {
	l.setRateLocked(l.initialRate)
	l.episode, l.eval = answers{}, cutTest{}
	l.background, l.hold, l.holdUntil = 0, 0, time.Time{}
	l.known, l.peak, l.jumped, l.jumpWait, l.growth = 0, 0, time.Time{}, 0, firstGrowth
	l.win, l.prev = answers{start: now}, answers{}
	l.lastSeen = now
}

// rollLocked closes the window when it is over: a window without excess
// throttles whose rate was in use raises it, and the background level
// follows the windows outside episodes and tests.
func (l *sendRate) rollLocked(now time.Time) {
	if l.win.start.IsZero() {
		l.win.start = now
		return
	}
	elapsed := now.Sub(l.win.start)
	if elapsed < sendWindow {
		return
	}
	w := l.win
	w.duration = elapsed
	quiet := zAbove(w.throttled(), l.background, w.total()) < 2
	if quiet && !l.eval.active() {
		l.growLocked(now, w)
		if w.total() > 0 && !now.Before(l.holdUntil) {
			a := min(elapsed.Seconds()/backgroundTau.Seconds(), 1)
			l.background += a * (w.throttled() - l.background)
		}
	}
	if elapsed >= 2*sendWindow {
		w = answers{} // idle for more than a window: it says nothing of now
	}
	l.prev = w
	l.win = answers{start: now}
}

// growLocked raises a finite rate that the closed window w used:
//
//   - far below the peak the service accepted recently, back to it at once
//     (the capacity has returned; a jump the service throttles waits a
//     second, doubling, before the next);
//   - otherwise by probeStep: the same additive step for every client;
//   - after streakWindows windows without excess throttles, by a step that
//     doubles each window up to maxGrowth (the capacity is higher than
//     known, or was never measured).
//
// The rate is never raised to more than twice what w sent and the service
// accepted, so an idle or demand-bound client cannot talk itself into a
// rate it never tested.
func (l *sendRate) growLocked(now time.Time, w answers) {
	r := l.q.rate
	if math.IsInf(r, 1) {
		return
	}
	sent := w.sent / w.duration.Seconds()
	if sent < 0.9*r {
		return
	}
	accepted := sent * (1 - w.throttled())
	l.known = max(l.known, accepted)
	if l.known > l.peakLocked(now) {
		l.peak, l.peakAt = l.known, now
	}
	l.streak++
	next := r + probeStep
	switch peak := l.peakLocked(now); {
	case peak > 2*r && now.Sub(l.jumped) >= l.jumpWait:
		next, l.jumped = cutTo*peak, now
	case l.streak >= streakWindows:
		next = max(next, r*(1+l.growth))
		l.growth = min(2*l.growth, maxGrowth)
	}
	next = min(next, 2*max(accepted, l.minRate))
	if next <= r {
		return
	}
	l.tracef("%v grow %.0f -> %.0f (sent %.0f accepted %.0f known %.0f)", now.Sub(t0), r, next, sent, accepted, l.known)
	l.setRateLocked(next)
}

func (l *sendRate) clamp(r float64) float64 {
	return math.Min(math.Max(r, l.minRate), l.maxRate)
}
