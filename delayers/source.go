package delayers

import (
	"math/rand/v2"
	"sync/atomic"
)

// Source is a goroutine-safe source of random values, each uniformly
// distributed over all 64 bits; the delayers map them to durations with a
// multiply, so low-quality high bits bias the delays. Implementations must be
// safe for concurrent use by multiple goroutines, since one delayer serves
// every request of a client. A delayer draws one value per call, or up to
// 64 for Decorrelated.BackoffDelay.
type Source interface {
	Uint64() uint64
}

// NewSource returns a deterministic Source seeded with seed. It is lock-free
// (SplitMix64 over an atomic counter) and safe for concurrent use; a single
// goroutine drawing from it sees the same sequence for the same seed, which is
// what deterministic tests need. Concurrent callers each get distinct values
// but in an order that depends on scheduling. The stream is SplitMix64's for
// seed (seed 0 begins 0xe220a8397b1dcdaf) and repeats only after 2^64 draws.
//
// Every caller advances one shared counter, so under heavy parallel use the
// counter's cache line is contended; for production use leave
// Options.Source nil, which scales across cores.
func NewSource(seed uint64) Source {
	s := &splitMix{}
	s.state.Store(seed)
	return s
}

type splitMix struct {
	state atomic.Uint64
}

func (s *splitMix) Uint64() uint64 {
	z := s.state.Add(0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// runtimeSource draws from the Go runtime's per-thread generator, which needs
// no lock and no shared cache line, so it scales across cores.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return rand.Uint64() }
