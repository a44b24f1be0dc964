package jitterretry

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// SendRateOptions configures the adaptive send-rate limiter (see
// Options.SendRate). The zero value of every field means its default.
type SendRateOptions struct {
	// InitialRate is the send rate, in requests per second, the limiter
	// starts at, clamped to [MinRate, MaxRate]; it probes upwards from there
	// like from any rate. Zero (or +Inf) means unlimited: the limiter does
	// nothing until the service first throttles.
	InitialRate float64

	// MinRate is the floor the rate never drops below, in requests per
	// second. Zero means 1.
	MinRate float64

	// MaxRate is the ceiling the rate never grows above, in requests per
	// second. Zero means none; a ceiling below MinRate is invalid.
	MaxRate float64
}

// Default send-rate numbers.
const (
	sendWindow     = 100 * time.Millisecond
	defaultMinRate = 1.0
	cutTo          = 0.95
	// The first increase after a cut is 5%, and each throttle-free window
	// doubles it up to +100%: gentle near the capacity it just found, and
	// back to five times the rate in six windows when the capacity returns.
	firstGrowth = 0.05
	maxGrowth   = 1.0
	// A cut keeps at least a quarter of the rate: a fivefold drop of
	// capacity still takes two cuts.
	minCutTo = 0.25
	// A cut within a window of the last one keeps at most 80% of the rate:
	// a fivefold fall of capacity is found in a few round trips, and an
	// overshoot costs a few windows of probing.
	consecutiveCutTo = 0.8
)

// sendRate is an adaptive client-side send-rate limiter: it paces
// attempts evenly at a rate it learns from the service's throttles.
//
// On a throttle it drops the rate to CutTo times the rate the service
// actually accepted over the last window or two: the service's capacity,
// measured rather than guessed (but never below a quarter of the rate it
// had, in case the answers lag). Only a throttle of a request sent after
// the last cut counts as a new signal, so a burst of throttles from one
// round trip, however many goroutines share the client, is one cut, not one
// cut each; a second cut within a window of the last keeps at most 80% of
// the rate, since the measure lags a fall of capacity. Once the rate is
// finite (after a first cut, or from InitialRate), every window without a
// throttle in which at least half the rate was used (in successes reported
// to observe) raises it by a step that starts at 5% and doubles each
// window, up to +100%, so it probes gently near the capacity it found and
// recovers a fivefold capacity increase in about six windows.
//
// Callers queue first come, first served: each takes a place (reserve),
// and a place is due once the queue ahead of it has been sent at the current
// rate. A change of rate applies at once to every caller already waiting,
// so with many callers queued a cut cannot be followed by the sends already
// promised at the old rate, nor a rise by new callers sent alongside them.
//
// A caller waiting for its turn sleeps at most one window before asking
// again, and is woken at once by a change of rate and by the first place
// given back ahead of it in a window: a burst of callers giving up wakes the
// others once, not once each.
//
// The methods ending in At take the current time, so tests can drive it with
// a fake clock. It is safe for concurrent use by multiple goroutines. The
// zero value is an unlimited limiter with the default options.
type sendRate struct {
	minRate, maxRate float64
	initialRate      float64 // the rate a new limiter starts at; +Inf when unlimited

	mu       sync.Mutex
	rate     float64 // requests per second; +Inf while unlimited
	issued   uint64  // places handed out; the next one is number issued
	served   float64 // places due by servedAt: place n is due once served >= n
	servedAt time.Time
	holes    []uint64      // places given back, after served and before issued, ascending
	changed  chan struct{} // closed, and replaced, to wake the waiting callers
	watched  bool          // changed was handed to a waiting caller
	wokenAt  time.Time     // when a give-back last woke the waiting callers

	lastCut  time.Time
	growth   float64
	winStart time.Time
	winOK    int     // successes in the current window
	winThr   int     // throttles in the current window
	winSent  float64 // places that came due in the current window
	prevOK   int     // successes in the previous window
	prevThr  int     // throttles in the previous window
	prevSent float64 // places that came due in the previous window
	prevSpan time.Duration
	cuts     int
}

// sendPlace is a caller's place in a sendRate's queue, valid
// only with the limiter that handed it out (reserve). Its zero value is
// the first place ever handed out. A place given back keeps reporting a
// delay from delay; it is not sent.
type sendPlace struct {
	place uint64
}

// newSendRate returns a limiter configured by o, which validate has
// accepted.
func newSendRate(o SendRateOptions) *sendRate {
	l := &sendRate{}
	l.init(o)
	return l
}

// init configures l from o, with defaults for zero values.
func (l *sendRate) init(o SendRateOptions) {
	o = o.withDefaults()
	l.minRate, l.maxRate = o.MinRate, o.MaxRate
	l.rate, l.growth, l.changed = math.Inf(1), firstGrowth, make(chan struct{})
	if o.InitialRate > 0 {
		l.rate = l.clamp(o.InitialRate)
	}
	l.initialRate = l.rate
}

