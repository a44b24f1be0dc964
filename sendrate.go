package jitterretry

import (
	"math"
	"sync"
	"time"
)

// SendRateOptions configures a SendRateLimiter. The zero value of every
// field means its default.
type SendRateOptions struct {
	// InitialRate is the send rate, in requests per second, before the first
	// throttle. Zero means unlimited: the limiter does nothing until the
	// service first throttles.
	InitialRate float64

	// MinRate is the floor the rate never drops below, in requests per
	// second. Default 1.
	MinRate float64

	// MaxRate is the ceiling the rate never grows above, in requests per
	// second. Zero means none.
	MaxRate float64

	// Window is how often the limiter measures the service's accepted rate
	// and, when nothing was throttled, raises its own. Default 100 ms.
	Window time.Duration

	// CutTo is the fraction of the measured accepted rate the limiter drops
	// to on a throttle, leaving the service's burst room to refill. Default
	// 0.95; values outside (0, 1] are invalid.
	CutTo float64
}

// Default send-rate numbers.
const (
	defaultSendWindow = 100 * time.Millisecond
	defaultCutTo      = 0.95
	// The first increase after a cut is 5%, and each throttle-free window
	// doubles it up to +100%: gentle near the capacity it just found, and
	// back to five times the rate in six windows when the capacity returns.
	firstGrowth = 0.05
	maxGrowth   = 1.0
	// A cut keeps at least a quarter of the rate: a fivefold drop of
	// capacity still takes two cuts.
	minCutTo = 0.25
)

// SendRateLimiter is an adaptive client-side send-rate limiter: it paces
// attempts evenly at a rate it learns from the service's throttles.
//
// On a throttle it drops the rate to CutTo times the rate the service
// actually accepted over the last window or two: the service's capacity,
// measured rather than guessed (but never below a quarter of the rate it
// had, in case the answers lag). Only a throttle of a request sent after
// the last cut counts as a new signal, so a burst of throttles from one
// round trip, however many goroutines share the client, is one cut, not one
// cut each. Every window without a throttle raises the rate by a step that
// starts at 5% and doubles each window, up to +100%, so it probes gently
// near the capacity it found and recovers a fivefold capacity increase in
// about six windows.
//
// Each caller reserves a slot and waits for it, so with K callers waiting a
// change of rate takes up to K/rate seconds to reach all of them; a rise
// lets new callers in between the slots already handed out.
//
// The methods ending in At take the current time, so tests can drive it with
// a fake clock. It is safe for concurrent use by multiple goroutines.
type SendRateLimiter struct {
	minRate, maxRate float64
	window           time.Duration
	cutTo            float64

	mu        sync.Mutex
	rate      float64 // requests per second; +Inf while unlimited
	next      time.Time
	lastCut   time.Time
	growth    float64
	winStart  time.Time
	winOK     int // successes in the current window
	winThr    int // throttles in the current window
	winSent   int // slots handed out in the current window
	prevOK    int // successes in the previous window
	prevThr   int // throttles in the previous window
	prevSent  int // slots handed out in the previous window
	prevSpan  time.Duration
	cuts      int
	throttled bool // a throttle was seen since the limiter started
}

// NewSendRateLimiter returns a limiter configured by optFns. Invalid values
// are replaced by their defaults; Options validation reports them for a
// Retryer.
func NewSendRateLimiter(optFns ...func(*SendRateOptions)) *SendRateLimiter {
	var o SendRateOptions
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	o = o.withDefaults()
	l := &SendRateLimiter{minRate: o.MinRate, maxRate: o.MaxRate, window: o.Window, cutTo: o.CutTo, rate: math.Inf(1), growth: firstGrowth}
	if o.InitialRate > 0 {
		l.rate = l.clamp(o.InitialRate)
	}
	return l
}

func (o SendRateOptions) validate() error {
	switch {
	case o.InitialRate < 0 || math.IsNaN(o.InitialRate):
		return &OptionsError{Option: "SendRate.InitialRate", Reason: "must be zero (unlimited) or positive"}
	case o.MinRate < 0 || math.IsNaN(o.MinRate) || math.IsInf(o.MinRate, 1):
		return &OptionsError{Option: "SendRate.MinRate", Reason: "must be zero (default 1) or a positive finite rate"}
	case o.MaxRate < 0 || math.IsNaN(o.MaxRate):
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must be zero (none) or positive"}
	case o.MaxRate > 0 && o.MaxRate < o.MinRate:
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must not be below MinRate"}
	case o.Window < 0:
		return &OptionsError{Option: "SendRate.Window", Reason: "must not be negative"}
	case o.CutTo < 0 || o.CutTo > 1 || math.IsNaN(o.CutTo):
		return &OptionsError{Option: "SendRate.CutTo", Reason: "must be in (0, 1], or zero for 0.95"}
	}
	return nil
}

func (o SendRateOptions) withDefaults() SendRateOptions {
	if !(o.MinRate > 0) || math.IsInf(o.MinRate, 1) {
		o.MinRate = 1
	}
	if !(o.MaxRate > 0) || o.MaxRate < o.MinRate {
		o.MaxRate = math.Inf(1)
	}
	if o.Window <= 0 {
		o.Window = defaultSendWindow
	}
	if !(o.CutTo > 0 && o.CutTo <= 1) {
		o.CutTo = defaultCutTo
	}
	return o
}

// Rate returns the current send rate in requests per second; +Inf while
// unlimited.
func (l *SendRateLimiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// Cuts returns how many times the limiter has lowered its rate.
func (l *SendRateLimiter) Cuts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts
}

