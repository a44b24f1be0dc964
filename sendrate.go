package jitterretry

// This file owns the send-rate limiter's control: the rate it learns from
// the service's answers. Pacing at that rate is the send queue's
// (sendqueue.go); an attempt's wait is sendwait.go's.

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// SendRateOptions configures the adaptive send-rate limiter (see
// Options.SendRate). The zero value of every field means its default.
type SendRateOptions struct {
	// InitialRate is the send rate, in requests per second, the limiter
	// starts at, clamped to [MinRate, MaxRate], and returns to after a
	// minute with neither sends nor answers. The rate rises from there
	// while it is in use and not throttled: by 1/s (or 0.5% of the capacity
	// last measured, if more) for every 100 ms since the last cut, that
	// step doubling every 500 ms after two seconds without a cut (up to 64
	// times), and, until the first cut (the first capacity measured) since
	// it started, after two seconds also by 5% every 100 ms, doubling up
	// to 25%, so that a low InitialRate before a large capacity reaches it
	// within seconds; never to more than twice what the last 100 ms sent
	// and the service accepted. (So a rate under a few requests a second
	// rises only as its turns come: an InitialRate of 0.1, MinRate
	// lowered, waits ten seconds for its first rise.) Zero (or +Inf) means
	// unlimited, or MaxRate when set: until the service throttles, the
	// limiter only records what the service accepts.
	InitialRate float64

	// MinRate is the floor the rate never drops below, in requests per
	// second. Zero means 1; below 0.001 (a request every 1000 s) is
	// invalid.
	MinRate float64

	// MaxRate is the ceiling the rate never grows above, in requests per
	// second, from the first request on: of each limiter (each partition's
	// SDK service's; see Options.SendRate), not of their sum. Zero means
	// none; a ceiling below MinRate is invalid, MinRate's default of 1
	// included: a ceiling under 1 request per second needs a MinRate at
	// or below it.
	MaxRate float64
}

// The limiter's numbers. The comments of sendRate and of the functions that
// use them say what each does; here is why each is what it is.
const (
	// sendWindow is the period of the rate's rises and of the counts they
	// read, and the longest a waiting caller sleeps before asking again:
	// long enough to hold a few answers at low rates, short enough for
	// the rate to follow a change of capacity within a second.
	sendWindow     = 100 * time.Millisecond
	defaultMinRate = 1.0
	// minMinRate is the lowest MinRate accepted: below it, every attempt
	// waits for ages (5e-324 held each for 2,562,047 hours).
	minMinRate = 0.001
	// A round trip shorter than minRTT (or not yet measured) is taken as
	// minRTT when telling the answers to requests sent before a change of
	// rate from those sent after.
	minRTT = time.Millisecond

	// Detection. A CUSUM of the answers' log-likelihood ratio between a
	// throttled share at the background (at least minBackground) and one
	// minExcess (or half the background) above it alarms at alarmLLR:
	// with no background, about seven throttles more than the successes
	// between them explain, which 1% of throttles at random practically
	// never reach, and an overload of 5% reaches in a few hundred
	// answers. The cut needs episodeMin answers since the CUSUM left
	// zero, so that it is sized on more than a burst.
	alarmLLR      = 12
	minExcess     = 0.05
	minBackground = 0.01
	episodeMin    = 20

	// Cuts. A cut keeps cutTo of the capacity its answers measured (the
	// rest lets the service's burst refill) and at least minCutTo of the
	// rate, so a deeper fall takes a chain of cuts, each tested; a share
	// measured on fewer than sizeMin answers may be a burst of throttles,
	// so that cut keeps at least smallCutTo, unless more than burstMax of
	// them were throttled (a fall of capacity to a fraction): a cut too
	// shallow is followed by another within a round trip or two, one too
	// deep takes long to grow back.
	cutTo      = 0.95
	minCutTo   = 0.5
	smallCutTo = 0.85
	sizeMin    = 100
	burstMax   = 0.5

	// Tests of cuts. A test judges on testMin answers at least, and ends
	// by testMax answers or testMaxTime, so that a slow client is judged
	// within a second; a test without testMin answers by testAbandon
	// leaves the cut standing. A share falls "clearly" at dropZ standard
	// deviations. When more than maxTheirs of the answers are throttled,
	// a cut is due whoever causes them: the service takes less than a
	// fifth of what is sent, a fall that halvings cannot show in the
	// share (from 98% to 96%, say); below that, throttles that do not
	// fall with the rate are not this client's to help (random throttles
	// of 40-50% held a K = 64 client at a tenth of its successes when this
	// was a half). A cut that did not end the
	// overload is followed by a halving after undoMin answers, and
	// enough for refThrottles throttles, so that the halving is judged
	// against a share known well enough to tell it from half. A halving
	// whose test ends with testMin answers or more but fewer than undoMin
	// is taken back unless its share fell by helpedZ (see takeBackLocked);
	// on fewer than testMin, what a test judges on at least, it stands.
	// (All stood until 2026-12-04: 8 workers backing off 1 s under
	// 20% at random sent too few to be judged, and fell from halving to
	// halving, to 61% of their successes.) A halving whose test
	// ends with the share fallen by helpedZ deviations or more, not
	// clearly above what it would be if the throttles were this client's,
	// stands: it helped. Less is what random throttles give one test in
	// 160 by chance (at 1.5, one in 15: a client of 8 workers backing off
	// 1 s under 5% at random kept 75% of its successes in the simulation,
	// 99% until 2026-12-04, night, 92% since: see unsureZ). A halving after which nothing at all
	// was throttled stands on a fall of clearedZ, whether judged or too
	// slow to judge: shares are taken as at least 2% from 0 in the
	// variance, so a fall from 3% to none on 131 answers is 1.8 deviations,
	// and, undone, two clients sharing a capacity each took the other's
	// throttles for a background (helper-119: 65 such undos in 100 draws);
	// taken back, a client of 8 workers on a capacity of 40/s went back
	// over it after each halving that had ended its throttles (helper-132:
	// 61 such take-backs in 16 draws).
	testMin      = 20
	testMax      = 1000
	testMaxTime  = time.Second
	testAbandon  = 5 * time.Second
	dropZ        = 3
	maxTheirs    = 0.8
	undoMin      = 100
	refThrottles = 20
	helpedZ      = 2.5
	clearedZ     = 1.5
	// A cut whose share fell clearly (dropZ) to lowShare or less ends
	// its chain (see judgeLocked): at 5% at random on a capacity, a
	// client like the bench's used 71% of it on average, 76% now, and
	// 88% at 2%, 90% now (64 draws). At 0.05 the 5% case gained
	// nothing; at 0.15, what 0.1 gains.
	lowShare = 0.1

	// A halving undone though its share fell by unsureZ deviations or
	// more, or though it ended not clearly (dropZ)
	// above what it would be if the throttles were this client's, is an
	// unsure finding: its hold lasts unsureHold, and does not count as one
	// in a row. In a fleet, the others' rises fill a client's halving
	// within a second, so its share falls only part of the way: a client
	// of four with 16 workers each undid its halving on a fall from 13%
	// to 4.6% throttled (2.5 deviations), and, its throttles excused for
	// ten seconds, kept 250-350/s while the other three were cut to
	// 45-130/s (Jain's index 0.66 over the ten seconds after a fourth
	// joined, in the simulation). Random throttles give such a fall one
	// test in 15; at 5%, a share that is not clearly above none more often
	// (a client of 8 workers kept 86% of its successes over 48 draws,
	// 89% before).
	unsureZ    = 1.5
	unsureHold = 2 * time.Second

	// The background. Throttles found not to follow the rate are the
	// background for a hold of holdFirst, doubling with each such finding
	// in a row up to holdMax: long enough that a service that throttles
	// at random costs a test every ten seconds or more, short enough that
	// a wrong finding is tested again soon. During a hold the background
	// is learnt from the windows, with the weight of up to
	// backgroundAnswers answers; it excuses throttles for a rise only once
	// learnt on that many. Outside a hold it falls with windows clearly
	// below it, with a time constant of backgroundTau.
	holdFirst         = 10 * time.Second
	holdMax           = time.Minute
	backgroundAnswers = 2000
	backgroundTau     = 10 * time.Second

	// Rises. The rate rises by probeStep a window, or by probeFrac of the
	// capacity known when that is more (a 5% cut of a large capacity is
	// regained in a second): a line of time from the last cut, the same
	// for clients of the same scale whatever their answers, so clients
	// sharing a capacity converge to equal shares (AIMD). After
	// lineSteepAfter without a cut the line steepens, its slope doubling
	// every lineDoubling up to lineMaxSlope times: the increase is still
	// the same for all (AIMD needs it common, not constant), and a
	// capacity raised far above any measured (a table scaled up) is found
	// in seconds rather than minutes; a capacity that holds cuts sooner.
	// With no capacity ever measured, after slowStartAfter in use the rise
	// is also multiplicative, from firstGrowth a window doubling up to
	// maxGrowth.
	probeStep      = 1.0
	probeFrac      = 0.005
	slowStartAfter = 2 * time.Second
	firstGrowth    = 0.05
	regrowStep     = 0.1
	regrowTo       = 0.9
	maxGrowth      = 0.25
	lineSteepAfter = 2 * time.Second
	lineDoubling   = 500 * time.Millisecond
	lineMaxSlope   = 64

	// Jumps back to a capacity recently measured. A cut's measure counts
	// as one once no other cut followed for peakConfirm, or the next cut
	// measured at least peakAgree of it: what a client arriving in a
	// crowd measures as its flood ends is its share of the flood, and the
	// cuts that soon follow measure much less.
	// The peak halves every peakHalfLife, so that a capacity not seen for
	// minutes is no longer probed. A rate in use below 1/jumpRatio of it
	// (a fall of capacity, not a share lost to another client or two,
	// whose probes would only take from them) probes it every jumpEvery,
	// so a capacity that returns is used within a window or two; each
	// failed jump doubles the time to the next, up to jumpEveryMax, so a
	// peak that is gone (a warm-up's, say) costs few throttles while it
	// ages. A probe sends jumpProbe waiting requests at once, few enough
	// that one that fails costs a throttle or two, and fewer at low rates:
	// probes send at most jumpOverhead of what the rate sends between
	// them. A jump the probe passes
	// raises the rate at most jumpStep times, so that one the service's
	// burst let through floods it with a few round trips' worth at most,
	// and is on probation for jumpProbation; one that holds is followed at
	// once by the next while the peak is more than jumpNear times the
	// rate; the chain ends with a jump to jumpPast times the peak it
	// reached: the peak is a capacity measured before the fall, often
	// under the one that returns (a first cut sized in a flood measured
	// 446 of 500), and the line would regain the rest at 1/s a window.
	// A jump past the peak that holds raises neither the peak for
	// peakCapFor (see peakCap) nor the known capacity, and a cut in that
	// time is sized as a cut on many answers; one that fails leaves the
	// peak; a chain whose next link does not come within the gap between
	// jumps and a window is over (see jumpChain).
	// A jump fails on the evidence of the detection's CUSUM at
	// jumpFail: a single throttle when there is no background; a jump of
	// a chain, once one held (the capacity is back), at jumpChainFail, a
	// few throttles close together, so that one at random among the
	// hundreds of answers a step gets does not end the chain short of
	// the capacity (with 1% at random, a fall to 15% was regained to 64%
	// of the capacity in the four seconds after it returned, 89% now);
	// but the jump past the peak at jumpFail: it gains a tenth at most,
	// and each throttle it draws may be some waiting operation's last
	// attempt. A jump whose single throttle came after weakSpan of answers
	// to requests sent at its rate, more than testMin of them, failed
	// weakly (see jumpTest.weak): the service took that rate for a while,
	// and one throttle among that many is what 2% of throttles at random
	// give about one such jump in two. It goes back halfway (in ratio) and
	// the chain goes on toward its aim, its next link judged as a chain's
	// (judged at jumpFail instead, the first second back below fell from
	// 90/76/46% to 82/67/37%; leaving the peak when that link fails
	// changed nothing). Gone back all the way, a client under 2% of random
	// throttles whose capacity fell to a fifth failed jump after jump once
	// it returned: 55% of the capacity in the first second back over 48
	// simulated draws (at 1%, 81%; at 5%, 29%); 78-80% now (90%, 44%; 96
	// draws twice). The span is in time, not answers: a burst of a tenth
	// of a second of capacity lets a jump to three times the capacity
	// through for some 50 ms, and 20 answers, counted from the probe on,
	// came in 12 ms at such rates: 1000/s never returning after 5000/s,
	// with 1% at random, 0.83 jumps a draw failed weakly to above the
	// capacity; 0.17 now. At round trips over some 50 ms, the jump
	// holds (see jumpProbation) before that span, and never fails weakly.
	// A capacity that returns only part of the way, which a burst
	// lets such a jump through for a while, costs more: 1000/s falling to
	// 150/s and returning to 400/s, 7.2 throttles a second after the
	// return against 5.5. Jumps come at most once every jumpRTTs round trips: a jump
	// that passed its probe sends up to jumpStep times the rate for a round
	// trip before its first throttle comes back, and the answers to it
	// blind the detection for a round trip and a window, so at round
	// trips of 100 ms a jump every 200 ms kept it blind for good (three
	// quarters of the sends throttled after a warm-up's peak).
	peakHalfLife = 30 * time.Second
	// untestedEvery spaces the jumps toward what the service took while
	// the limiter was unlimited (see sendRate.untested), and is how long
	// after a cut the first may come: one that fails costs a probe, and a
	// warm-up's rate fails each time. A client of 24 workers just under
	// its capacity, never throttled before it fell, regained it along the
	// line alone (31% and 39% in the second and third seconds back, 89%
	// and 92% now); with no wait after a cut, a fleet's late joiner,
	// whose jumps the others' throttles never fail, took four times a
	// fair share (Jain's index 0.73). After untestedTries failed jumps
	// it is dropped: a warm-up's rate, tried every second for as long as
	// it aged above the rate (some 100 s), cost 2.4 times the throttles
	// (a review); a fall of up to some 10 s is still regained.
	untestedEvery = time.Second
	untestedTries = 10
	peakConfirm   = 500 * time.Millisecond
	peakAgree     = 0.75
	jumpRatio     = 3.0
	jumpEvery     = sendWindow
	jumpEveryMax  = 200 * time.Millisecond
	jumpProbe     = 4
	jumpProbation = sendWindow
	jumpStep      = 4.0
	jumpNear      = 1.1
	jumpOverhead  = 0.1
	jumpFail      = 1.5
	jumpChainFail = 6
	jumpRTTs      = 10
	jumpPast      = 1.1
	weakSpan      = 50 * time.Millisecond
	// A burst of a tenth of a second of capacity (the bench's proxy) lets
	// a rate 10% over it through for a second; DynamoDB's burst, up to
	// 300 s of unused capacity, for far longer, and there a jump past the
	// peak may still raise the peak, fall after fall, until a cut.
	peakCapFor = 2 * time.Second

	// A link of a chain whose trigger had cleanMin answers or more, at
	// most cleanShare of them throttled, measured what the service took
	// from this client, not its share of a flood (a client arriving in a
	// crowd measured 60% throttled as the flood ended); a chain keeps its
	// first such measure, made before its cuts chased throttles (a later
	// clean link of a chain that halves under throttles it cannot help
	// measures what it was cut to: 62/s after 274/s; kept, it left nothing
	// to jump back to, helper-129). (Until 2026-12-04 only a chain's first
	// trigger counted: a client whose first chain ran from its start's
	// flood into a fall never kept the capacity its clean links measured
	// before the fall, and had nothing to jump back to.) When a later stand
	// measures a third of that or less (see jumpRatio), the capacity fell:
	// the measure, aged as the peak, becomes the peak without waiting for
	// peakConfirm, so that the jumps probe for it. A capacity swinging
	// 500/s-100/s every 0.5-1 s cut every stand within peakConfirm, and
	// the peak was only what quiet windows accepted at the rate, at most
	// jumpStep times the low phase's rate: 47-50% of the mean capacity.
	cleanShare = 0.25
	cleanMin   = 50

	idleReset = time.Minute
	// inUseShare is the share of the rate a window must send to test it,
	// for a rise.
	inUseShare = 0.9
	// keptShare is the share of the rate a window must send to keep it
	// from being forgotten (see lastUsed): well below inUseShare, since a
	// steady client whose demand the rate does not bind sends just under
	// that, and it would have started over every minute (helper-206).
	keptShare = 0.25

	// A limiter that made a caller wait within heldBackFor still holds
	// its callers back (see holdsBack): a step up or a probe that empties
	// the queue for a moment is answered by throttles a round trip later,
	// whose retries the queue takes again. At K = 1000, a window of 100 ms
	// instead let 96 and 157 operations of eight runs fail for the budget.
	heldBackFor = time.Second

	// A throttle is a near miss, and backs off as any other error, while
	// at most pacedShare of the recent answers were throttled.
	pacedShare = 0.1
)

