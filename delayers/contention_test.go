package delayers

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestContentionSlowAttemptDoesNotInflate: an attempt that takes far longer
// than its round trips (the SDK's own throttle retries inside it) does not
// make the later sleeps long: twelve conflicts with one such attempt sleep
// about as long as twelve without.
func TestContentionSlowAttemptDoesNotInflate(t *testing.T) {
	total := func(slow time.Duration) time.Duration {
		c := Contention{Source: NewSource(1)}
		at := time.Unix(0, 0)
		version := int64(0)
		var sum time.Duration
		for i := range 12 {
			took := time.Millisecond
			if i == 2 {
				took = slow
			}
			at = at.Add(took)
			seen := version
			version++ // another writer won meanwhile
			d := c.Next(at, took, seen, version)
			if i > 2 {
				sum += d
			}
			at = at.Add(d)
		}
		return sum
	}
	fast, slowed := total(time.Millisecond), total(800*time.Millisecond)
	assert.Less(t, slowed, 3*fast+10*time.Millisecond, "expect the sleeps after one slow attempt about as short as without (%v), got %v", fast, slowed)
}

// TestContentionStaysWithinCap: any report gives a delay within [0, Cap].
func TestContentionStaysWithinCap(t *testing.T) {
	c := Contention{Cap: time.Second, Source: NewSource(2)}
	at := time.Unix(0, 0)
	for i := range 200 {
		at = at.Add(time.Millisecond)
		d := c.Next(at, time.Duration(i)*time.Millisecond, int64(i), int64(i*50+1))
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, time.Second)
	}
	var blind Contention
	assert.LessOrEqual(t, blind.Next(at, time.Hour, 0, 0), DefaultCap)
}

// contentionLoop runs one loop of conflicts against an item that
// competitors write perMs times per millisecond, with attempts of took, and
// returns the sleeps of its conflicts. A re-reading loop reads the item at
// the start of each attempt; an ALL_OLD loop reads it once, then writes
// again with the version its failed write returned (current), as a
// DynamoDB loop with ReturnValuesOnConditionCheckFailure=ALL_OLD does.
func contentionLoop(allOld bool, perMs int64, took time.Duration, conflicts int) []time.Duration {
	c := Contention{Source: NewSource(3)}
	epoch := time.Unix(0, 0)
	version := func(t time.Duration) int64 { return perMs * int64(t/time.Microsecond) / 1000 }
	var now time.Duration
	seen := version(now)
	var sleeps []time.Duration
	for range conflicts {
		now += took
		current := version(now)
		d := c.Next(epoch.Add(now), took, seen, current)
		sleeps = append(sleeps, d)
		now += d
		if allOld {
			seen = current
		} else {
			seen = version(now)
		}
	}
	return sleeps
}

// TestContentionLearnsInAnAllOldLoop: an ALL_OLD loop never re-reads, so
// the version each attempt starts from is the one its previous conflict
// returned; under heavy contention (10 wins per millisecond, attempts of
// 1 ms) its backoff still grows beyond a few round trips, as a re-reading
// loop's does. (Every other sleep of the ALL_OLD loop is a quick retry with
// the fresh version a conflict after a long sleep returned, so it is the
// mean sleep that must grow.)
func TestContentionLearnsInAnAllOldLoop(t *testing.T) {
	const took = time.Millisecond
	mean := func(ds []time.Duration) time.Duration {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum / time.Duration(len(ds))
	}
	reread := contentionLoop(false, 10, took, 12)
	allOld := contentionLoop(true, 10, took, 12)
	assert.Greater(t, mean(reread[6:]), 10*took, "expect the re-reading loop to back off, got %v", reread)
	assert.Greater(t, mean(allOld[6:]), 10*took, "expect the ALL_OLD loop to back off beyond a few round trips, got %v", allOld)
	assert.Greater(t, slices.Max(allOld[8:]), 10*took, "expect the ALL_OLD loop's sleeps sized from the load to grow, got %v", allOld)
}

// TestANilContentionAnswersAsAFreshOne: a *Contention left nil has nowhere
// to keep its estimate, so every Next answers as a fresh zero Contention's
// first conflict does (within the first window of round trips, or the blind
// one), and Reset does nothing, instead of panicking.
func TestANilContentionAnswersAsAFreshOne(t *testing.T) {
	var c *Contention
	c.Reset()
	at := time.Unix(0, 0)
	for i := range 20 {
		took := 2 * time.Millisecond
		informed := c.Next(at, took, int64(i), int64(i+3))
		assert.GreaterOrEqual(t, informed, time.Duration(0))
		assert.LessOrEqual(t, informed, firstWindow*took/2, "expect the first window of a fresh Contention")
		blind := c.Next(at, took, 0, 0)
		assert.LessOrEqual(t, blind, blindBase*took/2, "expect the blind first window of a fresh Contention")
		at = at.Add(took)
	}
}

// TestContentionComesBackFromALongSaturation: a re-reading loop whose item
// stays saturated for a thousand conflicts (Do with UnlimitedAttempts, say),
// then goes quiet, comes back down from the cap. On a saturated item the
// estimate of the competitors grew fivefold a conflict with no ceiling,
// and the uncapped mean sleep it planned fed its own cycle: after some 880
// conflicts it was +Inf, and every sleep after was the cap until Reset,
// however quiet the item (helper-253: 200 of 200; a minute of saturation
// under a 100 ms cap).
func TestContentionComesBackFromALongSaturation(t *testing.T) {
	for _, capD := range []time.Duration{0, 100 * time.Millisecond} {
		c := Contention{Cap: capD, Source: NewSource(1)}
		limit := capD
		if limit <= 0 {
			limit = DefaultCap
		}
		at := time.Unix(0, 0)
		const took = 10 * time.Millisecond
		version := int64(0)
		for range 1000 { // a thousand wins between conflicts: saturated
			at = at.Add(took)
			seen := version
			version += 1000
			at = at.Add(c.Next(at, took, seen, version))
		}
		assert.False(t, math.IsInf(c.competitors, 0), "cap %v: expect a finite estimate, got %g", capD, c.competitors)
		atCap := 0
		for range 200 { // quiet: one win during each sleep, one during each attempt
			version++
			seen := version
			at = at.Add(took)
			version++
			d := c.Next(at, took, seen, version)
			at = at.Add(d)
			if d == limit {
				atCap++
			}
		}
		assert.Less(t, atCap, 10, "cap %v: expect the quiet item's sleeps back below the cap, %d of 200 at it; competitors %g", capD, atCap, c.competitors)
	}
}
