package delayers

import (
	"math"
	"reflect"
	"time"
)

// Contention is the backoff of one optimistic-concurrency loop (write an
// item back on a version condition, and on a conflict write again) that
// learns from the conflicts themselves how many clients compete for the
// item, and spaces its attempts so that the item stays busy without being
// fought over.
//
// A conflict reports the version the attempt's write expected (seen) and
// the item's current version (DynamoDB returns the item with
// ReturnValuesOnConditionCheckFailure set to ALL_OLD). Two kinds of loop
// give it different news, and it measures each with its own estimator:
//
//   - A re-reading loop reads the item before each write, so seen is news:
//     the wins between the previous conflict and this attempt's read
//     (seen minus the previous conflict's current), over that span, give
//     the share of time the item is busy with winning writes, rho, each
//     taking v, the span an attempt holds the item open (half its round
//     trips: from its read to its write). From rho comes the load all
//     competitors offer, G = rho/(1-rho), and from G and the client's own
//     cycle the number of competitors m = G*cycle/v. The next sleep is
//     drawn uniformly in [W/2, 3W/2], where W = m*v/targetLoad - 2*v is
//     the mean sleep that brings the competitors' offered load to
//     targetLoad (3).
//   - An ALL_OLD loop writes again with the version its failed write
//     returned, without a read, so seen is the previous conflict's current
//     and brings no news. Whenever seen is not past the previous conflict's
//     current (a re-reading loop that found the item unchanged included),
//     the wins are counted from the previous conflict's current to this
//     one's, less the one win that a conflict implies happened during the
//     attempt, over the span between the two conflicts; and a win holds the
//     item for a whole attempt, 2*v, since the version a retry writes with
//     dates from the previous write reaching the item. m comes from them as
//     above, with 2*v for v, and so does the sleep, with allOldLoad (1) for
//     targetLoad (the cycle counting one more attempt, the quick retry).
//     Since the version a conflict returns is as good as a fresh read,
//     while the one held through a long sleep is stale, the sleeps
//     alternate: after such a conflict that followed a sleep drawn from m
//     (or the first window), the loop retries within [0, v/2]; after any
//     other, it sleeps as drawn from m.
//
// When rho is close to 1 the item is saturated and G says little, so the
// estimate of m grows by saturatedGrowth (5) instead, up to the estimate
// whose mean sleep is twice Cap (past it every sleep is Cap); an estimate is kept
// until a measurement counts at least one win. While W <= 0 the sleep is drawn in
// [0, v]. The first retry, before any estimate, waits uniformly up to
// firstWindow (28) times v.
//
// Without versions (Next with current <= seen) it is blind: full jitter
// whose window starts at blindBase (4) round trips, a round trip being
// half of took (an attempt reads and writes: 4 round trips are twice
// took), and grows by
// blindGrowth (1.5) per conflict, the best blind strategy of the blog's experiment
// (BENCHMARKS.md, section 2).
//
// Every delay is within [0, Cap]. A Contention is for one loop and is not
// safe for concurrent use; it draws one value from its Source per Next. The
// zero value is usable, with a 20 s cap and the runtime's generator. A nil
// *Contention has nowhere to keep its estimate: each Next answers as a
// fresh zero Contention's first conflict does, and Reset does nothing,
// where they would otherwise panic.
type Contention struct {
	// Cap bounds every delay. Zero or less means DefaultCap (20 s).
	Cap time.Duration
	// Source supplies the randomness. Nil means the runtime's generator,
	// as does a Source that cannot be called (a nil func, a nil pointer to
	// one of math/rand's generators) or a rand.Rand or rand.Zipf left at
	// its zero value, which only their constructors make usable (a zero
	// rand.PCG or rand.ChaCha8 works, and is used): Contention has no
	// constructor to report it. A
	// working math/rand generator (a *rand.Rand, say), which the delayers'
	// constructors refuse because one delayer serves many goroutines, is
	// used as given, since a Contention serves one loop: give each
	// Contention its own, or a Source safe for concurrent use (NewSource).
	Source Source

	rtt         time.Duration // v, smoothed
	competitors float64       // estimate of the clients competing, this one included
	prevAt      time.Time     // when the previous conflict with versions was seen
	prevVersion int64
	informed    bool    // a conflict with versions was seen
	lastMean    float64 // the mean sleep last drawn from m, and the quick retry after it if any, in nanoseconds
	sized       bool    // the last sleep was drawn from m, or was the first window
	conflicts   int
}

// Tuning of Contention, measured in the blog's experiment (cmd/jittersim,
// N = 10 to 190, 100 runs, seed 1; BENCHMARKS.md, section 2). Re-reading
// loops: the prototype's numbers (2, 14, 3) made 527 calls in 3,937 ms at
// N = 100; these, 438 in 3,952 (449 in 3,694 in today's simulator, against
// full jitter's 796 in 4,880). ALL_OLD loops (jittersim -all-old):
// allOldLoad 1 makes 788 calls in 4,912 ms at N = 100 and 2,042 in 8,420 at
// N = 190, against full jitter's 1,728 in 31,921 and 4,391 in 47,817; 0.5
// makes fewer calls (638, 1,534) in more time (6,526, 11,073 ms), 2 more
// calls (1,201, 3,663) in less time (4,073, 6,977 ms). Without the quick
// retry after a sleep drawn from m, allOldLoad 1 made 885 and 2,143 calls
// in 5,474 and 9,554 ms.
const (
	// targetLoad is the load, in attempts per v over all competitors, that
	// Contention aims at in a re-reading loop.
	targetLoad = 3.0
	// allOldLoad is the load, in attempts per 2*v over all competitors,
	// that it aims at when the reads bring no news (an ALL_OLD loop).
	allOldLoad = 1.0
	// firstWindow is the window of the first retry, in units of v.
	firstWindow = 28
	// blindBase and blindGrowth shape the blind fallback.
	blindBase   = 4
	blindGrowth = 1.5
	// saturated is the busy share above which the estimate grows by
	// saturatedGrowth instead of being measured.
	saturated       = 0.9
	saturatedGrowth = 5.0
)