// sendRate is an adaptive client-side send-rate limiter. It paces attempts
// through a queue at a rate it learns from the answers, and tells "we send
// too fast" from "throttled anyway":
//
//   - Detection: a CUSUM over the answers alarms when the throttled share
//     rises above the background b, the share found not to follow the rate
//     (zero until found).
//   - A cut keeps 95% of the capacity the answers measure, the send rate
//     of the last window or two times (1-f)/(1-b), f being the throttled
//     share, and at least half the rate (85% when f was measured on few
//     answers). Clients sharing a capacity see the same share and cut in
//     proportion to what they send: the multiplicative decrease of AIMD.
//   - Every cut is tested on the answers to requests sent after it. If the
//     share fell clearly to the background, the cut stands, and what it
//     measured is the known capacity. If it fell but not enough, or most
//     answers are throttled, or it rose, the next cut follows, sized from
//     the new answers. If it did not fall, the rate is halved, a decisive
//     test: throttles that follow the rate fall with it, whoever else
//     shares the capacity (the others, seeing the same throttles, cut
//     too), while throttles that others or chance cause stay. When they
//     stay, the cuts are undone (back to unlimited if the limiter was, else
//     to the rate before the halving) and the share becomes the background
//     for a hold of ten seconds, doubling with each such finding in a row:
//     the limiter does not fall toward its floor on throttles it cannot
//     help. An unsure finding (the share fell, though not clearly, or is
//     not clearly above what it would be were the throttles ours) holds
//     two seconds and is tested again. A halving too slow to judge (20 to
//     99 answers in its second) is taken back to the rate before it, the
//     cuts before it standing, unless its share fell by 2.5 deviations or
//     to none at all; on fewer answers it stands. During the hold the
//     background is learnt from the answers, and the rate rises over it
//     only once it is learnt well; then it is forgotten, and tested again
//     if the throttles are still there.
//   - The rate rises along a line of time from the last cut, by 1/s a
//     window (or 0.5% of the known capacity): the additive increase of
//     AIMD, the same for clients of the same scale, so that shares
//     converge. Until its first cut since it started it also grows
//     multiplicatively, from InitialRate; below 90% of the capacity the
//     last standing cut measured, by 10% a window. After two seconds
//     without a cut, the line steepens: its slope doubles every 500 ms,
//     up to 64 times.
//   - When the rate in use is below a third of a capacity recently
//     measured (the peak), each window it probes with a few requests sent
//     at once, and if none is throttled, jumps toward the peak, up to four
//     times the rate a step, step after step while each holds: a capacity
//     that returns is used within a few windows. A failed jump doubles the
//     time to the next, up to two windows; when it followed one that held,
//     the peak becomes the geometric mean of the two, so that a chain
//     converges on the capacity. A jump that failed on one throttle after
//     more than 20 answers at its rate goes back only to that geometric
//     mean, and its chain goes on: throttles at random (other tenants)
//     fail about one such jump in two at 2%. A chain that reached the peak ends with a
//     jump 10% past it, which fails at its first throttle when the answers
//     to it come within its probation (100 ms), leaving the peak as it
//     was: the capacity that returns may be above the one measured before.
//     (A service's burst may let it hold over the capacity; the next cut
//     brings it back, sized on its answers however few, and for 2 s it
//     does not raise the peak the next fall's chain aims at.) The first
//     cut from unlimited caps the peak at what it measured: what an
//     unlimited client got accepted before (a warm-up on an idle table)
//     is not what the service takes.
//     A stand that measures a third or less of what the first clean link
//     of a chain (many answers, few throttled) measured makes that the peak
//     at once: the capacity fell, and may swing back before a stand could
//     count (see cleanShare).
//   - After a minute with neither sends nor answers, or one in which no
//     window sent a quarter of the rate and no answer was throttled (a
//     trickle of calls) when InitialRate is above the rate, it starts
//     over from InitialRate.
//
// It is safe for concurrent use. The zero value is an unlimited limiter
// with the default options.
type sendRate struct {
	mu       sync.Mutex
	q        sendQueue
	expected expectedRetries
	// clock is read under mu, and by the quiet tally outside it (see
	// sinceEpoch); nil is the monotonic clock, read as epoch plus the
	// time since, half the cost of time.Now, which also reads the wall
	// clock: the limiter reads it twice per attempt, and only ever
	// compares its own readings. Set once, at construction.
	clock func() time.Time
	epoch time.Time
	// quiet counts, without the lock, what would only add to the
	// window's counts (see quietTally), opened at each unlock from
	// syncedAt, the time the lock's holder last read.
	quiet    quietTally
	syncedAt time.Time
	// quietTurns is set while the quiet tally paces sends (see
	// openQuietLocked) and the lock has not taken them back: a holder
	// that does not read the clock leaves the tally as it is. takenTurns
	// counts the turns taken back from it until the queue has them (see
	// syncLocked), takenNext their next turn's reading: a clock that
	// panics between the two leaves the tally closed, where opened again
	// from the queue without them, it gave back the turns taken
	// (helper-242: a second send at the same instant at once). With none
	// taken, the queue's state is the tally's.
	quietTurns bool
	takenNext  time.Duration
	takenTurns uint64

	minRate, maxRate float64
	initialRate      float64 // +Inf when unlimited
	ready            bool

	win, prev answers   // the current window and the one before
	lastSeen  time.Time // the last answer or send: idleReset counts from it
	// lastUsed is when a window last used the rate (sent keptShare of it)
	// or an answer was throttled; zero when neither since the start or
	// the last start over. A rate unused for idleReset is forgotten too,
	// when InitialRate is above it: a
	// trickle of calls (one every 20 s) kept a cut rate for good, and the
	// next burst met it on a table that had since saved burst capacity or
	// been scaled up (an outside review: 3,000 writes in 6.5 s, against
	// 0.35 s without the limiter).
	lastUsed time.Time
	heldAt   time.Time     // when a caller last had minRTT or more to wait for its turn in a full queue
	steady   steadyTime    // the control's time, from the clock's readings
	rtt      time.Duration // the last round trip reported, at least minRTT
	// throttleRTT is how long throttled answers take, a moving average
	// of the timed ones from 0 (see noteThrottleTime), forgotten when the
	// limiter starts over.
	throttleRTT time.Duration

	// Detection: the CUSUM, the answers since it last left zero, and its
	// steps for a throttle and a success at the current background.
	cusum         float64
	episode       answers
	llrThr, llrOK float64

	background float64   // the throttled share found not to follow the rate
	bSamples   float64   // the answers it was learnt on, up to backgroundAnswers
	holdUntil  time.Time // the end of the current finding's hold; zero when none
	hold       time.Duration

	test       cutTest
	jump       jumpTest
	blindUntil time.Time // answers before it are a failed jump's
	jumpedAt   time.Time
	jumpGap    time.Duration // the time between jumps: doubles with each failed one
	chain      jumpChain
	// peakCap is the level a chain reached before the jump past it that
	// held; quiet windows raise the peak no higher until the next cut,
	// since a burst the service keeps lets a rate over its capacity
	// through for a while: each fall's chain would otherwise aim 10%
	// higher than the last (556, 620, 682… on a 500/s table falling to
	// 100/s every 8 s). Zero when none. It lasts peakCapFor at most: a
	// rate that holds longer was not let through by a burst, but by a
	// capacity above the old one (a table scaled up, whose throttles may
	// never come to clear the cap when demand stays below it).
	peakCap   float64
	peakCapAt time.Time

	// known is the capacity the last standing cut (or held jump) measured;
	// peak the highest capacity measured, at peakAt, aging: by a standing
	// cut once confirmed (see peakConfirm; pending until then), or by what
	// the service accepted while the limiter was unlimited.
	known  float64
	peak   float64
	peakAt time.Time
	// untested is what the service took while the limiter was unlimited,
	// at untestedAt, when a first cut measured less: a capacity that fell
	// under a demand it had met, or a warm-up on an idle table, which the
	// client cannot tell apart. Jumps aim at it at most once every
	// untestedEvery, until one holds (see jumpLocked).
	untested       float64
	untestedAt     time.Time
	untestedJumpAt time.Time
	untestedFails  int       // jumps toward it that failed
	cutAt          time.Time // the last cut
	pending        float64   // the last stand's measure, not yet counted
	pendingAt      time.Time
	pendingCuts    int
	clean          float64 // what the first clean link of the last standing chain measured (see cleanShare), at cleanAt
	cleanAt        time.Time
	// The rate rises from base, set at baseAt by the last change of rate
	// that was not a rise.
	base   float64
	baseAt time.Time
	growth float64 // the next multiplicative step, while nothing is known
	cuts   int
	uncut  bool // no cut since the limiter started (or started over): the rise is also multiplicative

	origin time.Time                        // the first time seen, for traces
	trace  func(format string, args ...any) // tests only
}

