package jitterretry

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
// time and a second more, then goes on from where it was by as much as it
// moves; a step back
// shorter than maxClockStall holds only until the clock passes where it
// was.
func TestSteadyTimeTakesAStepBackForGood(t *testing.T) {
	var s steadyTime
	s.at(t0)
	back := t0.Add(-time.Hour)
	assert.Equal(t, t0, s.at(back))
	assert.Equal(t, t0, s.at(back.Add(50*time.Millisecond)))
	assert.Equal(t, t0, s.at(back.Add(stepSpan)), "expect the step taken at the third reading, less maxClockStall")
	assert.Equal(t, t0, s.at(back.Add(stepSpan+maxClockStall)))
	assert.Equal(t, t0.Add(10*time.Millisecond), s.at(back.Add(stepSpan+maxClockStall+10*time.Millisecond)), "expect the time to go on from where it was")

	var short steadyTime
	short.at(t0)
	for d := time.Duration(0); d < 500*time.Millisecond; d += 100 * time.Millisecond {
		assert.Equal(t, t0, short.at(t0.Add(-500*time.Millisecond+d)))
	}
	assert.Equal(t, t0.Add(time.Millisecond), short.at(t0.Add(time.Millisecond)))
}

// TestSteadyTimeStepUnderJitterNeverRunsAhead: a clock stepped back for
// good by 2 s or an hour, with random jitter of ±0.4 s on every reading
// (read every millisecond, for 3 s), gives a time that never goes back and
// is never ahead of the highest reading plus the step; taken whole, the
// step carried the jitter of two readings and ran the time up to 0.7 s
// ahead (helper-114). The time stands still for at most 2.5 s of true
// time: the step is taken less a second.
func TestSteadyTimeStepUnderJitterNeverRunsAhead(t *testing.T) {
	const jitter = 400 * time.Millisecond
	for _, step := range []time.Duration{2 * time.Second, time.Hour} {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var s steadyTime
			var prev, honest time.Time
			var stillSince, stall time.Duration
			for now := time.Duration(0); now <= 3*time.Second; now += time.Millisecond {
				back := time.Duration(0)
				if now >= 1500*time.Millisecond {
					back = step
				}
				reading := t0.Add(now - back + time.Duration(rng.Int64N(int64(2*jitter+1))) - jitter)
				if h := reading.Add(back); h.After(honest) {
					honest = h
				}
				got := s.at(reading)
				require.False(t, got.Before(prev), "step %v, seed %d: the time went back at %v", step, seed, now)
				require.False(t, got.After(honest), "step %v, seed %d: %v ahead at %v", step, seed, got.Sub(honest), now)
				if got.After(prev) {
					stillSince = now
				}
				stall = max(stall, now-stillSince)
				prev = got
			}
			assert.LessOrEqual(t, stall, 2500*time.Millisecond, "step %v, seed %d", step, seed)
		}
	}
	// A clock counting up from the zero time is further back than a
	// Duration holds: no step is taken (its skew saturated, and the time
	// ran 292 years ahead once the clock came back, helper-114).
	var s steadyTime
	s.at(t0)
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond} {
		assert.Equal(t, t0, s.at(time.Time{}.Add(d)))
	}
	assert.Equal(t, t0.Add(time.Millisecond), s.at(t0.Add(time.Millisecond)))
}
