package jitterretry

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzSendRateLimiter drives a limiter on a fake clock through a sequence of
// reservations, cancellations, sends and answers, and checks what its callers
// rely on: rates within [MinRate, MaxRate] once limited, no negative delay,
// first come first served, and no caller waiting longer than the places still
// ahead of it need at the current rate.
func FuzzSendRateLimiter(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, []byte{0, 0, 0, 4, 0, 3, 1, 2, 0})
	f.Add(100.0, 50.0, 200.0, []byte{0, 0, 4, 4, 12, 2, 3, 5, 255, 0, 1})
	f.Add(1e-9, 1e-9, 0.0, []byte{0, 0, 0, 4, 1, 1})
	f.Fuzz(func(t *testing.T, initial, minRate, maxRate float64, ops []byte) {
		so := SendRateOptions{InitialRate: initial, MinRate: minRate, MaxRate: maxRate}
		l := newSendRate(so, nil)
		if so == (SendRateOptions{}) {
			l = &sendRate{} // the zero value is the same limiter
		}
		valid := so.validate() == nil
		now := t0
		var waiting []sendPlace // in the order reserved
		var sent []time.Time
		for i, op := range ops {
			now = now.Add(time.Duration(op>>3) * time.Millisecond)
			switch op & 7 {
			case 0, 1:
				waiting = append(waiting, placeAt(l, now))
			case 2: // cancel one
				if len(waiting) > 0 {
					k := i % len(waiting)
					cancelAt(l, waiting[k], now)
					waiting = append(waiting[:k], waiting[k+1:]...)
				}
			case 3, 4: // ask every waiting caller; the due ones send
				rate := l.currentRate()
				var prev time.Duration
				kept := waiting[:0]
				for k, res := range waiting {
					d, _ := delayAt(l, res, now)
					require.GreaterOrEqual(t, d, time.Duration(0))
					require.GreaterOrEqual(t, d, prev, "expect first come, first served")
					prev = d
					if bound := float64(k+1) / rate * float64(time.Second); bound < math.MaxInt64/2 {
						require.LessOrEqual(t, float64(d), bound+float64(time.Microsecond),
							"expect no wait beyond the %d places ahead at %v/s", k, rate)
					}
					if d == 0 {
						sent = append(sent, now)
					} else {
						kept = append(kept, res)
					}
				}
				waiting = kept
			default: // an answer to a request sent earlier
				if len(sent) > 0 {
					observeAt(l, now, op&1 == 1, time.Duration(op>>1)*time.Millisecond)
					sent = sent[1:]
				}
			}
			rate := l.currentRate()
			require.False(t, math.IsNaN(rate) || rate <= 0, "rate %v", rate)
			if valid && !math.IsInf(rate, 1) {
				lo := so.MinRate
				if lo == 0 {
					lo = 1
				}
				require.GreaterOrEqual(t, rate, lo)
				if so.MaxRate > 0 {
					require.LessOrEqual(t, rate, so.MaxRate)
				}
			}
		}
	})
}

// FuzzSendRatePacing holds the rate fixed and checks the pacing itself: the
// places that come due, in any mix of first attempts' and retries'
// reservations, give-backs and pauses, are at least one interval apart, and
// no first attempt is due before a retry waiting. The due time of each place
// waiting is asked again after every step, so a give-back that moves it
// earlier is seen.
func FuzzSendRatePacing(f *testing.F) {
	f.Add(100.0, []byte{0, 0, 0, 2, 9, 0, 1, 2, 2, 40, 0})
	f.Add(1.0, []byte{0, 1, 2, 3, 0, 0, 2, 255, 255, 0})
	f.Add(33333.0, []byte{0, 0, 0, 0, 0, 0, 2, 2, 8, 8, 16})
	f.Fuzz(func(t *testing.T, rate float64, ops []byte) {
		if !(rate >= 1 && rate <= 1e5) {
			return
		}
		// Every step asks each caller waiting again: thousands of steps
		// took the fuzzer's limit for a hang, and add nothing.
		ops = ops[:min(len(ops), 1000)]
		l := newSendRate(SendRateOptions{InitialRate: rate, MinRate: rate, MaxRate: rate}, nil)
		interval := time.Duration(float64(time.Second) / rate)
		now := t0
		type waiter struct {
			res sendPlace
			due time.Time
		}
		var waiting []waiter
		var lastDue time.Time
		for i, op := range ops {
			switch op & 3 {
			case 0:
				waiting = append(waiting, waiter{res: placeAt(l, now)})
			case 1:
				waiting = append(waiting, waiter{res: retryPlaceAt(l, now)})
			case 2:
				if len(waiting) > 0 {
					k := i % len(waiting)
					cancelAt(l, waiting[k].res, now)
					waiting = append(waiting[:k], waiting[k+1:]...)
				}
			case 3:
				now = now.Add(time.Duration(op>>2) * interval / 8)
			}
			waits := make([]time.Duration, len(waiting))
			var retryWait time.Duration // the longest wait of a retry
			for i, w := range waiting {
				waits[i], _ = delayAt(l, w.res, now)
				if w.res.retry {
					retryWait = max(retryWait, waits[i])
				}
			}
			kept, dues := waiting[:0], []time.Time(nil)
			for i, w := range waiting {
				d := waits[i]
				if !w.res.retry {
					require.GreaterOrEqual(t, d, retryWait, "expect first attempts served after the retries waiting")
				}
				if d > 0 {
					w.due = now.Add(d)
					kept = append(kept, w)
					continue
				}
				if w.due.IsZero() || w.due.After(now) {
					w.due = now // due on arrival, or since this step
				}
				dues = append(dues, w.due)
			}
			slices.SortFunc(dues, time.Time.Compare)
			for _, due := range dues {
				if !lastDue.IsZero() {
					require.GreaterOrEqual(t, due.Sub(lastDue), interval-time.Microsecond,
						"expect sends at least %v apart at %v/s", interval, rate)
				}
				lastDue = due
			}
			waiting = kept
		}
	})
}
