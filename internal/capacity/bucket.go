package capacity

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// tableBuckets holds one table's read and write buckets.
type tableBuckets struct {
	read, write *rate.Limiter
	// own is true when the table has its own capacity, so a change of the
	// default capacity leaves it alone.
	own bool
}

func newTableBuckets(c Capacity, burstSeconds float64, own bool) *tableBuckets {
	return &tableBuckets{
		read:  rate.NewLimiter(limitOf(c.Read), burstOf(c.Read, burstSeconds)),
		write: rate.NewLimiter(limitOf(c.Write), burstOf(c.Write, burstSeconds)),
		own:   own,
	}
}

func (b *tableBuckets) bucket(k Kind) *rate.Limiter {
	if k == Read {
		return b.read
	}
	return b.write
}

// set changes both buckets' rate and size at now, keeping the tokens saved
// so far (clamped to the new size).
func (b *tableBuckets) set(now time.Time, c Capacity, burstSeconds float64) {
	for _, x := range []struct {
		lim *rate.Limiter
		v   float64
	}{{b.read, c.Read}, {b.write, c.Write}} {
		x.lim.SetLimitAt(now, limitOf(x.v))
		x.lim.SetBurstAt(now, burstOf(x.v, burstSeconds))
	}
}

func (b *tableBuckets) capacity() Capacity {
	return Capacity{Read: float64(b.read.Limit()), Write: float64(b.write.Limit())}
}

func limitOf(units float64) rate.Limit {
	if math.IsInf(units, 1) {
		return rate.Inf
	}
	return rate.Limit(units)
}

// burstOf returns the bucket size for a capacity: ceil(units*seconds), at
// least 1 for a positive capacity and 0 for a zero one, saturating at
// math.MaxInt32 (Unlimited ignores it).
func burstOf(units, seconds float64) int {
	if units <= 0 {
		return 0
	}
	b := math.Ceil(units * seconds)
	if math.IsInf(b, 1) || b > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(int(b), 1)
}