// forgettable reports whether a new limiter would behave the same: the rate
// is where it started and no caller waits.
func (l *sendRate) forgettable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	return l.rate == l.initialRate && l.served >= float64(l.issued)
}

// initLocked makes the zero value an unlimited limiter with the defaults.
func (l *sendRate) initLocked() {
	if l.changed == nil {
		l.init(SendRateOptions{})
	}
}

func (o SendRateOptions) validate() error {
	switch {
	case o.InitialRate < 0 || math.IsNaN(o.InitialRate):
		return &OptionsError{Option: "SendRate.InitialRate", Reason: "must be zero (unlimited) or positive"}
	case o.MinRate < 0 || math.IsNaN(o.MinRate) || math.IsInf(o.MinRate, 1):
		return &OptionsError{Option: "SendRate.MinRate", Reason: "must be zero (default 1) or a positive finite rate"}
	case o.MaxRate < 0 || math.IsNaN(o.MaxRate):
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must be zero (none) or positive"}
	case o.MaxRate > 0 && o.MaxRate < o.withDefaults().MinRate:
		return &OptionsError{Option: "SendRate.MaxRate", Reason: "must not be below MinRate (default 1)"}
	}
	return nil
}

func (o SendRateOptions) withDefaults() SendRateOptions {
	if !(o.MinRate > 0) || math.IsInf(o.MinRate, 1) {
		o.MinRate = defaultMinRate
	}
	if !(o.MaxRate > 0) || o.MaxRate < o.MinRate {
		o.MaxRate = math.Inf(1)
	}
	return o
}

// Rate returns the current send rate in requests per second; +Inf while
// unlimited. A rise due at the end of a window shows after the next call of
// a method ending in At.
func (l *sendRate) currentRate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.initLocked()
	return l.rate
}

// Cuts returns how many throttle episodes the limiter has answered with a
// cut. A cut can leave the rate as it is: at MinRate, or (more than a window
// after the last cut) already below CutTo times the measured accepted rate.
func (l *sendRate) cutCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts
}

// reserve takes the next place in the queue at time now. The caller then
// asks delay how long to wait, and gives the place back with cancel if it
// does not send. A place is due at once while the limiter is unlimited or
// idle: no unused rate is carried over from an idle spell.
func (l *sendRate) reserve(now time.Time) sendPlace {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	res := sendPlace{place: l.issued}
	l.issued++
	if math.IsInf(l.rate, 1) {
		l.served = float64(l.issued)
		l.winSent++
	}
	return res
}

// delay returns how long, from now and at the current rate, res waits
// before it may be sent: zero once it is due. The channel is closed when the
// delay may have changed (a change of rate, the first place given back in a
// window), after which the delay must be asked for again: a waiter sleeps
// until the delay or a window has passed or the channel is closed, whichever
// is first, and asks again. A delay too long for a time.Duration is reported
// as the longest one.
func (l *sendRate) delay(res sendPlace, now time.Time) (time.Duration, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	ahead := float64(res.place) - l.served
	if ahead <= 0 || math.IsInf(l.rate, 1) {
		return 0, l.changed
	}
	ahead -= float64(l.holesBeforeLocked(res.place))
	l.watched = true
	return secondsToDuration(ahead / l.rate), l.changed
}

// cancel gives back a place that will not be sent, at time now, so that the
// callers behind it move up by one. A place already due is sent or wasted
// and changes nothing; so does giving a place back twice. Place numbers are
// never handed out again.
func (l *sendRate) cancel(res sendPlace, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	if float64(res.place) <= l.served || res.place >= l.issued {
		return
	}
	i := l.holesBeforeLocked(res.place)
	if i < len(l.holes) && l.holes[i] == res.place {
		return
	}
	l.holes = slices.Insert(l.holes, i, res.place)
	if res.place+1 < l.issued && (l.wokenAt.IsZero() || now.Sub(l.wokenAt) >= sendWindow) {
		l.wokenAt = now
		l.wakeLocked()
	}
}

// observe records the outcome, seen at time now, of a request sent at
// sentAt: throttled, or a success. Successes must be reported too: the rate
// grows back only in windows whose successes show it in use. A throttle of a
// request sent at or before the last cut (or with a zero sentAt) is counted
// but cuts nothing: it belongs to an episode already answered. Other
// failures carry no rate signal and need not be reported.
func (l *sendRate) observe(sentAt, now time.Time, throttled bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncLocked(now)
	if !throttled {
		l.winOK++
		return
	}
	l.winThr++
	if !sentAt.After(l.lastCut) {
		return // part of a burst already answered by a cut
	}
	target := cutTo * l.acceptedRateLocked(now)
	if !l.lastCut.IsZero() && now.Sub(l.lastCut) < sendWindow {
		// The last cut, under a window ago, was not enough: a request sent
		// at the new rate was throttled. The measure still counts answers
		// from before the capacity fell, so cut by a step as well rather
		// than wait windows for it while most requests are throttled.
		target = min(target, consecutiveCutTo*l.rate)
	}
	switch {
	case math.IsInf(l.rate, 1):
		l.setRateLocked(target)
	case target < l.rate:
		// An estimate from lagging answers can be far too low, and it holds
		// until the next window.
		l.setRateLocked(max(target, minCutTo*l.rate))
	}
	l.lastCut = now
	l.growth = firstGrowth
	l.cuts++
}

