package sim

import (
	"math/rand/v2"

	"github.com/jitterretry/jitterretry/delayers"
)

// Streams of randomness of one run. Each is derived from (seed, scenario
// size, run index) alone, so a row's figures do not depend on which other
// strategies or sizes are simulated in the same sweep.
const (
	streamNetwork uint64 = iota + 1
	streamStrategy
	streamArrivals
)

// mix is SplitMix64's finaliser: a bijective scrambling of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// runSeed derives the seed of one stream of one run.
func runSeed(seed uint64, size, run int, stream uint64) uint64 {
	return mix(mix(mix(seed^mix(uint64(size)))^uint64(run)) ^ stream)
}

// runRand returns the generator of one stream of one run.
func runRand(seed uint64, size, run int, stream uint64) *rand.Rand {
	s := runSeed(seed, size, run, stream)
	return rand.New(rand.NewPCG(s, mix(s)))
}

// runSource returns the delayers.Source of one stream of one run.
func runSource(seed uint64, size, run int, stream uint64) delayers.Source {
	return delayers.NewSource(runSeed(seed, size, run, stream))
}
