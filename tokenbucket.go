package jitterretry

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// This file owns the retry token bucket.

// TokenBucket is a client-side retry token bucket: retries spend tokens,
// successes earn them back, and an empty bucket's GetToken refuses at once
// instead of adding load to a struggling service (a Retryer, unless
// Options.FailFastOnEmptyBudget, backs off once before it passes the
// refusal on). Each Retryer has its own (see Options.BucketCapacity);
// NewTokenBucket makes one to share or to plug elsewhere.
//
// It implements the SDK's retry.RateLimiter (GetToken and AddTokens), so it
// also plugs into retry.NewStandard through StandardOptions.RateLimiter,
// where it adds a refill over time to the SDK's own retryer. Tokens never go
// below 0 or above the capacity. It is safe for concurrent use by multiple
// goroutines. The zero value is an empty bucket of capacity 0, which refuses
// every retry that costs tokens; use NewTokenBucket. A nil *TokenBucket
// answers as the zero value does (a constructor's result is never nil, but
// a field left unset may be).
type TokenBucket struct {
	capacity uint
	refill   float64 // tokens per second; 0 when off
	now      func() time.Time

	// tokens changes with every retry, from every goroutine: the pads keep
	// it off the lines of the fields above, which every take reads.
	_      cacheLinePad
	tokens atomic.Uint64
	_      cacheLinePad

	mu     sync.Mutex // with a refill: guards tokens' changes, frac and steady
	frac   float64    // refilled fraction of a token not yet credited
	steady steadyTime // the refill's time, from now's readings; its latest is the time refilled up to
}

// NewTokenBucket returns a full bucket of capacity tokens (the SDK's default
// is 500; 0 refuses every retry that costs tokens, as the SDK's
// ratelimit.NewTokenRateLimit(0) does; a cost of 0 always passes) that refills refillPerSecond tokens per second, continuously, up to
// the capacity. A refillPerSecond of zero means no refill, the SDK's
// behaviour, where only successes add tokens; +Inf keeps the bucket full;
// negative values and NaN count as zero. It refills on time.Now, not on
// the Options.Clock of a retryer it is given to: a test that moves a fake
// clock sees only the retryer's own buckets (Options.BucketRefill) refill
// with it.
func NewTokenBucket(capacity uint, refillPerSecond float64) *TokenBucket {
	return newTokenBucket(capacity, refillPerSecond, time.Now)
}

func newTokenBucket(capacity uint, refill float64, now func() time.Time) *TokenBucket {
	b := &TokenBucket{capacity: capacity, now: now}
	b.tokens.Store(uint64(capacity))
	if refill > 0 {
		b.refill = refill
		b.steady.at(now())
	}
	return b
}

// Remaining returns the tokens in the bucket now.
func (b *TokenBucket) Remaining() uint {
	b = orZero(b)
	if b.refill != 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.refillLocked()
	}
	return uint(b.tokens.Load())
}

// GetToken takes cost tokens. It returns a function that gives them back
// (the SDK calls it when the retry succeeded), or, when the bucket holds
// fewer than cost tokens, a *GiveUpError with reason GiveUpBudget ("retry
// quota exceeded"), without taking any. A done ctx gives, as the SDK's
// bucket does, an error with CanceledError() true (an
// *aws.RequestCanceledError), which no retryer retries.
func (b *TokenBucket) GetToken(ctx context.Context, cost uint) (func() error, error) {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return nil, &aws.RequestCanceledError{Err: err}
		}
	}
	b = orZero(b)
	if avail, ok := b.take(cost); !ok {
		return nil, &GiveUpError{Reason: GiveUpBudget, available: avail, requested: cost}
	}
	return func() error { b.give(cost); return nil }, nil
}

// AddTokens gives n tokens back, up to the capacity. It never fails.
func (b *TokenBucket) AddTokens(n uint) error {
	orZero(b).give(n)
	return nil
}

// orZero returns b, or for a nil b a new zero bucket, which holds nothing
// and keeps nothing given to it.
func orZero(b *TokenBucket) *TokenBucket {
	if b == nil {
		return new(TokenBucket)
	}
	return b
}

// Without a refill the bucket is a single atomic counter, so concurrent
// retries never wait for a lock; with one, every change happens under mu,
// after the refill it is due.

// take removes cost tokens if the bucket holds that many, and reports what is
// left (or what was available, when it refuses).
func (b *TokenBucket) take(cost uint) (uint, bool) {
	t, ok := b.update(func(t uint64) (uint64, bool) { return t - uint64(cost), uint64(cost) <= t })
	if !ok {
		return uint(t), false
	}
	return uint(t) - cost, true
}

// takeUpTo removes n tokens, or all the bucket holds when fewer.
func (b *TokenBucket) takeUpTo(n uint) {
	b.update(func(t uint64) (uint64, bool) { return t - min(t, uint64(n)), true })
}

// give adds n tokens, saturating at the capacity, and returns how many it
// added.
func (b *TokenBucket) give(n uint) uint {
	if n == 0 {
		return 0
	}
	added := func(t uint64) uint64 { return min(uint64(n), uint64(b.capacity)-t) }
	// Nothing to add to a full bucket, the common case (a first attempt's
	// success): no swap, whose write, though it changes nothing, took the
	// line from every other core's reading of the bucket.
	t, _ := b.update(func(t uint64) (uint64, bool) { return t + added(t), added(t) > 0 })
	return uint(added(t))
}

// update sets the tokens to next(t), t being what the bucket holds after its
// refill, unless next refuses; it returns t and whether it set them.
func (b *TokenBucket) update(next func(t uint64) (uint64, bool)) (uint64, bool) {
	if b.refill != 0 {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.refillLocked()
	}
	for {
		t := b.tokens.Load()
		n, ok := next(t)
		if !ok {
			return t, false
		}
		if b.tokens.CompareAndSwap(t, n) {
			return t, true
		}
	}
}

func (b *TokenBucket) refillLocked() {
	if b.now == nil {
		return
	}
	if math.IsInf(b.refill, 1) {
		// Full at every reading, whether or not the clock moved since
		// the last: a coarse or held clock reads the same time twice.
		b.tokens.Store(uint64(b.capacity))
		return
	}
	// A clock stepped back refills nothing, and its return forward only
	// what passes the time refilled up to (see steadyTime).
	last := b.steady.latest
	elapsed := b.steady.at(b.now()).Sub(last).Seconds()
	if elapsed <= 0 {
		// A clock that did not move (a coarse one) or is held: the
		// fraction gathered so far stays for the next reading.
		return
	}
	tokens := uint(b.tokens.Load())
	if tokens == b.capacity {
		b.frac = 0
		return
	}
	add := elapsed*b.refill + b.frac
	room := float64(b.capacity - tokens)
	if math.IsInf(add, 1) || add >= room {
		b.tokens.Store(uint64(b.capacity))
		b.frac = 0
		return
	}
	whole := math.Floor(add)
	b.tokens.Store(uint64(tokens + uint(whole)))
	b.frac = add - whole
}

// cacheLinePad separates a field that many goroutines write from its
// neighbours: 64 bytes, the cache line of amd64 and most arm64 cores.
type cacheLinePad [64]byte
