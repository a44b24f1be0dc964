package jitterretry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSteadyTimeCountsNoTimeTwice: readings that move back and forth, by
// any amount, give a time no later than the latest reading, and a single
// reading out of line (an hour back, the zero time) moves nothing: taken
// for good at once, or once more than maxClockHold behind, each return
// forward counted the step again (helper-110, helper-111).
func TestSteadyTimeCountsNoTimeTwice(t *testing.T) {
	for _, amp := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 200 * time.Millisecond, time.Hour} {
		var s steadyTime
		var got time.Time
		for ms := range 1000 {
			off := amp
			if ms%2 == 1 {
				off = -amp
			}
			got = s.at(t0.Add(time.Duration(ms)*time.Millisecond + off))
		}
		assert.Equal(t, t0.Add(998*time.Millisecond+amp), got, "jitter ±%v: expect the latest reading, not more", amp)
	}
	for name, outOfLine := range map[string]time.Time{"an hour back": t0.Add(-time.Hour), "the zero time": {}} {
		var s steadyTime
		s.at(t0)
		assert.Equal(t, t0, s.at(outOfLine), name)
		assert.Equal(t, t0.Add(time.Millisecond), s.at(t0.Add(time.Millisecond)), "%s: expect the clock's time once it comes back", name)
	}
}

// TestSteadyTimeTakesAStepBackForGoodAfterTheHold: a clock stepped back
// an hour for good holds the time for maxClockHold of its own time, then
// goes on from where it was by as much as it moves; a step back shorter
// than the hold holds only until the clock passes where it was.
func TestSteadyTimeTakesAStepBackForGoodAfterTheHold(t *testing.T) {
	var s steadyTime
	s.at(t0)
	back := t0.Add(-time.Hour)
	for d := time.Duration(0); d < maxClockHold; d += 10 * time.Millisecond {
		assert.Equal(t, t0, s.at(back.Add(d)), "held %v into the hold", d)
	}
	assert.Equal(t, t0, s.at(back.Add(maxClockHold)), "expect the step taken here, from where the time was")
	assert.Equal(t, t0.Add(10*time.Millisecond), s.at(back.Add(maxClockHold+10*time.Millisecond)))

	var short steadyTime
	short.at(t0)
	assert.Equal(t, t0, short.at(t0.Add(-5*time.Millisecond)))
	assert.Equal(t, t0.Add(time.Millisecond), short.at(t0.Add(time.Millisecond)))
}