func (l *sendRate) tracef(now time.Time, format string, args ...any) {
	l.trace("%8.3fs "+format, append([]any{now.Sub(l.origin).Seconds()}, args...)...)
}

// answers counts answers (and, in a window, places sent) from start on.
type answers struct {
	start    time.Time
	ok, thr  int
	sent     float64
	duration time.Duration // of a closed window
}

func (a answers) total() int { return a.ok + a.thr }

func (a *answers) count(throttled bool) {
	if throttled {
		a.thr++
	} else {
		a.ok++
	}
}

// throttled returns the throttled share of the answers, with half an
// answer of each kind added, so that a share is never exactly 0 or 1: a
// cut sized from "all throttled" still measures some capacity.
func (a answers) throttled() float64 {
	return (float64(a.thr) + 0.5) / (float64(a.total()) + 1)
}

// cutTest is the last cut of a chain, under test.
type cutTest struct {
	at, countFrom time.Time // answers from countFrom on are to requests sent after the cut
	from          float64   // the rate before the chain, or before its last cut that helped
	rate          float64   // the rate this cut set
	prevRate      float64   // the rate before this cut
	sent          float64   // what the client sent, per second, when the cut was made: at most prevRate
	links         int
	decisive      bool    // this cut halved the rate after one that did not end the overload
	bounded       bool    // the cut was too small to end the overload alone
	capacity      float64 // the capacity the cut measured
	firstCapacity float64 // the capacity measured with first
	cleanCapacity float64 // the capacity the chain's first clean trigger measured (see cleanShare); 0 when none
	trigger       answers // the answers the cut was sized from
	first         answers // the chain's first trigger measured on sizeMin answers, or its first
	after         answers
}

func (c cutTest) active() bool { return !c.at.IsZero() }

// fellFromAboveBackground reports whether the chain began clearly (dropZ)
// above background b and its share after the last cut fell clearly from
// that beginning: the cuts, as a whole, relieved throttles that were not
// the background's.
func (c cutTest) fellFromAboveBackground(b float64) bool {
	return zAbove(c.first.throttled(), b, c.first.total()) >= dropZ && zDrop(c.first, c.after) >= dropZ
}

// endsByJump reports whether a jump may end the test, its answers after
// the cut so far saying it relieved the throttles over background b: for a
// cut that is not decisive, testMin answers not clearly above b; for a
// halving, only one too slow to judge (its rate sends fewer than undoMin
// requests in testMaxTime), on testMin/4 answers none of which was
// throttled. Such a halving held the rate for its whole test, whatever the
// answers, and a capacity that returned just after it was left unused for
// that second; one whose answers are still throttled may be a fleet's
// client cut to its share, which a jump would take from the others.
func (c cutTest) endsByJump(b float64) bool {
	a := c.after
	switch {
	case !c.decisive:
		return a.total() >= testMin && zAbove(a.throttled(), b, a.total()) < 2
	case c.rate*testMaxTime.Seconds() < undoMin:
		return a.total() >= testMin/4 && a.thr == 0
	}
	return false
}

// jumpTest is a jump back to the peak under test: first a probe of
// jumpProbe requests sent at once, then, if none of the answers since was
// throttled beyond the background, the peak itself, on probation.
type jumpTest struct {
	at, countFrom time.Time
	committed     time.Time // when the probe passed and the rate went to the peak
	from, to      float64
	aim           float64 // the peak the jump (and its chain) aims at
	probe         int     // the places the probe sent
	chained       bool    // it followed a jump that held
	past          bool    // it aims past the peak its chain reached
	untested      bool    // it aims at the rate taken before the first cut (see sendRate.untested)
	after         answers
	atRate        answers // the answers to requests sent at to: from a round trip after committed on
	// A CUSUM of the evidence that the jump is throttled beyond the
	// background, and its steps.
	score, llrThr, llrOK float64
}

func (j jumpTest) active() bool { return !j.at.IsZero() }

// midChain reports whether the jump followed one that held and aims at the
// chain's peak, not past it: a link the chain measures the service by.
func (j jumpTest) midChain() bool { return j.chained && !j.past }

// weak reports whether a jump failing now fails on its first throttle,
// after weakSpan or more of answers to requests sent at its rate, more than
// testMin of them: not past the peak (that one stops at its first
// throttle). The service took the jump's rate for a while (see the jumps'
// numbers).
func (j jumpTest) weak(now time.Time) bool {
	return !j.committed.IsZero() && !j.past && j.after.thr == 1 && j.atRate.thr == 1 &&
		j.atRate.ok > testMin && now.Sub(j.atRate.start) >= weakSpan
}

// jumpChain is a chain of jumps in progress: the next link may follow at
// once, toward aim, when the last held (or failed after one that held).
type jumpChain struct {
	aim  float64 // zero when no chain goes on
	past bool    // the chain reached its peak: its next jump, its last, aims past it
	// at is when the last link held or failed: a chain whose next link
	// does not come within the gap between jumps and a window (demand fell
	// below the rate, say) is over, rather than resumed later toward an aim
	// that did not age.
	at time.Time
}

// newSendRate returns a limiter with options o that reads clock (nil: the
// monotonic clock).
func newSendRate(o SendRateOptions, clock func() time.Time) *sendRate {
	l := &sendRate{clock: clock}
	l.init(o)
	return l
}