// Next returns the sleep before the next attempt, after a conflict seen at
// time at. took is how long the failed attempt took (its round trips); seen
// is the item's version the attempt's write expected (the one it read, or in
// an ALL_OLD loop the one its previous conflict returned) and current the
// version it had when the write failed. current <= seen means the versions
// are unknown. Times may come from any clock, virtual ones included, as long
// as it is the same for every call.
func (c *Contention) Next(at time.Time, took time.Duration, seen, current int64) time.Duration {
	if c == nil {
		c = new(Contention)
	}
	capD := c.Cap
	if capD <= 0 {
		capD = DefaultCap
	}
	src := c.Source
	if src == nil || !callable(src, reflect.TypeFor[Source]()) || zeroGenerator(src) {
		src = runtimeSource{}
	}
	x := src.Uint64()
	c.conflicts++
	// The span an attempt holds the item open, from its read to its write
	// reaching the service: about half its round trips. An attempt can take
	// far longer than its round trips (the SDK's own retries of a throttle
	// inside it, with their sleeps), so v follows a shorter attempt at once
	// and a longer one only by an eighth of the difference.
	v := max(took/2, time.Microsecond)
	switch {
	case c.rtt == 0 || v < c.rtt:
		c.rtt = v
	default:
		c.rtt += (v - c.rtt) / 8
	}
	rtt := float64(c.rtt)

	if current <= seen {
		// Blind: full jitter over a window in round trips.
		w := float64(blindBase) * rtt * math.Pow(blindGrowth, float64(min(c.conflicts-1, 256)))
		return between(0, durationUpTo(w, capD), x)
	}
	readAt := at.Add(-took)
	if !c.informed {
		c.informed, c.prevAt, c.prevVersion, c.sized = true, at, current, true
		return between(0, durationUpTo(firstWindow*rtt, capD), x)
	}
	// The wins between the previous conflict and this attempt's read, over
	// that span, measure the load; this client's own cycle, from conflict
	// to conflict, says how many it competes with.
	span, wins, hold, load := readAt.Sub(c.prevAt), seen-c.prevVersion, rtt, float64(targetLoad)
	noNews := wins <= 0
	if noNews {
		// The read brought no news (an ALL_OLD loop writes with the
		// version its previous conflict returned): count the wins from
		// conflict to conflict, less the one this conflict implies, and
		// let each hold the item a whole attempt.
		span, wins, hold, load = at.Sub(c.prevAt), current-c.prevVersion-1, 2*rtt, allOldLoad
	}
	cycle := c.lastMean + float64(took) // the cycle this client planned
	if c.lastMean == 0 {
		cycle = float64(at.Sub(c.prevAt))
	}
	c.prevAt, c.prevVersion = at, current
	if span > 0 && wins > 0 {
		rho := float64(wins) * hold / float64(span)
		if rho >= saturated {
			c.competitors = max(saturatedGrowth*c.competitors, 2)
		} else {
			g := rho / (1 - rho)
			c.competitors = max(g*cycle/hold, 1)
		}
	}
	if noNews && c.sized {
		// The attempt wrote with a version held through a sized sleep,
		// stale as expected; the one this conflict returned is fresh.
		c.sized = false
		return between(0, durationUpTo(rtt/2, capD), x)
	}
	// Past the estimate whose mean sleep is twice the cap, every sleep is
	// the cap: a larger one changes nothing, and, grown fivefold a
	// saturated conflict with no ceiling, it reached +Inf, from which no
	// quiet conflict brought it back (helper-253). The cycle planned is
	// the sleep the cap lets be drawn, not the mean beyond it.
	c.competitors = min(c.competitors, (2*float64(capD)+2*hold)*load/hold)
	mean := c.competitors*hold/load - 2*hold
	c.lastMean = min(max(mean, 0), float64(capD))
	if noNews && mean > 0 {
		c.lastMean += float64(took) // the quick retry that follows
	}
	c.sized = mean > 0
	if mean <= 0 {
		return between(0, durationUpTo(rtt, capD), x)
	}
	return between(durationUpTo(mean/2, capD), durationUpTo(1.5*mean, capD), x)
}

// Reset starts over, as for a new item.
func (c *Contention) Reset() {
	if c == nil {
		return
	}
	capD, src := c.Cap, c.Source
	*c = Contention{Cap: capD, Source: src}
}

// durationUpTo converts f nanoseconds to a Duration, saturating at limit.
func durationUpTo(f float64, limit time.Duration) time.Duration {
	if !(f < float64(limit)) {
		return limit
	}
	if f <= 0 {
		return 0
	}
	return time.Duration(f)
}
