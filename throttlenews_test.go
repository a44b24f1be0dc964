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
	var noise sync.WaitGroup
	for range 3 {
		noise.Add(1)
		go func() {
			defer noise.Done()
			for !stop.Load() {
				n.note()
			}
		}()
	}
	var readers sync.WaitGroup
	var missed atomic.Int64
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 20_000 {
				seen := n.look()
				n.note() // a throttle after the look, finished before the next
				if n.look() == seen {
					missed.Add(1)
				}
			}
		}()
	}
	readers.Wait()
	stop.Store(true)
	noise.Wait()
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
