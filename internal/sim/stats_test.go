package sim

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSummarize(t *testing.T) {
	tests := map[string]struct {
		xs       []float64
		mean, se float64
	}{
		"empty":      {xs: nil},
		"one value":  {xs: []float64{4}, mean: 4},
		"two values": {xs: []float64{1, 3}, mean: 2, se: 1},
		"constant":   {xs: []float64{5, 5, 5, 5}, mean: 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := summarize(tc.xs)
			assert.InDelta(t, tc.mean, s.Mean, 1e-12)
			assert.InDelta(t, tc.se, s.SE, 1e-12)
		})
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	assert.Equal(t, time.Duration(50), percentile(ds, 0.50))
	assert.Equal(t, time.Duration(99), percentile(ds, 0.99))
	assert.Equal(t, time.Duration(7), percentile([]time.Duration{7, 3}, 0.99), "expect the maximum of a small sample")
	assert.Equal(t, time.Duration(0), percentile(nil, 0.5))
}

// recorder is a handler that logs the order it is called in.
type recorder struct{ got *[]int }

func (r recorder) handle(_ time.Duration, arg int) { *r.got = append(*r.got, arg) }

func TestSchedulerRunsInTimeThenScheduleOrder(t *testing.T) {
	var got []int
	var s scheduler
	h := recorder{&got}
	s.at(30, h, 3)
	s.at(10, h, 1)
	s.at(20, h, 2)
	s.at(10, h, 11) // same time as 1, scheduled later
	s.at(math.MaxInt64, h, 9)
	last := s.run()
	assert.Equal(t, []int{1, 11, 2, 3, 9}, got)
	assert.Equal(t, time.Duration(math.MaxInt64), last)
}