// ReserveAt reserves the next send slot at time now and returns how long the
// caller must wait before sending: zero while unlimited or idle. A caller that
// then gives up without sending leaves its slot unused.
func (l *SendRateLimiter) ReserveAt(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(now)
	l.winSent++
	if math.IsInf(l.rate, 1) {
		return 0
	}
	if l.next.Before(now) {
		l.next = now
	}
	wait := l.next.Sub(now)
	l.next = l.next.Add(slotInterval(l.rate))
	return wait
}

// ObserveAt records the outcome, seen at time now, of a request sent at
// sentAt: throttled, or a success. Other failures carry no rate signal and
// need not be reported.
func (l *SendRateLimiter) ObserveAt(sentAt, now time.Time, throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollLocked(now)
	if !throttled {
		l.winOK++
		return
	}
	l.winThr++
	l.throttled = true
	if !sentAt.After(l.lastCut) {
		return // part of a burst already answered by a cut
	}
	target := l.cutTo * l.acceptedRateLocked(now)
	switch {
	case math.IsInf(l.rate, 1):
		l.rate = l.clamp(target)
	case target < l.rate:
		// An estimate from lagging answers can be far too low, and every
		// goroutine that reserves a slot meanwhile waits at that rate.
		l.rate = l.clamp(max(target, minCutTo*l.rate))
	}
	l.lastCut = now
	l.growth = firstGrowth
	l.cuts++
}

// raiseLocked raises a finite rate to r at now and moves the next slot
// closer, as if the slots handed out but not yet due had been spaced at the
// new rate. The callers already waiting keep their slots, so new callers
// are sent in between them until they are gone. Without it a rise would
// reach a client only after every goroutine already waiting had been sent
// at the old rate: K/rate seconds with K goroutines, ten seconds for 1000
// goroutines at 100/s. A cut leaves the next slot where it is: moving it
// back to now would hand the waiting callers' slots out twice.
func (l *SendRateLimiter) raiseLocked(now time.Time, r float64) {
	old := l.rate
	l.rate = l.clamp(r)
	if ahead := l.next.Sub(now); ahead > 0 && l.rate > old {
		l.next = now.Add(time.Duration(float64(ahead) * old / l.rate))
	}
}

// acceptedRateLocked estimates the rate the service accepted, in requests per
// second, over the current and previous windows, and at least one window: a
// shorter span holds only the service's burst.
//
// The successes seen are a lower bound: answers lag. Throttles are cheap to
// answer and come back before the successes of the same burst, and the
// first answers to many goroutines that start at once may take longer than
// a window. The slots handed out and not throttled are an upper bound: they
// include the requests in flight. The estimate is the larger of the two. An
// estimate too high costs a few throttles, and the next cut, a round trip
// later, corrects it; one too low is paid for much longer, since every
// waiting goroutine already holds a slot at the low rate: K/rate seconds
// with K goroutines.
func (l *SendRateLimiter) acceptedRateLocked(now time.Time) float64 {
	span := max(now.Sub(l.winStart)+l.prevSpan, l.window).Seconds()
	ok := l.winOK + l.prevOK
	unthrottled := l.winSent + l.prevSent - l.winThr - l.prevThr
	return float64(max(ok, unthrottled, 0)) / span
}

// rollLocked closes every window that ended by now; a window without a
// throttle, after the first throttle, raises the rate.
func (l *SendRateLimiter) rollLocked(now time.Time) {
	if l.winStart.IsZero() {
		l.winStart = now
		return
	}
	elapsed := now.Sub(l.winStart)
	if elapsed < l.window {
		return
	}
	// Grow only a rate that was in use: an idle client must not talk itself
	// into a rate it never tested.
	used := float64(l.winOK) >= 0.5*l.rate*elapsed.Seconds()
	if l.winThr == 0 && l.throttled && used && !math.IsInf(l.rate, 1) {
		l.raiseLocked(now, l.rate*(1+l.growth))
		l.growth = math.Min(l.growth*2, maxGrowth)
	}
	switch {
	case math.IsInf(l.rate, 1):
		// Unlimited, before the first cut: keep the whole history, so that
		// the first cut counts every slot handed out, however late the
		// first answers come (many goroutines starting at once on few
		// cores can take more than two windows).
		l.prevOK, l.prevThr, l.prevSent = l.prevOK+l.winOK, l.prevThr+l.winThr, l.prevSent+l.winSent
		l.prevSpan += elapsed
	case elapsed >= 2*l.window:
		// Idle for more than a window: what came before says nothing now.
		l.prevOK, l.prevThr, l.prevSent, l.prevSpan = 0, 0, 0, 0
	default:
		l.prevOK, l.prevThr, l.prevSent, l.prevSpan = l.winOK, l.winThr, l.winSent, elapsed
	}
	l.winOK, l.winThr, l.winSent = 0, 0, 0
	l.winStart = now
}

func (l *SendRateLimiter) clamp(r float64) float64 {
	return math.Min(math.Max(r, l.minRate), l.maxRate)
}

// maxSlotInterval bounds the spacing of sends, so that a tiny rate cannot
// overflow a time.Duration (which would turn pacing off).
const maxSlotInterval = time.Hour

// slotInterval returns the time between sends at rate requests per second.
func slotInterval(rate float64) time.Duration {
	iv := float64(time.Second) / rate
	if !(iv < float64(maxSlotInterval)) {
		return maxSlotInterval
	}
	return time.Duration(iv)
}