func (l *sendRate) init(o SendRateOptions) {
	o = o.withDefaults()
	l.minRate, l.maxRate = o.MinRate, o.MaxRate
	// Unlimited is the ceiling, MaxRate, when there is one.
	l.initialRate = l.clamp(math.Inf(1))
	if o.InitialRate > 0 {
		l.initialRate = l.clamp(o.InitialRate)
	}
	l.q.init(l.initialRate)
	l.growth, l.ready, l.uncut = firstGrowth, true, true
	l.setBackgroundLocked(0)
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
	case o.MinRate > 0 && o.MinRate < minMinRate:
		return &OptionsError{Option: "SendRate.MinRate", Reason: fmt.Sprintf("must be zero (default 1) or at least %v (a request every %v)", minMinRate, time.Duration(float64(time.Second)/minMinRate))}
	case o.MaxRate < 0 || math.IsNaN(o.MaxRate):
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must be zero (none) or positive"}
	case o.MaxRate > 0 && o.MaxRate < o.withDefaults().MinRate:
		return &OptionsError{Option: "SendRate.MaxRate", Reason: fmt.Sprintf("must not be below MinRate (%v)", o.withDefaults().MinRate)}
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
	defer l.unlock()
	l.initLocked()
	return l.q.rate
}

// paces reports whether the limiter holds the client to a finite rate that
// the service mostly accepts: at most pacedShare of the answers of the last
// window or two throttled (few answers count as half throttled), and no
// throttles held as background. A throttle then was a near miss.
func (l *sendRate) paces() bool {
	l.mu.Lock()
	defer l.unlock()
	l.syncLocked()
	a := l.win
	a.ok, a.thr = a.ok+l.prev.ok, a.thr+l.prev.thr
	return !math.IsInf(l.q.rate, 1) && l.background == 0 && a.throttled() <= pacedShare
}

// holdsBack reports whether the limiter holds its callers back now:
// at a finite rate, a caller had minRTT or more to wait for its turn in a
// queue that ran at about its rate (see fullLocked) in the last
// heldBackFor, so that what is sent is about that rate, however many of
// those waiting are retries. (Shorter waits are the jitter of callers
// arriving together; a few arriving together at a rate far above what they
// send wait longer, and are not held back either.)
func (l *sendRate) holdsBack() bool {
	l.mu.Lock()
	defer l.unlock()
	now := l.syncLocked()
	return !math.IsInf(l.q.rate, 1) && !l.heldAt.IsZero() && now.Sub(l.heldAt) <= heldBackFor
}

// inUse reports whether callers wait in the queue now: a partition table
// must not forget it then (see lanes.sweepLocked). Only now: kept for
// having held one back within the last second, keys churned at 2,000 a
// second kept 2,001 partitions with nobody waiting (helper-201).
func (l *sendRate) inUse() bool {
	l.mu.Lock()
	defer l.unlock()
	l.syncLocked()
	return l.q.waiting()
}

// cutCount returns how many cuts the limiter made (undone ones included).
func (l *sendRate) cutCount() int {
	l.mu.Lock()
	defer l.unlock()
	return l.cuts
}

// forgettable reports whether a new limiter would behave the same now: it
// brings the limiter up to now first, so that one idle for
// idleReset has started over, as its next use would find it.
func (l *sendRate) forgettable() bool {
	l.mu.Lock()
	defer l.unlock()
	l.syncLocked()
	return l.q.rate == l.initialRate && !l.q.waiting() && l.known == 0 && l.peak == 0 && l.pending == 0 &&
		l.background == 0 && !l.test.active() && !l.jump.active()
}

// reserve takes the next place in the queue, for an attempt of the
// operation whose context's Done channel is done: in the retries' line
// when it is an expected retry (see expectRetry), or when retry says it is
// one. It returns how long the place waits and the channel closed when
// that may change, as delay does: most places are due at once, and a
// caller asks delay again only after it slept; and, for an expected retry,
// the failed attempt it follows, when known (see expectedRetries.claim).
// The caller gives the place back with cancel if it does not send.
func (l *sendRate) reserve(done <-chan struct{}, retry bool) (sendPlace, time.Duration, <-chan struct{}, failedAttempt) {
	if l.quiet.sendsOpen() && l.quiet.countSend(l.sinceEpoch) {
		return sendPlace{counted: true}, 0, nil, failedAttempt{}
	}
	l.mu.Lock()
	defer l.unlock()
	now := l.syncLocked()
	l.lastSeen = now
	// A loop's retry has no entry (Do records none): it claimed another
	// operation's on a context they share, and that retry's cause.
	expected, after := false, failedAttempt{}
	if !retry {
		expected, after = l.expected.claim(done, l.realTime(now))
	}
	p, due := l.q.reserve(retry || expected)
	if due {
		l.win.sent++
	}
	wait, changed := l.delayLocked(p, now)
	return p, wait, changed, after
}

// claimExpected claims the retry the limiter expects of the operation whose
// context's Done channel is done, as reserve does, without taking a place,
// and returns the failed attempt it follows, when known: for a caller whose
// context ended as it asked, whose refusal keeps its cause (helper-254).
func (l *sendRate) claimExpected(done <-chan struct{}) failedAttempt {
	l.mu.Lock()
	defer l.unlock()
	_, after := l.expected.claim(done, l.realTime(l.syncLocked()))
	return after
}

// expectRetry records that the operation whose context's Done channel is
// done retries after wait, following the failed attempt after: its next
// attempt here waits in the retries' line, ahead of first attempts.
func (l *sendRate) expectRetry(done <-chan struct{}, wait time.Duration, after failedAttempt) {
	l.mu.Lock()
	defer l.unlock()
	now := l.realTime(l.syncLocked())
	l.expected.expect(done, now, now.Add(min(wait, time.Hour)), after) // no overflow
}

// realTime returns the time on the monotonic clock, on which the expected
// retries are kept whatever Options.Clock is: the SDK's middleware sleeps a
// retry's backoff on a timer, and a clock of the caller's that stands
// still, steps back or is coarse would have the retry ask before its
// backoff ended by it, and wait with the first attempts (helper-231: sent
// last of 41 under a clock stepped back 100 ms). now is the limiter's
// reading, that time already when the limiter reads the monotonic clock
// itself.
func (l *sendRate) realTime(now time.Time) time.Time {
	if l.clock == nil {
		return now
	}
	return time.Now()
}

// delay returns how long, from now and at the current rate, p waits before
// it may be sent, and a channel closed when that may change (see
// sendQueue.delay); a waiter sleeps until the first of the delay, a window
// and the channel, and asks again. A place the quiet tally sent at once
// is due, as one due under the lock stays.
func (l *sendRate) delay(p sendPlace) (time.Duration, <-chan struct{}) {
	if p.counted {
		return 0, nil // never in a line: read there, it waited a turn
	}
	l.mu.Lock()
	defer l.unlock()
	return l.delayLocked(p, l.syncLocked())
}

func (l *sendRate) delayLocked(p sendPlace, now time.Time) (time.Duration, <-chan struct{}) {
	wait, changed := l.q.delay(p)
	if wait >= minRTT && l.fullLocked(now, wait) {
		// The limiter, not the callers, sets the pace.
		l.heldAt = now
	}
	return wait, changed
}

// fullLocked reports whether the queue, where a caller has wait to wait at
// time now, runs at its rate: what it sent over the current and the last
// window (at least a window's span), with the places ahead of that caller,
// fills at least half of the rate over that span and the wait. A few
// callers arriving together wait too, but fill a moment, not the span.
func (l *sendRate) fullLocked(now time.Time, wait time.Duration) bool {
	sent, span := l.recentSentLocked(now, sendWindow)
	r := l.q.rate
	return sent+r*wait.Seconds() >= 0.5*r*(span+wait).Seconds()
}

// cancel gives back a place that will not be sent, at most once (see
// sendQueue.cancel). A clock that panics as it is read here still has the
// place given back, at the last reading, before the panic goes on: its
// caller counts the place given back once it asked (see lateTurn), and a
// place given back nowhere is a turn lost (helper-254).
func (l *sendRate) cancel(p sendPlace) {
	if p.counted {
		return // sent at once, never in the queue
	}
	l.mu.Lock()
	defer l.unlock()
	now := l.syncedAt
	defer func() { l.q.cancel(p, now) }()
	now = l.syncLocked()
}

// observe records an answer seen now: throttled, or not (a success, or an
// answer at the service's usual load: see classifier.rateSignal). Other
// failures carry no rate signal and need not be reported. rtt is the
// expected round trip of a request: answers within it of a change of rate
// belong to requests sent before it.
func (l *sendRate) observe(throttled bool, rtt time.Duration) {
	if !throttled && l.quiet.oksOpen() && l.quiet.countOK(l.sinceEpoch(), rtt) {
		return
	}
	l.mu.Lock()
	defer l.unlock()
	now := l.syncLocked()
	l.lastSeen = now
	l.rtt = max(rtt, minRTT)
	l.win.count(throttled)
	switch {
	case l.jump.active():
		if !now.Before(l.jump.countFrom) {
			l.judgeJumpLocked(now, throttled)
		}
	case l.test.active():
		if !now.Before(l.test.countFrom) {
			l.test.after.count(throttled)
			l.judgeLocked(now)
		}
	case now.Before(l.blindUntil):
	default:
		l.detectLocked(now, throttled)
	}
}

// noteThrottleTime records d, the time a timed attempt took to come back
// throttled, in throttleRTT, after which a cut's test begins to count
// answers, when it is longer than the round trip reported: that is the
// attempt time learnt mostly from successes
// (the 95th percentile of a window where throttles, with the limiter, are
// a few in a hundred), and a service that answers throttles more slowly
// than successes (200 ms against 2 ms, an outside review) sent the answers
// to requests of before a cut after the time the cut's test began to
// count: they were taken for the cut's failure, the next cuts followed, and
// the rate ran a sawtooth between 300 and 540 a second on a 500/s table
// (393 successes a second against 510 with throttles answered at once).
// A moving average, a quarter of each new sample, so that a stall does
// not set it alone and a service that speeds up brings it down.
func (l *sendRate) noteThrottleTime(d time.Duration) {
	if d <= 0 {
		return // a clock that stepped back
	}
	d = min(d, testAbandon/2) // a stall, or a clock that leapt, must not hold every test off
	l.mu.Lock()
	defer l.unlock()
	// From 0 at the start too: a first sample taken alone, a 10 s stall
	// held every test off 2.5 s until the next throttle was timed
	// (helper-207).
	l.throttleRTT += (d - l.throttleRTT) / 4
}

