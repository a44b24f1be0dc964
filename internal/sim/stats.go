package sim

import (
	"math"
	"slices"
	"time"
)

// Summary is the mean of a metric over independent runs, with its standard
// error (the sample standard deviation divided by the square root of the
// number of runs; zero for a single run).
type Summary struct {
	Mean float64
	SE   float64
}

// summarize returns the mean and standard error of xs.
func summarize(xs []float64) Summary {
	n := float64(len(xs))
	if n == 0 {
		return Summary{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / n
	if len(xs) < 2 {
		return Summary{Mean: mean}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return Summary{Mean: mean, SE: math.Sqrt(ss/(n-1)) / math.Sqrt(n)}
}

// percentile returns the nearest-rank p-th quantile (0 < p <= 1) of ds, which
// it sorts in place; zero for an empty slice. For fewer than 100 values the
// 0.99 quantile is the maximum.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// ms converts a duration to float milliseconds, the unit of every reported
// time.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
