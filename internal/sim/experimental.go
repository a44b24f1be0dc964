package sim

import (
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jitterretry/jitterretry/delayers"
)

// Experimental strategies, tried "beyond the blog" (issue 4 §4) at N=100 and
// reported in BENCHMARKS.md. Their windows are stated in round trips of the
// experiment, 2*NetMean (20 ms by default): a read's request and reply, the
// time one client's read→write exchange keeps the row contended. full-rtt and
// full-1.5x run delayers.Full, the latter with Options.Growth, which was
// added to delayers when it won; the others are formulas of their own here.
const (
	StrategyFullRTT     = "full-rtt"
	StrategyFullGentle  = "full-1.5x"
	StrategyLogLog      = "loglog"
	StrategyPollyV2     = "pollyv2"
	gentleGrowth        = 1.5
	gentleFirstWindow   = 4 // round trips
	loglogFirstWindow   = 4 // round trips
	pollyV2PFactor      = 4.0
	pollyV2RPScaling    = 1 / 1.4
	pollyV2MaxExponent  = 62 // 2^t beyond this is past any cap
	minLogLogWindowSlot = 4  // below 4 slots lg lg is below 1: grow by 2
)

// ExperimentalStrategies returns the strategies tried beyond the blog's.
func ExperimentalStrategies() []Strategy {
	return []Strategy{
		{
			Name:         StrategyFullRTT,
			Description:  "full jitter, first window one round trip (2*NetMean), doubling: delayers.Full with blog base NetMean",
			Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				d, err := delayers.NewFull(delayerOptions(p.NetMean, p.Cap, src))
				if err != nil {
					return nil, err
				}
				b := attemptBackoff{d}
				return func() Backoff { return b }, nil
			},
		},
		{
			Name:         StrategyFullGentle,
			Description:  "full jitter, first window 4 round trips, x1.5 per retry: delayers.Full with Base 4*rtt, Growth 1.5",
			Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				d, err := newGentle(p, src)
				if err != nil {
					return nil, err
				}
				b := firstWindowBackoff{d}
				return func() Backoff { return b }, nil
			},
		},
		{
			Name:         StrategyLogLog,
			Description:  "loglog-iterated backoff (Bender et al. 2005): slot one round trip, first window 4 slots, W *= 1+1/lg lg(W/slot)",
			Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				slot := 2 * p.NetMean
				return func() Backoff {
					return &loglogBackoff{src: src, slot: slot, cap: p.Cap, window: loglogFirstWindow * slot}
				}, nil
			},
		},
		{
			Name:         StrategyPollyV2,
			Description:  "Polly's DecorrelatedJitterV2 (George Pogue's formula), median first delay base, per-client state",
			Reproducible: true,
			newRun: func(p Params, src delayers.Source) (func() Backoff, error) {
				return func() Backoff { return &pollyV2Backoff{src: src, median: p.Base, cap: p.Cap} }, nil
			},
		},
	}
}

// uniform01 maps a random value to [0, 1) with 53 bits of precision.
func uniform01(x uint64) float64 { return float64(x>>11) / (1 << 53) }

// scaled returns u*d for u in [0, 1), saturating at limit.
func scaled(u float64, d, limit time.Duration) time.Duration {
	v := u * float64(d)
	if v >= float64(limit) {
		return limit
	}
	return time.Duration(v)
}

// newGentle returns the delayer of full-1.5x: full jitter whose first window
// is gentleFirstWindow round trips, growing by gentleGrowth per retry, so its
// n-th retry sleeps uniform[0, min(cap, 4*rtt*1.5^(n-1))). A Cap below four
// round trips caps the first window too, as the formula says, rather than
// being rejected as a Base above Cap.
func newGentle(p Params, src delayers.Source) (*delayers.Full, error) {
	return delayers.NewFull(func(o *delayers.Options) {
		o.Base, o.Cap, o.Growth, o.Source = min(gentleFirstWindow*2*p.NetMean, p.Cap), p.Cap, gentleGrowth, src
	})
}

// firstWindowBackoff calls a stateless BackoffDelayer whose Base is the
// first retry's window, with the blog's retry number n as the attempt: the
// delayers' window base*growth^(attempt-1) is then the strategy's
// first*growth^(n-1). This differs on purpose from attemptBackoff, whose
// DelayerAttempt(n) = n+1 serves the blog's convention, in which the first
// window is already 2*base; a strategy defined by its first window needs no
// such shift (with it, Base would have to be first/1.5, not a whole number
// of nanoseconds).
type firstWindowBackoff struct{ d retry.BackoffDelayer }

func (b firstWindowBackoff) Delay(n int) (time.Duration, error) {
	return b.d.BackoffDelay(n, errConflict)
}

// loglogBackoff is loglog-iterated backoff: the window W, in slots, grows by
// the factor 1+1/lg lg W after each failure (2 while W < 4 slots), and each
// retry waits uniform[0, W).
type loglogBackoff struct {
	src       delayers.Source
	slot, cap time.Duration
	window    time.Duration
	retries   int
}

func (b *loglogBackoff) Delay(int) (time.Duration, error) {
	if b.retries > 0 {
		b.window = min(b.cap, time.Duration(float64(b.window)*loglogGrowth(float64(b.window)/float64(b.slot))))
	}
	b.retries++
	return scaled(uniform01(b.src.Uint64()), b.window, b.cap), nil
}

// loglogGrowth is the factor 1+1/lg lg w for a window of w slots, and 2 for
// windows below 4 slots, where lg lg w < 1.
func loglogGrowth(w float64) float64 {
	if w <= minLogLogWindowSlot {
		return 2
	}
	return 1 + 1/math.Log2(math.Log2(w))
}

// pollyV2Backoff is the decorrelated jitter "V2" of Polly: with t = i + U
// for the 0-based retry index i and U uniform in [0, 1), the cumulative
// curve f(t) = 2^t * tanh(sqrt(p*t)), and delay_i = (f(t_i) - f(t_{i-1})) *
// median / 1.4, capped. Its state, the previous f, is per client.
type pollyV2Backoff struct {
	src         delayers.Source
	median, cap time.Duration
	prev        float64
	retries     int
}

func (b *pollyV2Backoff) Delay(int) (time.Duration, error) {
	t := float64(b.retries) + uniform01(b.src.Uint64())
	b.retries++
	if t > pollyV2MaxExponent {
		return b.cap, nil
	}
	next := pollyV2Curve(t)
	d := (next - b.prev) * pollyV2RPScaling
	b.prev = next
	return scaled(d, b.median, b.cap), nil
}

// pollyV2Curve is 2^t * tanh(sqrt(p*t)), Polly's cumulative delay curve.
func pollyV2Curve(t float64) float64 {
	return math.Pow(2, t) * math.Tanh(math.Sqrt(pollyV2PFactor*t))
}