// detectLocked adds an answer to the CUSUM, and cuts when it alarms.
func (l *sendRate) detectLocked(now time.Time, throttled bool) {
	if throttled {
		l.cusum += l.llrThr
	} else {
		l.cusum += l.llrOK
	}
	if l.cusum <= 0 {
		l.cusum, l.episode = 0, answers{}
		return
	}
	if l.episode.start.IsZero() {
		l.episode.start = now
	}
	l.episode.count(throttled)
	if l.cusum >= alarmLLR && l.episode.total() >= episodeMin {
		l.cutLocked(now, l.episode, false, nil)
	}
}

// setBackgroundLocked sets the background and the detection's steps: the
// CUSUM weighs a throttled share at the background, raised by its standard
// error (it may be that high), against one minExcess or half the
// background above it.
func (l *sendRate) setBackgroundLocked(b float64) {
	l.background = b
	if l.bSamples > 0 {
		b += math.Sqrt(b * (1 - b) / l.bSamples)
	}
	l.llrThr, l.llrOK = excessLLR(b)
}

// excessLLR returns the log-likelihood ratios of a throttle and of a
// success between a share excessive over the background b and b itself.
func excessLLR(b float64) (thr, ok float64) {
	p0 := min(max(b, minBackground), 0.9)
	p1 := min(p0+max(minExcess, p0/2), 0.99)
	return math.Log(p1 / p0), math.Log((1 - p1) / (1 - p0))
}

// cutLocked cuts for the throttled share of trigger and puts the cut under
// test: the first of a chain, or the next one after chain. A decisive cut
// halves the rate.
func (l *sendRate) cutLocked(now time.Time, trigger answers, decisive bool, chain *cutTest) {
	// What the client sends now: the windows may hold sends from before
	// the last change of rate. Not less than the answers of the trigger
	// came at: workers sleeping in backoffs after its throttles leave the
	// last window or two nearly empty, which says nothing of capacity.
	s := max(l.sendRateLocked(now), float64(trigger.total())/max(now.Sub(trigger.start), sendWindow).Seconds())
	if !math.IsInf(l.q.rate, 1) {
		s = min(s, l.q.rate)
	}
	if !(s > 0) {
		l.cusum, l.episode = 0, answers{}
		return
	}
	f := trigger.throttled()
	b := min(l.background, 0.9)
	accepted := s * (1 - f)
	floor := minCutTo
	if trigger.total() < sizeMin && f <= burstMax && !l.pastHeldLocked(now) {
		// Not after a jump past the peak: it sent over the capacity, and
		// these throttles are its own, not a burst's. Kept at 85%, a rate
		// 10% over a capacity of 2000/s was cut to 98% of it, where 2.5% of
		// the answers throttled kept every window from counting as quiet
		// (and so from rising) and the detection from alarming: 52
		// throttles a second for as long as the capacity held (helper-120).
		floor = smallCutTo
	}
	target := max(cutTo*accepted/(1-b), floor*s)
	if decisive {
		target = minCutTo * s
	}
	if !math.IsInf(l.q.rate, 1) {
		target = min(target, cutTo*l.q.rate) // a cut always cuts
	}
	target = l.clamp(target)
	t := cutTest{
		at: now, countFrom: now.Add(max(l.rtt, l.throttleRTT)), from: l.q.rate, rate: target, prevRate: l.q.rate, sent: s, links: 1,
		decisive: decisive, bounded: 1-accepted/target > l.background+minExcess,
		capacity: accepted / (1 - b), trigger: trigger, first: trigger,
	}
	t.after.start = t.countFrom
	t.firstCapacity = t.capacity
	if chain != nil {
		t.from, t.links, t.first, t.firstCapacity = chain.from, chain.links+1, chain.first, chain.firstCapacity
		t.cleanCapacity = chain.cleanCapacity
		if t.first.total() < sizeMin && trigger.total() >= sizeMin {
			t.first, t.firstCapacity = trigger, t.capacity
		}
	}
	if t.cleanCapacity == 0 && trigger.total() >= cleanMin && trigger.throttled() <= cleanShare {
		t.cleanCapacity = t.capacity
	}
	if l.trace != nil {
		l.tracef(now, "cut #%d f=%.3f (n=%d) b=%.3f S=%.0f to %.0f (capacity %.0f)", t.links, f, trigger.total(), l.background, s, target, t.capacity)
	}
	if chain == nil && math.IsInf(l.q.rate, 1) && l.peak > t.capacity {
		// What an unlimited client got accepted before (a warm-up on an
		// idle table, say) is not what the service takes now: the first
		// cut measures that, and aiming back above it would flood. But
		// a capacity that fell under a demand it had met looks the
		// same, and returns: jumps try it now and then (untested).
		l.untested, l.untestedAt, l.untestedJumpAt, l.untestedFails = l.peak, l.peakAt, now, 0
		l.peak, l.peakAt = t.capacity, now
	}
	l.test, l.chain, l.peakCap = t, jumpChain{}, 0
	l.setRateLocked(target)
	l.growth, l.base, l.baseAt = firstGrowth, target, now
	l.cusum, l.episode = 0, answers{}
	l.cuts++
	l.uncut, l.cutAt = false, now
}

// judgeLocked judges the last cut on the answers to requests sent after it.
// Two shares tell: za, how far the answers are above the background, and
// zd, how far they fell from the share the cut was sized from.
func (l *sendRate) judgeLocked(now time.Time) {
	t := &l.test
	a := t.after
	n := a.total()
	over := n >= testMax || now.Sub(t.at) >= testMaxTime
	if n < testMin && !over {
		return
	}
	if n == 0 {
		l.test = cutTest{} // nothing sent since: the cut stands, unjudged
		return
	}
	za := zAbove(a.throttled(), l.background, n)
	zd := zDrop(t.trigger, a)
	switch {
	case za < 2 && (zd >= dropZ || over && !t.decisive):
		l.standLocked(now, zd, za) // relieved, or no telling
	case za >= 3 && a.throttled() > maxTheirs:
		// So throttled that a cut is due whoever causes it: it stands,
		// and an undo comes back no higher.
		t.from = t.rate
		l.nextCutLocked(now, false)
	case za >= 3 && t.bounded && zd >= 1:
		l.nextCutLocked(now, false) // too small a cut to end the overload, and it helped
	case zd <= -3:
		// Worse than before: the share the cut was sized from was not the
		// overload's (the service's burst hid it, or others sharing the
		// capacity send more). Size the next cut from here.
		l.nextCutLocked(now, false)
	case zd >= dropZ && a.throttled() <= lowShare:
		// It helped, and what is left is a share the detection tells
		// from a background only on many answers: the cut stands and
		// the chain ends. Cut on, at a few percent the chain's next
		// halving cannot tell whose the throttles are, and stands as
		// far below the share the chain began with: one client under
		// 5% at random on 500/s, cut from a start's 15% to 3.9%, cut
		// again and halved to 131/s, and sent 126-159/s for seconds.
		l.standLocked(now, zd, za)
	case zd >= dropZ:
		// It helped, not enough: it stands, and the next cut follows.
		t.from = t.rate
		l.nextCutLocked(now, false)
	case za < 2.5 && !t.decisive:
		if over {
			l.standLocked(now, zd, za) // no telling
		}
	case !t.decisive && zd >= 2:
		if n >= undoMin || over {
			l.nextCutLocked(now, false) // it helped some: a little more
		}
	case !t.decisive:
		// The cut did not end the overload: halve the rate, and compare.
		// These answers are what the halving is judged against: enough
		// of them to tell their share from half of it.
		if float64(n) >= max(undoMin, refThrottles/a.throttled()) || over {
			l.nextCutLocked(now, true)
		}
	case n < undoMin:
		switch {
		case !over:
		case n >= testMin && !helped(zd, a):
			l.takeBackLocked(now, zd) // no telling: the halving is taken back
		default:
			l.standLocked(now, zd, za) // it helped, or too few answers to tell
		}
	default:
		l.judgeHalvingLocked(now, zd, za, over)
	}
}

// judgeHalvingLocked judges a decisive cut that halved the rate without a
// clear fall of the share (zd, za as for judgeLocked): if the throttles
// were this client's (or a fleet's that cuts as it does), the share would
// have fallen at least to ours.
func (l *sendRate) judgeHalvingLocked(now time.Time, zd, za float64, over bool) {
	t := &l.test
	a := t.after
	n := a.total()
	ours := max(l.background, 1-2*(1-t.trigger.throttled()))
	zO := (a.throttled() - ours) / math.Sqrt(shareVar(a.throttled(), n))
	switch {
	case t.first.total() >= sizeMin && zDrop(t.first, a) >= dropZ:
		// Flat now, but far below the share the chain began with: the
		// cuts before helped. This one stands. Not against a share
		// measured on few answers: the detection picks its episode
		// where throttles crowd, and throttles, answered at once, come
		// back before the successes sent with them, so the first
		// answers of a client under 40% random throttles measured
		// 64-93% throttled; against that, any later share "fell".
		if zd < 1 && zO >= dropZ || over {
			l.standLocked(now, zd, za)
		}
	case zd < 1 && zO >= dropZ:
		l.undoLocked(now, zd, zO) // not this client's to help
	case over && zO < dropZ && helped(zd, a):
		l.standLocked(now, zd, za) // it helped some, and may be as ours
	case over:
		l.undoLocked(now, zd, zO)
	}
}

// helped reports whether a halving's share fell enough to say it helped:
// by helpedZ deviations (zd) from the share it was sized from, or by
// clearedZ to none at all in its answers after, a. The one rule for a
// halving judged and for one too slow to judge.
func helped(zd float64, after answers) bool {
	return zd >= helpedZ || zd >= clearedZ && after.thr == 0
}

// nextCutLocked cuts again, sized from the last cut's answers.
func (l *sendRate) nextCutLocked(now time.Time, decisive bool) {
	c := l.test
	l.cutLocked(now, c.after, decisive, &c)
}

