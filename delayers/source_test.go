package delayers

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewSourceIsSplitMix64 pins the stream to the published SplitMix64
// reference outputs for seed 0, so a change to the generator, which would
// break every caller's recorded deterministic delays, fails here first.
func TestNewSourceIsSplitMix64(t *testing.T) {
	s := NewSource(0)
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		got := s.Uint64()
		assert.Equal(t, want, got, "expect output %d to be %#x, got %#x", i, want, got)
	}
}

func TestNewSourceDeterminism(t *testing.T) {
	cases := map[string]uint64{"seed 0": 0, "seed 1": 1, "seed max": ^uint64(0), "seed 0x5eed": 0x5eed}
	for name, seed := range cases {
		t.Run(name, func(t *testing.T) {
			a, b, other := NewSource(seed), NewSource(seed), NewSource(seed+1)
			var differ int
			for i := range 1000 {
				x, y, z := a.Uint64(), b.Uint64(), other.Uint64()
				require.Equal(t, x, y, "expect draw %d equal for the same seed, got %#x and %#x", i, x, y)
				if x != z {
					differ++
				}
			}
			assert.Equal(t, 1000, differ, "expect the next seed to give a different stream, got %d of 1000 draws different", differ)
		})
	}
}

func TestDelayerDeterminism(t *testing.T) {
	for _, strategy := range Strategies() {
		t.Run(string(strategy), func(t *testing.T) {
			a := mustNew(t, strategy, withSeed(42))
			b := mustNew(t, strategy, withSeed(42))
			qa, qb := a.NewSequence(), b.NewSequence()
			for attempt := 1; attempt <= 200; attempt++ {
				err := error(nil)
				if attempt%3 == 0 {
					err = throttleErr()
				}
				x, _ := a.BackoffDelay(attempt, err)
				y, _ := b.BackoffDelay(attempt, err)
				require.Equal(t, x, y, "expect attempt %d equal for the same seed, got %v and %v", attempt, x, y)
				x, y = qa.Next(err), qb.Next(err)
				require.Equal(t, x, y, "expect Next %d equal for the same seed, got %v and %v", attempt, x, y)
			}
		})
	}
}

// TestNewSourceConcurrentDrawsLoseNothing draws from one Source on many
// goroutines and compares the multiset of values with a serial draw of the
// same count: a lost or repeated counter step would show as a value missing
// or doubled.
func TestNewSourceConcurrentDrawsLoseNothing(t *testing.T) {
	const goroutines, perG = 16, 5000
	shared := NewSource(99)
	got := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]uint64, perG)
			for i := range xs {
				xs[i] = shared.Uint64()
			}
			got[g] = xs
		}()
	}
	wg.Wait()
	all := slices.Concat(got...)
	slices.Sort(all)

	serial := NewSource(99)
	want := make([]uint64, goroutines*perG)
	for i := range want {
		want[i] = serial.Uint64()
	}
	slices.Sort(want)
	require.Equal(t, len(want), len(all), "expect %d values, got %d", len(want), len(all))
	assert.True(t, slices.Equal(want, all), "expect the concurrent multiset to equal the serial one")
	assert.Equal(t, len(all), len(slices.Compact(all)), "expect no repeated value")
}

// TestDelayerConcurrentUse shares one delayer of each strategy between many
// goroutines, each with its own attempt numbers, errors and Sequence.
func TestDelayerConcurrentUse(t *testing.T) {
	const goroutines, perG = 8, 2000
	sources := map[string]func(*Options){
		"runtime source": func(*Options) {},
		"NewSource":      withSeed(5),
	}
	for _, strategy := range Strategies() {
		for srcName, src := range sources {
			t.Run(string(strategy)+"/"+srcName, func(t *testing.T) {
				d := mustNew(t, strategy, src, func(o *Options) { o.Cap = 5 * time.Second })
				s := d
				type bad struct {
					attempt int
					got     time.Duration
				}
				errs := make(chan bad, goroutines)
				distinct := make([]map[time.Duration]bool, goroutines)
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						seen := map[time.Duration]bool{}
						q := d.NewSequence()
						for i := range perG {
							attempt := i%12 + 1
							var err error
							if g%2 == 1 {
								err = throttleErr()
							}
							lo := time.Duration(0)
							if strategy == StrategyDecorrelated {
								lo = s.Base()
								if err != nil {
									lo = s.ThrottleBase()
								}
							}
							v, _ := d.BackoffDelay(attempt, err)
							n := q.Next(err)
							seen[v] = true
							if v < lo || v > s.Cap() || n < lo || n > s.Cap() {
								errs <- bad{attempt, v}
								return
							}
						}
						distinct[g] = seen
					}()
				}
				wg.Wait()
				close(errs)
				for b := range errs {
					t.Errorf("expect a delay in bounds, got %v at attempt %d", b.got, b.attempt)
				}
				for g, seen := range distinct {
					if strategy == StrategyExponential {
						assert.LessOrEqual(t, len(seen), 12, "expect at most 12 windows, got %d", len(seen))
						continue
					}
					assert.Greater(t, len(seen), perG/4, "goroutine %d: expect varied delays, got %d distinct of %d", g, len(seen), perG)
				}
			})
		}
	}
}

// TestWindowedConcurrentMatchesSerial: a windowed delayer draws exactly one
// value per call, so with a fixed attempt the multiset of concurrent delays
// must equal a serial run's with the same seed.
func TestWindowedConcurrentMatchesSerial(t *testing.T) {
	const goroutines, perG, attempt = 8, 2000, 7
	for _, strategy := range []Strategy{StrategyFull, StrategyEqual} {
		t.Run(string(strategy), func(t *testing.T) {
			shared := mustNew(t, strategy, withSeed(123))
			got := make([][]time.Duration, goroutines)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					xs := make([]time.Duration, perG)
					for i := range xs {
						xs[i], _ = shared.BackoffDelay(attempt, nil)
					}
					got[g] = xs
				}()
			}
			wg.Wait()
			all := slices.Concat(got...)
			slices.Sort(all)

			serial := mustNew(t, strategy, withSeed(123))
			want := make([]time.Duration, goroutines*perG)
			for i := range want {
				want[i], _ = serial.BackoffDelay(attempt, nil)
			}
			slices.Sort(want)
			assert.True(t, slices.Equal(want, all), "expect the concurrent multiset of delays to equal the serial one")
		})
	}
}
