package jitterretry

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestThrottleNewsWithoutThrottles: looks with no throttle between them see
// no news, however many readers look.
func TestThrottleNewsWithoutThrottles(t *testing.T) {
	var n throttleNews
	first := n.look()
	for range 10 {
		assert.Equal(t, first, n.look())
	}
}

// TestThrottleNewsReachesEveryReader: readers that look while other
// goroutines keep noting throttles each see a throttle noted after their
// look, even when another reader's look, or a throttle of the stream,
// consumed the request in between.
func TestThrottleNewsReachesEveryReader(t *testing.T) {
	var n throttleNews
	var stop atomic.Bool
	noiseDone := spawn(3, func() {
		for !stop.Load() {
			n.note()
		}
	})
	var missed atomic.Int64
	spawn(4, func() {
		for range 20_000 {
			seen := n.look()
			n.note() // a throttle after the look, finished before the next
			if n.look() == seen {
				missed.Add(1)
			}
		}
	})()
	stop.Store(true)
	noiseDone()
	assert.Zero(t, missed.Load(), "looks that missed a throttle noted after the previous look")
}

// TestThrottleNewsNoteOnlyReadsWithoutReaders: with no reader, noting a
// throttle writes nothing, which is what keeps it off other cores' caches.
func TestThrottleNewsNoteOnlyReadsWithoutReaders(t *testing.T) {
	var n throttleNews
	for range 100 {
		n.note()
	}
	assert.Zero(t, n.word.Load())
	seen := n.look()
	n.note()
	n.note()
	assert.Equal(t, seen+1, n.look(), "one request, one move")
}

// spawn runs fn on n goroutines, and returns a wait for them all.
func spawn(n int, fn func()) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	return wg.Wait
}