// holesBeforeLocked returns how many places given back come before place,
// which is also where place would go among them.
func (l *sendRate) holesBeforeLocked(place uint64) int {
	return sort.Search(len(l.holes), func(i int) bool { return l.holes[i] >= place })
}

// setRateLocked sets the rate to r, clamped, and wakes the waiting callers
// so they measure their delay again.
func (l *sendRate) setRateLocked(r float64) {
	r = l.clamp(r)
	if r == l.rate {
		return
	}
	l.rate = r
	l.wakeLocked()
}

// wakeLocked wakes the callers waiting on the current channel, if any.
func (l *sendRate) wakeLocked() {
	if !l.watched {
		return
	}
	close(l.changed)
	l.changed = make(chan struct{})
	l.watched = false
}

// syncLocked brings the queue and the windows up to now.
func (l *sendRate) syncLocked(now time.Time) {
	l.initLocked()
	switch dt := now.Sub(l.servedAt); {
	case dt < -sendWindow:
		// A clock stepped back: start again from now rather than freeze
		// the queue, the windows and the cuts for as long as the step.
		l.servedAt, l.winStart = now, now
		if l.lastCut.After(now) {
			l.lastCut = now
		}
	case math.IsInf(l.rate, 1):
		l.served, l.holes, l.servedAt = float64(l.issued), nil, now // counted when reserved
	case dt > 0:
		sent := l.rate * dt.Seconds()
		target := l.served + sent
		// A place given back costs no time: the queue steps over it.
		skipped := 0
		for skipped < len(l.holes) && float64(l.holes[skipped]) <= target {
			skipped++
			target++
		}
		l.holes = l.holes[skipped:]
		if limit := float64(l.issued); target > limit {
			sent -= target - limit
			target = limit
		}
		l.served = target
		l.winSent += max(sent, 0)
		l.servedAt = now
	}
	l.rollLocked(now)
}

// acceptedRateLocked estimates the rate the service accepted, in requests per
// second, over the current and previous windows, and at least one window: a
// shorter span holds only the service's burst.
//
// The successes seen are a lower bound: answers lag. Throttles are cheap to
// answer and come back before the successes of the same burst, and the
// first answers to many goroutines that start at once may take longer than
// a window. The places that came due and were not throttled are an upper
// bound: they include the requests in flight. The estimate is the larger of
// the two. An estimate too high costs a few throttles, and the next cut, a
// round trip later, corrects it; one too low holds every waiting caller at
// the low rate until probing finds the capacity again.
func (l *sendRate) acceptedRateLocked(now time.Time) float64 {
	span := max(now.Sub(l.winStart)+l.prevSpan, sendWindow).Seconds()
	ok := l.winOK + l.prevOK
	unthrottled := l.winSent + l.prevSent - float64(l.winThr+l.prevThr)
	return max(float64(ok), unthrottled, 0) / span
}

// rollLocked closes every window that ended by now; a window without a
// throttle in which a finite rate was in use raises it.
func (l *sendRate) rollLocked(now time.Time) {
	if l.winStart.IsZero() {
		l.winStart = now
		return
	}
	elapsed := now.Sub(l.winStart)
	if elapsed < sendWindow {
		return
	}
	// Grow only a rate that was in use: an idle client must not talk itself
	// into a rate it never tested.
	used := float64(l.winOK) >= 0.5*l.rate*elapsed.Seconds()
	if l.winThr == 0 && used && !math.IsInf(l.rate, 1) {
		l.setRateLocked(l.rate * (1 + l.growth))
		l.growth = math.Min(l.growth*2, maxGrowth)
	}
	switch {
	case math.IsInf(l.rate, 1):
		// Unlimited, before the first cut: keep the whole history, so that
		// the first cut counts every place sent, however late the
		// first answers come (many goroutines starting at once on few
		// cores can take more than two windows).
		l.prevOK, l.prevThr, l.prevSent = l.prevOK+l.winOK, l.prevThr+l.winThr, l.prevSent+l.winSent
		l.prevSpan += elapsed
	case elapsed >= 2*sendWindow:
		// Idle for more than a window: what came before says nothing now.
		l.prevOK, l.prevThr, l.prevSent, l.prevSpan = 0, 0, 0, 0
	default:
		l.prevOK, l.prevThr, l.prevSent, l.prevSpan = l.winOK, l.winThr, l.winSent, elapsed
	}
	l.winOK, l.winThr, l.winSent = 0, 0, 0
	l.winStart = now
}

func (l *sendRate) clamp(r float64) float64 {
	return math.Min(math.Max(r, l.minRate), l.maxRate)
}

// secondsToDuration converts s seconds to a Duration, saturating instead of
// overflowing.
func secondsToDuration(s float64) time.Duration {
	ns := s * float64(time.Second)
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
