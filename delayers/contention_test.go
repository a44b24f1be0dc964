package delayers

import (
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
