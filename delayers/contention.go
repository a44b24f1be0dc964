package delayers

import (
	"math"
	"time"
)

// Contention is the backoff of one optimistic-concurrency loop (read an
// item, write it back on a version condition, read again on a conflict)
// that learns from the conflicts themselves how many clients compete for
// the item, and spaces its attempts so that the item stays busy without
// being fought over.
//
// A conflict reports the version the attempt read and the item's current
// version (DynamoDB returns the item with ReturnValuesOnConditionCheckFailure
// set to ALL_OLD). The wins between the previous conflict and this attempt's
// read, over that span, give the share of time the item is busy with
// winning writes, rho, each taking v, the span an attempt holds the item
// open (half its round trips: from its read to its write); from rho, the
// load all competitors offer, G = rho/(1-rho), and from G and the client's
// own cycle the number of competitors m = G*cycle/v. The next sleep is drawn
// uniformly in [W/2, 3W/2], where W = m*v/targetLoad - 2*v is the mean sleep
// that brings the competitors' offered load to targetLoad. When rho is
// close to 1 the item is saturated and G says little, so the estimate of m
// grows by saturatedGrowth instead. The first retry, before any estimate,
// waits uniformly up to firstWindow times v.
//
// Without versions (Next with current <= seen) it is blind: full jitter
// whose window starts at blindBase round trips and grows by blindGrowth
// per conflict, the best blind strategy of the blog's experiment
// (BENCHMARKS.md, section 2).
//
// Every delay is within [0, Cap]. A Contention is for one loop and is not
// safe for concurrent use; it draws one value from its Source per Next. The
// zero value is usable, with a 20 s cap and the runtime's generator.
type Contention struct {
	// Cap bounds every delay. Zero means DefaultCap (20 s).
	Cap time.Duration
	// Source supplies the randomness. Nil means the runtime's generator.
	Source Source

	rtt         time.Duration // v, smoothed
	competitors float64       // estimate of the clients competing, this one included
	prevAt      time.Time     // when the previous conflict with versions was seen
	prevVersion int64
	informed    bool    // a conflict with versions was seen
	lastMean    float64 // the mean sleep last drawn, in nanoseconds
	conflicts   int
}

// Tuning of Contention, measured in the blog's experiment (cmd/jittersim,
// N = 10 to 190, 100 runs; BENCHMARKS.md, section 2): the prototype's
// numbers (2, 14, 3) made 527 calls in 3,937 ms at N = 100; these, 438 in
// 3,952.
const (
	// targetLoad is the load, in attempts per v over all competitors, that
	// Contention aims at.
	targetLoad = 3.0
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
// time at. took is how long the failed attempt took (its round trip); seen is
// the item's version the attempt read and current the version it had when
// the write failed. current <= seen means the versions are unknown. Times
// may come from any clock, virtual ones included, as long as it is the same
// for every call.
func (c *Contention) Next(at time.Time, took time.Duration, seen, current int64) time.Duration {
	capD := c.Cap
	if capD <= 0 {
		capD = DefaultCap
	}
	src := c.Source
	if src == nil {
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
		c.informed, c.prevAt, c.prevVersion = true, at, current
		return between(0, durationUpTo(firstWindow*rtt, capD), x)
	}
	// The wins between the previous conflict and this attempt's read, over
	// that span, measure the load; this client's own cycle, from conflict
	// to conflict, says how many it competes with.
	span := readAt.Sub(c.prevAt)
	wins := seen - c.prevVersion
	cycle := c.lastMean + float64(took) // the cycle this client planned
	if c.lastMean == 0 {
		cycle = float64(at.Sub(c.prevAt))
	}
	c.prevAt, c.prevVersion = at, current
	if span > 0 && wins > 0 {
		rho := float64(wins) * rtt / float64(span)
		if rho >= saturated {
			c.competitors = max(saturatedGrowth*c.competitors, 2)
		} else {
			g := rho / (1 - rho)
			c.competitors = max(g*cycle/rtt, 1)
		}
	}
	mean := c.competitors*rtt/targetLoad - 2*rtt
	c.lastMean = max(mean, 0)
	if mean <= 0 {
		return between(0, durationUpTo(rtt, capD), x)
	}
	return between(durationUpTo(mean/2, capD), durationUpTo(1.5*mean, capD), x)
}

// Reset starts over, as for a new item.
func (c *Contention) Reset() {
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
