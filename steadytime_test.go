package jitterretry

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestSteadyTimeCountsNoTimeTwice: readings that jitter, alternately or at
// random, by up to ±400 ms, read every millisecond or every ten, give a
// time no later than the highest reading; taken for good at once, or once
// readings 100 ms apart stayed behind, each return forward counted the
// step again: ±100 ms at random ran 3.7 times too fast (helper-110,
// helper-111, helper-113).
func TestSteadyTimeCountsNoTimeTwice(t *testing.T) {
	for _, amp := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		for _, every := range []time.Duration{time.Millisecond, 10 * time.Millisecond} {
			for _, random := range []bool{false, true} {
				rng := rand.New(rand.NewPCG(1, uint64(amp)))
				var s steadyTime
				var got, highest time.Time
				for k := range int(10 * time.Second / every) {
					off := amp
					switch {
					case random:
						off = time.Duration(rng.Int64N(int64(2*amp+1))) - amp
					case k%2 == 1:
						off = -amp
					}
					reading := t0.Add(time.Duration(k)*every + off)
					if reading.After(highest) {
						highest = reading
					}
					got = s.at(reading)
				}
				assert.Equal(t, highest, got, "jitter ±%v every %v, random %v: expect the highest reading, not more", amp, every, random)
			}
		}
	}
}

// TestSteadyTimeTakesNoStepFromReadingsOutOfLine: one or two readings far
// back (an hour, then half an hour; the zero time twice) move nothing
// when the clock's time comes back.
func TestSteadyTimeTakesNoStepFromReadingsOutOfLine(t *testing.T) {
	for name, outOfLine := range map[string][]time.Time{
		"an hour back":                       {t0.Add(-time.Hour)},
		"an hour, then half an hour back":    {t0.Add(-time.Hour), t0.Add(-30 * time.Minute)},
		"the zero time, twice, 100 ms apart": {{}, time.Time{}.Add(100 * time.Millisecond)},
	} {
		var s steadyTime
		s.at(t0)
		for _, r := range outOfLine {
			assert.Equal(t, t0, s.at(r), name)
		}
		assert.Equal(t, t0.Add(time.Millisecond), s.at(t0.Add(time.Millisecond)), "%s: expect the clock's time once it comes back", name)
	}
}

// TestSteadyTimeTakesAStepBackForGood: a clock stepped back an hour for
// good holds the time until three rising readings over 100 ms of its own
// time, then goes on from where it was by as much as it moves; a step back
// shorter than maxClockStall holds only until the clock passes where it
// was.
func TestSteadyTimeTakesAStepBackForGood(t *testing.T) {
	var s steadyTime
	s.at(t0)
	back := t0.Add(-time.Hour)
	assert.Equal(t, t0, s.at(back))
	assert.Equal(t, t0, s.at(back.Add(50*time.Millisecond)))
	assert.Equal(t, t0, s.at(back.Add(stepSpan)), "expect the step taken at the third reading, from where the time was")
	assert.Equal(t, t0.Add(10*time.Millisecond), s.at(back.Add(stepSpan+10*time.Millisecond)))

	var short steadyTime
	short.at(t0)
	for d := time.Duration(0); d < 500*time.Millisecond; d += 100 * time.Millisecond {
		assert.Equal(t, t0, short.at(t0.Add(-500*time.Millisecond+d)))
	}
	assert.Equal(t, t0.Add(time.Millisecond), short.at(t0.Add(time.Millisecond)))
}
