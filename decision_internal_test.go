package jitterretry

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestARefusalHoldsLessTheLessTimeIsLeft: the hold before a deadline's
// refusal never grows as the time left shrinks, never reaches into the
// last refusalReserve, keeps the time the margin asks for when there is
// room for it, and, with a margin as long as the deadline, still holds the
// caller for half its time (refused at once there, closed loops spun).
func TestARefusalHoldsLessTheLessTimeIsLeft(t *testing.T) {
	margins := []time.Duration{0, time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond, time.Hour, math.MaxInt64}
	for _, margin := range margins {
		prev := time.Duration(0)
		for remaining := time.Duration(-time.Millisecond); remaining <= 2*time.Second; remaining += 250 * time.Microsecond {
			hold := refusalHold(margin, remaining)
			assert.GreaterOrEqual(t, hold, prev, "margin %v, %v left: a caller with more time left held less", margin, remaining)
			assert.GreaterOrEqual(t, hold, time.Duration(0), "margin %v, %v left", margin, remaining)
			if remaining > refusalReserve {
				assert.LessOrEqual(t, hold, remaining-refusalReserve, "margin %v, %v left: held into the reserve", margin, remaining)
				assert.GreaterOrEqual(t, hold, (remaining-refusalReserve)/2, "margin %v, %v left: held less than half", margin, remaining)
			} else {
				assert.Zero(t, hold, "margin %v, %v left: no time to hold", margin, remaining)
			}
			if remaining > margin && remaining-margin > refusalReserve {
				assert.GreaterOrEqual(t, hold, remaining-margin-refusalReserve, "margin %v, %v left: the margin's room not held", margin, remaining)
			}
			prev = hold
		}
	}
	assert.Equal(t, 22500*time.Microsecond, refusalHold(200*time.Millisecond, 50*time.Millisecond), "expect half of 45 ms")
	assert.Equal(t, 75*time.Millisecond, refusalHold(20*time.Millisecond, 100*time.Millisecond), "expect the deadline less the margin and the reserve")
	held, shortened := heldBefore(time.Second, 200*time.Millisecond, 50*time.Millisecond)
	assert.Equal(t, 22500*time.Microsecond, held)
	assert.True(t, shortened)
	held, shortened = heldBefore(10*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond)
	assert.Equal(t, 10*time.Millisecond, held)
	assert.False(t, shortened)
}
