package jitterretry

// This file owns the news of a partition's throttles that a Do loop in a
// named partition waits for: whether a retry decision in the partition met
// a throttle since the loop last looked.

import "sync/atomic"

// throttleNews tells readers whether a throttle was noted since they last
// looked, without a write for every throttle. Every retry decision after a
// throttle notes one, from every goroutine; a count would move its cache
// line between cores on each of them. Here a throttle writes only when a
// reader has asked to hear of one since the last throttle that wrote: with
// no Do loop looking, noting a throttle only reads.
//
// One word holds the edition (above the low bit) and the request (the low
// bit), so that the throttle that answers a request moves the edition in
// the same step: a reader never sees its request gone and the edition not
// yet moved. The zero value has no news and no request.
type throttleNews struct {
	word atomic.Uint64
}

const newsWanted = 1 // the request bit; the edition counts in steps of 2

// note records a throttle.
func (n *throttleNews) note() {
	// A failed swap means another throttle answered the request first.
	if w := n.word.Load(); w&newsWanted != 0 {
		n.word.CompareAndSwap(w, w+newsWanted)
	}
}

// look returns the current edition and asks to hear of the next throttle:
// once a throttle noted after look returns has finished noting, look
// returns another value. Throttles noted while look runs may or may not
// count.
func (n *throttleNews) look() uint64 {
	for {
		w := n.word.Load()
		if w&newsWanted != 0 || n.word.CompareAndSwap(w, w|newsWanted) {
			return w >> 1
		}
	}
}