// standLocked ends the test: the cut stands, and what it measured is the
// capacity known.
func (l *sendRate) standLocked(now time.Time, zd, za float64) {
	t := l.test
	l.test = cutTest{}
	if l.trace != nil {
		l.tracef(now, "stands after %d links: after=%d/%d drop z=%.1f above z=%.1f, capacity %.0f", t.links, t.after.thr, t.after.total(), zd, za, t.capacity)
	}
	// What the cut measured, unless it was sized on a burst of throttles:
	// the service accepted the rate the cut set (the cut stands), and, when
	// the chain began, what its first cut measured on sizeMin answers (a
	// first cut on fewer measured the throttles crowding a flood's first
	// answers, far above the capacity).
	l.known = max(t.capacity, t.rate*(1-t.after.throttled()))
	if t.first.total() >= sizeMin {
		l.known = max(l.known, min(t.firstCapacity, t.from))
	}
	if t.links == 1 && t.trigger.total() < sizeMin && t.after.total() >= testMin && t.after.thr == 0 {
		// A cut sized on a few answers, after which nothing was
		// throttled at all: a burst of throttles (sends that bunched,
		// a service's bucket run dry), not a fall of capacity. The rate
		// before it was about right; regain it (see regrowTo). When that
		// rate was unlimited, regain what was sent at it instead: the
		// known capacity would be +Inf, and every rise twice whatever a
		// window accepted.
		before := t.prevRate
		if math.IsInf(before, 1) {
			before = t.sent
		}
		l.known = max(l.known, cutTo*before)
	}
	l.noteCleanLocked(now, t)
	if l.pending > 0 && t.capacity >= peakAgree*l.pending {
		l.notePeakLocked(now, max(l.pending, t.capacity)) // two measures agree
	}
	l.pending, l.pendingAt, l.pendingCuts = t.capacity, now, l.cuts
	l.hold = 0
	if now.Before(l.holdUntil) && (zd >= dropZ || t.fellFromAboveBackground(l.background)) {
		// The share fell clearly with a cut made during a hold, or
		// with the chain it ended, begun far above the background: the
		// throttles follow this client's rate after all, whatever the
		// halving before the hold found. A client that joins a fleet of
		// small ones moves the fleet's throttles only some of the way
		// with its halving, takes them for the background, and, excused,
		// kept a large share for the hold while the small ones cut. And
		// a capacity that falls during a hold (5% at random, 500/s to
		// 100/s) is cut to by a chain whose last link, at a few tens of
		// answers a second, falls by two deviations or so: the hold went
		// on, the rate frozen in it, and the client sent at the fallen
		// rate for seconds after the capacity returned.
		l.endHoldLocked(now, "hold ended")
	}
}

// undoLocked ends the test: the throttles do not follow this client's
// rate. The cuts are undone, back to unlimited if the limiter was, and
// otherwise to the rate before the halving, where the share was measured
// as it is now: not to before the chain, since a share of the capacity a
// cut gave up, that others took by growing, is theirs now. The share
// becomes the background for a hold.
func (l *sendRate) undoLocked(now time.Time, zd, zO float64) {
	t := l.test
	l.test = cutTest{}
	a := t.after
	a.ok, a.thr = a.ok+t.trigger.ok, a.thr+t.trigger.thr
	if math.IsInf(t.from, 1) {
		l.setRateLocked(t.from)
	} else {
		l.setRateLocked(min(t.from, t.prevRate))
	}
	if l.trace != nil {
		l.tracef(now, "undone after %d links: after=%d/%d before=%d/%d z=%.1f/%.1f, back to %.0f", t.links, t.after.thr, t.after.total(), t.trigger.thr, t.trigger.total(), zd, zO, l.q.rate)
	}
	l.base, l.baseAt = l.q.rate, now
	// The service took what the trigger's successes say, whoever's the
	// throttles: a capacity seen, as a quiet window's, and as one, over
	// a span of a window or so, it counts the service's burst too (on
	// 500/s with 5% at random, 14 undone halvings of 114 noted more, 623/s
	// at most; counted over the whole test, none did, but what the halved
	// rate sent is not what the service takes, and the first second back
	// after a fall fell from 44% to 37-40%). Windows in the hold count as
	// quiet only once its background is learnt on backgroundAnswers
	// answers, so a client of a few hundred requests a second under
	// throttles at random had often noted no peak at all, and never jumped
	// back after a fall.
	l.notePeakLocked(now, l.tookLocked(t.trigger.ok, max(t.at.Sub(t.trigger.start), sendWindow)))
	n := float64(a.total())
	b := (l.background*l.bSamples + float64(a.thr)) / (l.bSamples + n)
	l.bSamples = min(l.bSamples+n, backgroundAnswers)
	l.setBackgroundLocked(b)
	if zd >= unsureZ || zO < dropZ {
		// The share fell some, or is not clearly above what it would
		// be were the throttles ours: an unsure finding, tested again
		// soon.
		if until := now.Add(unsureHold); until.After(l.holdUntil) {
			l.holdUntil = until // a hold running from a surer finding is not shortened
		}
	} else {
		l.hold = min(max(2*l.hold, holdFirst), holdMax)
		l.holdUntil = now.Add(l.hold)
	}
	l.cusum, l.episode = 0, answers{}
}

// takeBackLocked ends the test of a halving too slow to judge (fewer than
// undoMin answers in its time) whose share did not clearly fall (zd): the
// rate goes back to what it was before the halving, and the cuts before it
// stand. Nothing was found, so neither a background nor a hold: throttles
// that go on cut again, and a client that sends more is judged.
func (l *sendRate) takeBackLocked(now time.Time, zd float64) {
	t := l.test
	l.test = cutTest{}
	l.setRateLocked(t.prevRate)
	l.noteCleanLocked(now, t)
	if l.trace != nil {
		l.tracef(now, "taken back after %d links: after=%d/%d before=%d/%d z=%.1f, back to %.0f", t.links, t.after.thr, t.after.total(), t.trigger.thr, t.trigger.total(), zd, l.q.rate)
	}
	l.base, l.baseAt = l.q.rate, now
	l.cusum, l.episode = 0, answers{}
}

// noteCleanLocked keeps what the first clean link of the chain t measured
// (see cleanShare), and when t's last link measured a third of it or less,
// makes it the peak at once: the capacity fell, and the jumps are to probe
// for its return. Both a stand and a take-back note it: the links before a
// halving taken back stand. (Until 2026-12-04, night, only a stand did, and
// a fleet of four clients of 16 workers whose halvings in a fall were taken
// back regained 75.0% of the capacity in the first second after it
// returned, against 78.3% when those halvings stood; 78.6% now.)
func (l *sendRate) noteCleanLocked(now time.Time, t cutTest) {
	if t.cleanCapacity > 0 {
		l.clean, l.cleanAt = t.cleanCapacity, now
	}
	if c := aged(l.clean, l.cleanAt, now); c >= jumpRatio*t.capacity {
		l.notePeakLocked(now, c)
	}
}

// zAbove returns how many standard deviations a throttled share f over n
// answers lies above the background b, using the larger of the two shares
// for the variance (and at least that of a 2% share).
func zAbove(f, b float64, n int) float64 {
	if n == 0 {
		return 0
	}
	p := max(f, b)
	return (f - b) / math.Sqrt(max(p*(1-p), 0.0196)/float64(n))
}

// zDrop returns how many standard deviations the throttled share fell
// from answers a to answers b.
func zDrop(a, b answers) float64 {
	na, nb := float64(a.total()), float64(b.total())
	if na == 0 || nb == 0 {
		return 0
	}
	p := (float64(a.thr+b.thr) + 0.5) / (na + nb + 1)
	return (a.throttled() - b.throttled()) / math.Sqrt(max(p*(1-p), 0.0196)*(1/na+1/nb))
}

// shareVar returns the variance of a throttled share p measured on n
// answers, as if p were at least 2% from 0 or 1.
func shareVar(p float64, n int) float64 {
	return max(p*(1-p), 0.0196) / float64(max(n, 1))
}

// jumpLocked jumps back toward the peak, when the window w used a rate far
// below it: the capacity may have returned. The jump begins with a probe:
// jumpProbe places waiting, made due at once. A jump does not stand in for
// the window's rise: a probe that fails every window while the peak ages
// would otherwise hold the rate where it is.
func (l *sendRate) jumpLocked(now time.Time, w answers) {
	r := l.q.rate
	// Probes cost at most jumpOverhead of what the rate sends: at a few
	// requests a second (a client of a large fleet, whose peak was its
	// share of the fleet's first flood) they come seconds apart.
	gap := max(l.jumpGap, jumpEvery, time.Duration(float64(time.Second)/(jumpOverhead*r)), jumpRTTs*l.rtt)
	if l.chain.aim > 0 && now.Sub(l.chain.at) > gap+sendWindow {
		l.chain = jumpChain{}
	}
	if math.IsInf(r, 1) || w.sent/w.duration.Seconds() < 0.9*r || now.Sub(l.jumpedAt) < gap {
		return
	}
	p := l.peakLocked(now)
	aim, untested := l.peak, false
	if p < jumpRatio*r && !(l.chain.aim > jumpNear*r) && !l.chain.past {
		if !l.untestedDueLocked(now, r) {
			return
		}
		aim, untested = l.untested, true
	}
	// A chain keeps its aim: the window that accepted the jump before
	// may have raised the aged peak to that jump's rate, which would end
	// the chain there (a capacity back after seconds of a fall was
	// regained to jumpStep times the low rate, then only by the line).
	if l.chain.aim > 0 && !untested {
		aim = l.chain.aim
	}
	to := l.clamp(min(aim, jumpStep*r))
	if to <= r {
		return
	}
	sent := l.q.release(min(jumpProbe, max(1, math.Floor(jumpOverhead*r*gap.Seconds()))))
	if sent == 0 {
		return
	}
	l.win.sent += sent
	if untested {
		l.untestedJumpAt = now
	}
	if l.trace != nil {
		l.tracef(now, "jump %.0f -> %.0f", r, to)
	}
	if l.test.active() && l.known > 0 {
		// The cut stands, unjudged. A capacity known from before it is
		// not regained above what this cut measured (see regrowTo):
		// after a fall, the rise between jumps would otherwise climb
		// back above the fallen capacity.
		l.known = min(l.known, l.test.capacity)
	}
	l.test = cutTest{}
	thr, ok := excessLLR(l.background)
	l.jump = jumpTest{
		at: now, countFrom: now.Add(l.rtt / 2), from: r, to: to, aim: aim, probe: int(sent), chained: l.chain.aim > 0, past: l.chain.past,
		untested: untested, llrThr: thr, llrOK: ok,
	}
	l.jumpedAt = now
}

