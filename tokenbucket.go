package jitterretry

import (
	"context"
	"math"
	"sync"
	"time"
)

// Default retry token bucket numbers, the SDK's retry behaviour 2.1 values.
const (
	// DefaultBucketCapacity is the bucket's size and initial content: 500
	// tokens.
	DefaultBucketCapacity uint = 500
	// DefaultRetryCost is the cost of a retry after an error that is not a
	// throttle: 14 tokens, so a full bucket buys 35 such retries.
	DefaultRetryCost uint = 14
	// DefaultThrottlingRetryCost is the cost of a retry after a throttling
	// error: 5 tokens, so a full bucket buys 100 such retries.
	DefaultThrottlingRetryCost uint = 5
	// DefaultNoRetryIncrement is what an operation that succeeds on its first
	// attempt adds back: 1 token.
	DefaultNoRetryIncrement uint = 1
)

// TokenBucketOptions configures a TokenBucket.
type TokenBucketOptions struct {
	// Capacity is the most tokens the bucket holds; it starts full. Zero
	// means DefaultBucketCapacity (500).
	Capacity uint

	// RefillPerSecond adds tokens continuously, up to Capacity, so that a
	// fleet of workers that are all retrying cannot drain the bucket for
	// good (the SDK's bucket refills only on first-attempt successes). Zero
	// means no refill, the SDK's behaviour; +Inf keeps the bucket full.
	// NewTokenBucket treats negative and NaN as zero; a Retryer's
	// Options.Bucket rejects them (see Retryer.Err).
	RefillPerSecond float64

	// Clock returns the current time for refills. Nil means time.Now; tests
	// inject a fake clock.
	Clock func() time.Time
}

// TokenBucket is a client-side retry token bucket: retries spend tokens,
// successes earn them back, and an empty bucket refuses retries at once
// instead of adding load to a struggling service.
//
// It implements the SDK's retry.RateLimiter (GetToken and AddTokens), so it
// also plugs into retry.NewStandard through StandardOptions.RateLimiter.
// Tokens never go below 0 or above the capacity. It is safe for concurrent
// use by multiple goroutines.
type TokenBucket struct {
	capacity uint
	refill   float64 // tokens per second; 0 when off
	now      func() time.Time

	mu     sync.Mutex
	tokens uint
	frac   float64 // refilled fraction of a token not yet credited
	last   time.Time
}

// NewTokenBucket returns a full bucket configured by optFns.
func NewTokenBucket(optFns ...func(*TokenBucketOptions)) *TokenBucket {
	var o TokenBucketOptions
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	return newTokenBucket(o)
}

func newTokenBucket(o TokenBucketOptions) *TokenBucket {
	b := &TokenBucket{capacity: o.Capacity, now: o.Clock}
	if b.capacity == 0 {
		b.capacity = DefaultBucketCapacity
	}
	if o.RefillPerSecond > 0 {
		b.refill = o.RefillPerSecond
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.tokens = b.capacity
	if b.refill > 0 {
		b.last = b.now()
	}
	return b
}

// Capacity returns the most tokens the bucket holds.
func (b *TokenBucket) Capacity() uint { return b.capacity }

// Remaining returns the tokens in the bucket now.
func (b *TokenBucket) Remaining() uint {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	return b.tokens
}

// GetToken takes cost tokens. It returns a function that gives them back
// (call it when the retry succeeded), or, when the bucket holds fewer than
// cost tokens, a *BudgetError without taking any. A done ctx is reported as
// a *GiveUpError with reason GiveUpCanceled.
func (b *TokenBucket) GetToken(ctx context.Context, cost uint) (func() error, error) {
	if ctx != nil {
		if err := ctx.Err(); err != nil {
			return nil, &GiveUpError{Reason: GiveUpCanceled, Context: err}
		}
	}
	if avail, ok := b.take(cost); !ok {
		return nil, &BudgetError{Available: avail, Requested: cost}
	}
	return func() error { b.give(cost); return nil }, nil
}

// AddTokens gives n tokens back, up to the capacity. It never fails.
func (b *TokenBucket) AddTokens(n uint) error {
	b.give(n)
	return nil
}

// take removes cost tokens if the bucket holds that many, and reports what is
// left (or what was available, when it refuses).
func (b *TokenBucket) take(cost uint) (uint, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	if cost > b.tokens {
		return b.tokens, false
	}
	b.tokens -= cost
	return b.tokens, true
}

// give adds n tokens, saturating at the capacity.
func (b *TokenBucket) give(n uint) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	if n >= b.capacity-b.tokens {
		b.tokens = b.capacity
		return
	}
	b.tokens += n
}

func (b *TokenBucket) refillLocked() {
	if b.refill == 0 {
		return
	}
	now := b.now()
	elapsed := now.Sub(b.last).Seconds()
	b.last = now
	if elapsed <= 0 || b.tokens == b.capacity {
		b.frac = 0
		return
	}
	add := elapsed*b.refill + b.frac
	room := float64(b.capacity - b.tokens)
	if math.IsInf(add, 1) || add >= room {
		b.tokens, b.frac = b.capacity, 0
		return
	}
	whole := math.Floor(add)
	b.tokens += uint(whole)
	b.frac = add - whole
}
