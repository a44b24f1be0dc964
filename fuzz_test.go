package jitterretry_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// FuzzTokenBucket interleaves takes, refunds and adds from several goroutines
// and checks that the tokens stay within [0, capacity] and are conserved:
// what is left is the capacity less what was taken and not given back, as
// long as no add had to be cut at the capacity.
func FuzzTokenBucket(f *testing.F) {
	f.Add(uint16(500), []byte{14, 5, 1, 200, 3})
	f.Add(uint16(1), []byte{0, 1, 2, 255})
	f.Add(uint16(65535), []byte{})
	f.Fuzz(func(t *testing.T, capacity uint16, ops []byte) {
		b := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) { o.Capacity = uint(capacity) })
		want := b.Capacity()
		var mu sync.Mutex
		held := uint(0)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(ops); i += 4 {
					cost := uint(ops[i] % 32)
					release, err := b.GetToken(context.Background(), cost)
					if err != nil {
						assert.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
						continue
					}
					if ops[i]&0x80 != 0 {
						mu.Lock()
						held += cost
						mu.Unlock()
						continue
					}
					assert.NoError(t, release())
				}
			}()
		}
		wg.Wait()
		require.LessOrEqual(t, b.Remaining(), want)
		require.Equal(t, want-held, b.Remaining(), "expect tokens conserved")
		require.NoError(t, b.AddTokens(math.MaxUint))
		require.Equal(t, want, b.Remaining(), "expect adds to stop at the capacity")
	})
}

// FuzzOptions feeds arbitrary settings to New: it never panics, and either
// reports an *OptionsError or gives a retryer whose delays stay within
// [0, MaxBackoff] for any attempt.
func FuzzOptions(f *testing.F) {
	f.Add(3, int64(50e6), int64(1e9), int64(20e9), int64(0), 0.0, uint8(1), 1)
	f.Add(0, int64(-1), int64(0), int64(0), int64(-5), -1.0, uint8(9), math.MaxInt)
	f.Add(-1, int64(math.MaxInt64), int64(1), int64(1), int64(0), math.Inf(1), uint8(3), math.MinInt)
	f.Fuzz(func(t *testing.T, maxAttempts int, base, throttleBase, maxBackoff, margin int64, refill float64, jitter uint8, attempt int) {
		strategies := append(delayers.Strategies(), "bogus")
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.MaxAttempts = maxAttempts
			o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Duration(base), time.Duration(throttleBase), time.Duration(maxBackoff)
			o.DeadlineMargin = time.Duration(margin)
			o.Bucket.RefillPerSecond = refill
			o.Jitter = strategies[int(jitter)%len(strategies)]
		})
		if err := r.Err(); err != nil {
			var oe *jitterretry.OptionsError
			require.True(t, errors.As(err, &oe), "expect an *OptionsError, got %T", err)
			_, derr := r.RetryDelay(attempt, nil)
			require.ErrorIs(t, derr, err)
			return
		}
		capDelay := time.Duration(maxBackoff)
		if capDelay == 0 {
			capDelay = delayers.DefaultCap
		}
		d, err := r.RetryDelay(attempt, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.LessOrEqual(t, d, capDelay)
		require.GreaterOrEqual(t, r.MaxAttempts(), 0)
	})
}

// FuzzSendRateLimiter drives a limiter on a fake clock through a sequence of
// reservations, cancellations, sends and answers, and checks what its callers
// rely on: rates within [MinRate, MaxRate] once limited, no negative delay,
// first come first served, and no caller waiting longer than the places still
// ahead of it need at the current rate.
func FuzzSendRateLimiter(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, int64(0), []byte{0, 0, 0, 4, 0, 3, 1, 2, 0})
	f.Add(100.0, 50.0, 200.0, int64(time.Millisecond), []byte{0, 0, 4, 4, 12, 2, 3, 5, 255, 0, 1})
	f.Add(1e-9, 1e-9, 0.0, int64(time.Hour), []byte{0, 0, 0, 4, 1, 1})
	f.Fuzz(func(t *testing.T, initial, minRate, maxRate float64, window int64, ops []byte) {
		so := jitterretry.SendRateOptions{InitialRate: initial, MinRate: minRate, MaxRate: maxRate, Window: time.Duration(window)}
		if so.Window > time.Hour {
			so.Window = time.Hour
		}
		l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { *o = so })
		if so == (jitterretry.SendRateOptions{}) {
			l = &jitterretry.SendRateLimiter{} // the zero value is the same limiter
		}
		valid := jitterretry.New(func(o *jitterretry.Options) { o.SendRate = &so }).Err() == nil
		now := t0
		var waiting []jitterretry.SendReservation // in the order reserved
		var sent []time.Time
		for i, op := range ops {
			now = now.Add(time.Duration(op>>3) * time.Millisecond)
			switch op & 7 {
			case 0, 1:
				waiting = append(waiting, l.ReserveAt(now))
			case 2: // cancel one
				if len(waiting) > 0 {
					k := i % len(waiting)
					l.CancelAt(waiting[k], now)
					waiting = append(waiting[:k], waiting[k+1:]...)
				}
			case 3, 4: // ask every waiting caller; the due ones send
				rate := l.Rate()
				var prev time.Duration
				kept := waiting[:0]
				for k, res := range waiting {
					d, _ := l.DelayAt(res, now)
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
					l.ObserveAt(sent[0], now, op&1 == 1)
					sent = sent[1:]
				}
			}
			rate := l.Rate()
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
// places that come due, in any mix of reservations, give-backs and pauses,
// are at least one interval apart. The due time of each place waiting is
// asked again after every step, so a give-back that moves it earlier is seen.
func FuzzSendRatePacing(f *testing.F) {
	f.Add(100.0, []byte{0, 0, 0, 2, 9, 0, 1, 2, 2, 40, 0})
	f.Add(1.0, []byte{0, 1, 2, 3, 0, 0, 2, 255, 255, 0})
	f.Add(33333.0, []byte{0, 0, 0, 0, 0, 0, 2, 2, 8, 8, 16})
	f.Fuzz(func(t *testing.T, rate float64, ops []byte) {
		if !(rate >= 1 && rate <= 1e5) {
			return
		}
		l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) {
			o.InitialRate, o.MinRate, o.MaxRate = rate, rate, rate
		})
		interval := time.Duration(float64(time.Second) / rate)
		now := t0
		type waiter struct {
			res jitterretry.SendReservation
			due time.Time
		}
		var waiting []waiter
		var lastDue time.Time
		for i, op := range ops {
			switch op & 3 {
			case 0, 1:
				waiting = append(waiting, waiter{res: l.ReserveAt(now)})
			case 2:
				if len(waiting) > 0 {
					k := i % len(waiting)
					l.CancelAt(waiting[k].res, now)
					waiting = append(waiting[:k], waiting[k+1:]...)
				}
			case 3:
				now = now.Add(time.Duration(op>>2) * interval / 8)
			}
			kept := waiting[:0]
			for _, w := range waiting {
				d, _ := l.DelayAt(w.res, now)
				if d > 0 {
					w.due = now.Add(d)
					kept = append(kept, w)
					continue
				}
				if w.due.IsZero() || w.due.After(now) {
					w.due = now // due on arrival, or since this step
				}
				if !lastDue.IsZero() {
					require.GreaterOrEqual(t, w.due.Sub(lastDue), interval-time.Microsecond,
						"expect sends at least %v apart at %v/s", interval, rate)
				}
				lastDue = w.due
			}
			waiting = kept
		}
	})
}