// untestedDueLocked reports whether a jump from rate r may aim at the rate
// taken before the first cut: it is still far enough above r, and neither
// a jump toward it nor a cut came in the last untestedEvery.
func (l *sendRate) untestedDueLocked(now time.Time, r float64) bool {
	return l.untested > 0 && aged(l.untested, l.untestedAt, now) >= jumpRatio*r &&
		now.Sub(l.untestedJumpAt) >= untestedEvery && now.Sub(l.cutAt) >= untestedEvery
}

// judgeJumpLocked counts an answer to a request sent after a jump: enough
// throttles fail it, the probe answered without them commits it.
func (l *sendRate) judgeJumpLocked(now time.Time, throttled bool) {
	j := &l.jump
	j.after.count(throttled)
	if !j.committed.IsZero() && !now.Before(j.committed.Add(l.rtt)) {
		if j.atRate.start.IsZero() {
			j.atRate.start = now
		}
		j.atRate.count(throttled)
	}
	if throttled {
		j.score += j.llrThr
	} else {
		j.score = max(j.score+j.llrOK, 0)
	}
	failAt := jumpFail
	if j.midChain() {
		failAt = jumpChainFail
	}
	switch {
	case j.score >= failAt:
		l.failJumpLocked(now)
	case j.committed.IsZero() && j.after.total() >= j.probe:
		if l.trace != nil {
			l.tracef(now, "jump probe passed (%d/%d): to %.0f", j.after.thr, j.after.total(), j.to)
		}
		j.committed = now
		l.setRateLocked(j.to)
	}
}

// failJumpLocked ends a jump its throttles failed: back to the rate before
// it, or, when it failed weakly (see weak), halfway there (in ratio), the
// chain going on toward the jump's aim.
func (l *sendRate) failJumpLocked(now time.Time) {
	j := l.jump
	weak := j.weak(now)
	back := j.from
	if weak {
		back = math.Sqrt(j.from * j.to)
	}
	if l.trace != nil {
		l.tracef(now, "jump failed (%d/%d, weak %v), back to %.0f", j.after.thr, j.after.total(), weak, back)
	}
	l.setRateLocked(back)
	if !weak {
		l.jumpGap = min(2*max(l.jumpGap, jumpEvery), jumpEveryMax)
		if j.untested {
			if l.untestedFails++; l.untestedFails >= untestedTries {
				l.untested = 0 // a warm-up's, most likely
			}
		}
	}
	l.chain = jumpChain{}
	if j.committed.IsZero() {
		// The probe's answers still to come are the probe's.
		l.blindUntil = j.at.Add(2 * l.rtt)
	} else {
		// The answers to the jump's requests still to come are the
		// jump's, not the rate's, and so are the throttles while
		// the service refills the burst it took.
		l.blindUntil = now.Add(l.rtt + sendWindow)
		switch {
		case weak:
			l.chain = jumpChain{aim: j.aim, at: now}
		case j.midChain():
			// A jump that followed one that held failed: the service
			// takes somewhere between the two now, and the peak beyond
			// (a warm-up's, say) is gone; aiming at it again would
			// flood the service each time. The chain goes on, halving
			// the gap (in ratio) with each failure. (A failed jump
			// past the peak ends the chain and leaves the peak: it
			// measured nothing above it.)
			l.peak, l.peakAt, l.pending = math.Sqrt(j.from*j.to), now, 0
			l.chain = jumpChain{aim: l.peak, at: now}
		}
	}
	l.jump = jumpTest{}
	l.base, l.baseAt = l.q.rate, now
}

// peakLocked returns the highest capacity measured, halved every
// peakHalfLife.
func (l *sendRate) peakLocked(now time.Time) float64 {
	return aged(l.peak, l.peakAt, now)
}

// aged returns a capacity c measured at at, halved every peakHalfLife
// since.
func aged(c float64, at, now time.Time) float64 {
	if c == 0 {
		return 0
	}
	return c * math.Exp2(-now.Sub(at).Seconds()/peakHalfLife.Seconds())
}

// sendRateLocked returns the places sent per second over the current and
// previous windows (at least 10 ms, so that a client's first answers are
// not taken over a window it has not lived yet).
func (l *sendRate) sendRateLocked(now time.Time) float64 {
	sent, span := l.recentSentLocked(now, 10*time.Millisecond)
	return sent / span.Seconds()
}

// recentSentLocked returns the places sent over the current and previous
// windows, and the span they cover, taken as atLeast when shorter.
func (l *sendRate) recentSentLocked(now time.Time, atLeast time.Duration) (float64, time.Duration) {
	return l.win.sent + l.prev.sent, max(now.Sub(l.win.start)+l.prev.duration, atLeast)
}

func (l *sendRate) setRateLocked(r float64) {
	l.q.setRate(l.clamp(r))
}

// syncLocked reads the clock and brings the queue and the windows up to
// the time it read, which it returns. The clock is read under the lock:
// a reading taken before it, by a caller that then waited for the lock
// behind one that read later, would arrive out of order (under 1000
// callers by up to 218 ms on 2 cores), and this one would take it for a
// clock stepped back.
func (l *sendRate) syncLocked() time.Time {
	l.initLocked()
	// The paced turns before the clock: each was taken on a reading at or
	// before this one (one taken after the reading, on a later one, was
	// given back when the tally opened again from this reading).
	if l.quietTurns {
		l.takenNext, l.takenTurns = l.quiet.takeTurns()
		l.quietTurns = false
	}
	var now time.Time
	switch {
	case l.clock != nil:
		now = l.clock()
		if l.epoch.IsZero() {
			l.epoch = now // for the quiet tally (see sinceEpoch); written once, unless zero
		}
	case l.epoch.IsZero():
		l.epoch = time.Now()
		now = l.epoch
	default:
		now = l.epoch.Add(time.Since(l.epoch))
	}
	// A clock stepped back (one without a monotonic reading) would hold
	// every deadline of the control for as long as the step, and a clock
	// jittering back and forth would run the control ahead of it.
	now = l.steady.at(now)
	l.syncedAt = now
	if l.origin.IsZero() {
		l.origin = now
	}
	if l.takenTurns > 0 {
		next := l.steadyReading(l.takenNext)
		l.win.sent += l.q.tookTurns(l.takenTurns, next, now)
		// The last turn was taken a turn before the next was due.
		l.seenLocked(next.Add(-time.Duration(l.quiet.turn.Load())), now)
		l.takenTurns = 0
	}
	// Sends counted unpaced add to the window only: one that read the
	// tally unlimited as it turned paced came before the change, as it
	// would under the lock.
	sent, ok, lastAt, rtt := l.quiet.take()
	l.win.sent += float64(sent)
	if sent > 0 || ok > 0 {
		l.win.ok += int(ok)
		l.seenLocked(l.steadyReading(lastAt), now)
		if ok > 0 {
			l.rtt = rtt
		}
	}
	l.win.sent += l.q.advance(now)
	idle := !l.lastSeen.IsZero() && now.Sub(l.lastSeen) >= idleReset
	// A rate unused is forgotten only when that raises it: starting over
	// at a finite InitialRate below it would cut a client whose demand
	// came back (an InitialRate of 100 under a learnt 1,000/s, demand
	// 740/s: 112-212 a second for three seconds every minute, helper-206).
	unused := !l.lastUsed.IsZero() && now.Sub(l.lastUsed) >= idleReset && l.initialRate > l.q.rate
	if (idle || unused) && !l.q.waiting() {
		l.startOverLocked(now)
	}
	l.rollLocked(now)
	return now
}

// steadyReading returns the quiet tally's reading r in steady time (see
// openQuietLocked).
func (l *sendRate) steadyReading(r time.Duration) time.Time {
	return l.epoch.Add(r).Add(l.steady.skew)
}

// seenLocked makes at, the reading (in steady time) of a count the quiet
// tally took in, the time last seen, if later: the count's own reading,
// not the opening it came after (an idle limiter started over up to a
// window early: helper-225), and no later than now, the reading of the
// lock that took it in.
func (l *sendRate) seenLocked(at, now time.Time) {
	if seen := earliest(at, now); seen.After(l.lastSeen) {
		l.lastSeen = seen
	}
}

// unlock opens the quiet tally for the state the lock's holder leaves,
// and unlocks.
func (l *sendRate) unlock() {
	l.openQuietLocked()
	l.mu.Unlock()
}

// openQuietLocked opens the quiet tally (see quietTally) from the time
// last read under the lock until the earliest time the control would act
// on the clock alone: the window's end (rollLocked), or an idle or unused
// rate's start over (syncLocked). Sends are counted there while the
// limiter expects no retry and is unlimited (a send would take no place
// and claim nothing; see reserve) or paced with nobody waiting (a send
// due at once would take a place the queue passes at once; its turn is
// taken in the tally, and the queue's clock moved on for it when the lock
// next reads the clock: see sendQueue.tookTurns), successful answers while no jump or
// cut is under test and the detection stands at zero (a success would
// leave it there, its step always below zero; see detectLocked and
// excessLLR): an answer then only adds to the window, and sets the time
// last seen and the round trip, which the tally keeps too.
func (l *sendRate) openQuietLocked() {
	now := l.syncedAt
	if l.quietTurns || l.takenTurns > 0 {
		return // the tally paces sends, and this holder did not take them in
	}
	if now.IsZero() || l.epoch.IsZero() || l.win.start.IsZero() {
		// Not yet read, or on a clock at the zero time: the epoch may
		// still be written, and the tally reads it without the lock.
		l.quiet.close()
		return
	}
	// The tally reads the clock as it is: the time here is the steady
	// time, the clock's readings plus the steps back taken for good.
	reading := func(t time.Time) time.Duration { return t.Sub(l.epoch) - l.steady.skew }
	until := reading(l.win.start) + sendWindow
	if !l.lastSeen.IsZero() {
		until = min(until, reading(l.lastSeen)+idleReset)
	}
	if !l.lastUsed.IsZero() && l.initialRate > l.q.rate {
		until = min(until, reading(l.lastUsed)+idleReset)
	}
	var sends, oks, next, turn time.Duration // 0: none
	if l.expected.count == 0 || !l.expected.pending(l.realTime(now)) {
		switch r := l.q.rate; {
		case math.IsInf(r, 1):
			sends = until
		case !l.q.waiting() && r >= 1/idleReset.Seconds():
			// Nobody waits: a send due at once takes its turn and
			// only moves the queue's clock on (see quietTally.takeTurn).
			// (A turn longer than idleReset, the lock's; no overflow.)
			sends, turn = until, time.Duration(math.Ceil(float64(time.Second)/r)) // never above the rate
			next = reading(l.q.servedAt) + secondsToDuration(max(float64(l.q.turns)-l.q.clock, 0)/r)
		}
	}
	if !l.jump.active() && !l.test.active() && l.cusum == 0 {
		oks = until
	}
	l.quietTurns = l.quiet.open(reading(now), sends, oks, next, turn)
}

// sinceEpoch reads the clock, outside the lock, as the quiet tally
// counts: the time since the epoch the first reading under the lock set.
// The tally is open only once that is set.
func (l *sendRate) sinceEpoch() time.Duration {
	if l.clock == nil {
		return time.Since(l.epoch)
	}
	return l.clock().Sub(l.epoch)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// startOverLocked forgets what an idle limiter learnt.
func (l *sendRate) startOverLocked(now time.Time) {
	l.setRateLocked(l.initialRate)
	l.cusum, l.episode, l.test, l.jump = 0, answers{}, cutTest{}, jumpTest{}
	l.bSamples, l.hold, l.holdUntil = 0, 0, time.Time{}
	l.setBackgroundLocked(0)
	l.known, l.peak, l.peakAt, l.pending, l.chain, l.peakCap = 0, 0, time.Time{}, 0, jumpChain{}, 0
	l.untested = 0
	l.clean, l.cleanAt = 0, time.Time{}
	l.base, l.baseAt, l.growth, l.uncut = 0, time.Time{}, firstGrowth, true
	l.win, l.prev = answers{start: now}, answers{}
	l.lastSeen, l.lastUsed = now, time.Time{}
	l.throttleRTT = 0
}

// rollLocked closes the window when it is over: it ends the jumps and holds
// that are over, learns the background, and raises the rate, by a rise or
// a jump, when the window allows it.
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
	if w.thr > 0 || w.sent/elapsed.Seconds() >= keptShare*l.q.rate {
		l.lastUsed = now
	}
	l.learnBackgroundLocked(now, w)
	switch j := l.jump; {
	case !j.active():
	case !j.committed.IsZero() && now.Sub(j.committed) >= jumpProbation:
		if l.trace != nil {
			l.tracef(now, "jump to %.0f holds (%d/%d)", l.q.rate, j.after.thr, j.after.total())
		}
		l.jump, l.jumpGap = jumpTest{}, jumpEvery
		held := l.q.rate
		switch {
		case j.past: // the chain's last: what it held over the peak may be a burst's
			l.chain, l.peakCap, l.peakCapAt = jumpChain{}, j.aim/jumpPast, now
			held = l.peakCap
		case j.aim <= jumpNear*held:
			l.chain = jumpChain{aim: jumpPast * j.aim, past: true, at: now}
		default:
			l.chain = jumpChain{aim: j.aim, at: now}
		}
		l.known = max(l.known, held)
		l.base, l.baseAt = l.q.rate, now
	case j.committed.IsZero() && now.Sub(j.at) >= sendWindow+2*l.rtt:
		l.jump = jumpTest{} // the probe's answers did not come: no telling
	}
	if l.pending > 0 && l.cuts == l.pendingCuts && now.Sub(l.pendingAt) >= peakConfirm {
		l.notePeakLocked(now, l.pending) // no cut since: it held
		l.pending = 0
	}
	if l.test.active() && now.Sub(l.test.at) >= testAbandon {
		l.test = cutTest{} // too few answers to judge: the cut stands, unjudged
	}
	if !l.holdUntil.IsZero() && !now.Before(l.holdUntil) {
		// The finding is over: the throttles are tested again.
		l.endHoldLocked(now, "hold over")
	}
	// A background learnt on few answers excuses no throttles for a rise.
	b := l.background
	if l.bSamples < backgroundAnswers {
		b = 0
	}
	free := !l.test.active() && !l.jump.active() && (l.holdUntil.IsZero() || l.bSamples >= backgroundAnswers)
	quiet := free && zAbove(w.throttled(), b, w.total()) < 2
	if quiet {
		l.noteAcceptedLocked(now, w)
	}
	// A jump may end the test of a cut that is not decisive, once the
	// cut's answers say it relieved the throttles (testMin of them, not
	// clearly above the background), and of a halving too slow to judge
	// on fewer (see endsByJump): the cut stands (a capacity
	// that returned is worth more than a verdict). A jump on no such answers,
	// made a window after a cut for throttles, fails, and ended the
	// test, so that the chain stopped at its first link: at 100/s
	// falling to 20/s, each cut kept 85% of a rate measured on 20-odd
	// answers (see smallCutTo), the rate stood at 1.5 times the low
	// capacity, above a third of the peak, and no jump went back up when
	// the capacity returned.
	canJump := !l.jump.active() && (l.holdUntil.IsZero() || l.bSamples >= backgroundAnswers) &&
		(!l.test.active() || l.test.endsByJump(l.background))
	if quiet {
		l.growLocked(now, w)
	}
	if canJump {
		l.jumpLocked(now, w)
	}
	if elapsed >= 2*sendWindow {
		w = answers{} // idle for more than a window: it says nothing of now
	}
	l.prev = w
	l.win = answers{start: now}
}

// endHoldLocked ends the hold and forgets its background; why names the
// end in a trace.
func (l *sendRate) endHoldLocked(now time.Time, why string) {
	if l.trace != nil {
		l.tracef(now, "%s: background %.3f forgotten", why, l.background)
	}
	l.holdUntil, l.bSamples = time.Time{}, 0
	l.setBackgroundLocked(0)
}

// learnBackgroundLocked learns the background from the closed window w:
// both ways during a hold, when the throttles were found not to follow the
// rate; otherwise only down, when w is clearly below it.
func (l *sendRate) learnBackgroundLocked(now time.Time, w answers) {
	n := float64(w.total())
	if n == 0 {
		return
	}
	share := float64(w.thr) / n
	b := l.background
	switch {
	case now.Before(l.holdUntil):
		wgt := n / (l.bSamples + n)
		l.bSamples = min(l.bSamples+n, backgroundAnswers)
		l.setBackgroundLocked(b + wgt*(share-b))
	case b > 0 && share < b-2*math.Sqrt(b*(1-b)/n):
		a := min(w.duration.Seconds()/backgroundTau.Seconds(), 1)
		l.setBackgroundLocked(b + a*(share-b))
	}
}

// pastHeldLocked reports whether a jump past the peak held within
// peakCapFor, with no cut since.
func (l *sendRate) pastHeldLocked(now time.Time) bool {
	return l.peakCap > 0 && now.Sub(l.peakCapAt) < peakCapFor
}

// notePeakLocked raises the peak to capacity c measured now.
func (l *sendRate) notePeakLocked(now time.Time, c float64) {
	if c > l.peakLocked(now) {
		l.peak, l.peakAt = c, now
		if l.untested > 0 && c >= aged(l.untested, l.untestedAt, now) {
			l.untested = 0 // regained
		}
	}
}

// noteAcceptedLocked raises the peak to what the quiet window w and the
// one before it accepted: the service took that much, so its capacity was
// at least as high (until a first cut from unlimited says otherwise).
func (l *sendRate) noteAcceptedLocked(now time.Time, w answers) {
	if span := w.duration + l.prev.duration; span > 0 {
		c := l.tookLocked(w.ok+l.prev.ok, span)
		if l.pastHeldLocked(now) {
			c = min(c, l.peakCap)
		}
		l.notePeakLocked(now, c)
	}
}

// tookLocked returns the rate the service was seen to take when ok
// requests succeeded over span (> 0): what they ask for with the share
// the background throttles, but never more than the rate, since answers
// bunch (a pause, a burst of sends).
func (l *sendRate) tookLocked(ok int, span time.Duration) float64 {
	return min(float64(ok)/span.Seconds()/(1-min(l.background, 0.9)), l.q.rate)
}

// growLocked raises a finite rate that the closed window w used, along the
// line of time from base (see probeStep), and multiplicatively while no
// capacity was ever measured; never to more than twice what w sent and the
// service accepted, so that an idle or demand-bound client cannot talk
// itself into a rate it never tested.
func (l *sendRate) growLocked(now time.Time, w answers) {
	r := l.q.rate
	if math.IsInf(r, 1) {
		return
	}
	secs := w.duration.Seconds()
	if w.sent/secs < inUseShare*r || l.baseAt.IsZero() {
		l.base, l.baseAt = r, now // not in use: the rise starts over from here
		return
	}
	accepted := float64(w.ok) / secs
	since := now.Sub(l.baseAt)
	rise := max(probeStep, probeFrac*l.known) * lineWindows(since)
	next := l.base + rise
	switch {
	case l.uncut && since >= slowStartAfter:
		// No cut has measured a capacity since the start. (The peak is
		// no such measure: it is what the windows accepted at the rate.)
		next = max(next, r*(1+l.growth))
		l.growth = min(2*l.growth, maxGrowth)
	case r < regrowTo*l.known:
		// Below the capacity the last standing cut measured (a halving
		// that stood, a cut sized on a burst): regain it quickly, up to
		// regrowTo of it, then probe on by the line, from there: the
		// line of the cut's own rate, half of it after a halving, would
		// hold the rate at regrowTo for seconds (a client of 64 workers
		// halved from 602 to 301/s on 500/s stood at 452 for 3.5 s).
		if regained := min(r*(1+regrowStep), regrowTo*l.known); regained > next {
			next = regained
			l.base = regained - rise
		}
	}
	next = min(next, 2*max(accepted, l.minRate))
	if next > r {
		l.setRateLocked(next)
	}
}

// lineWindows returns how many windows' steps the line has risen by,
// since after it began: one a window for lineSteepAfter, then a slope that
// doubles every lineDoubling, up to lineMaxSlope.
func lineWindows(since time.Duration) float64 {
	w := since.Seconds() / sendWindow.Seconds()
	if since <= lineSteepAfter {
		return w
	}
	q := lineSteepAfter.Seconds() / sendWindow.Seconds()
	d := lineDoubling.Seconds() / sendWindow.Seconds()
	x := w - q
	xMax := d * math.Log2(lineMaxSlope)
	if x <= xMax {
		return q + d/math.Ln2*(math.Exp2(x/d)-1)
	}
	return q + d/math.Ln2*(lineMaxSlope-1) + lineMaxSlope*(x-xMax)
}

func (l *sendRate) clamp(r float64) float64 {
	return math.Min(math.Max(r, l.minRate), l.maxRate)
}
