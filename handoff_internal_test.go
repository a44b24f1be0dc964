package jitterretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/metrics"
	smithymiddle "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drain takes r's bucket's tokens with retries of throwaway errors.
func drain(t *testing.T, r *Retryer, bucket *TokenBucket) {
	t.Helper()
	for bucket.Remaining() >= r.costs.retry {
		_, err := r.GetRetryToken(context.Background(), errors.New("drain"))
		require.NoError(t, err)
	}
}

// TestStaleRefusalIsNotAnotherOperationsEntry: a refusal an ordinary
// operation left (its RetryDelay never comes) is not handed to a later
// operation of the same error value whose own entry another error evicted:
// an outside review found the later operation, with no deadline, refused
// for the refusal's deadline, and its 14 tokens lost.
// The refusal's deadline is on the retryer's clock, an hour ahead of the
// wall clock, which only the test advances: with a real 30 ms deadline, a
// machine that delayed the first GetRetryToken that long had the retry
// refused for its context (GiveUpCanceled), not the budget, and left no
// refusal to hand on.
func TestStaleRefusalIsNotAnotherOperationsEntry(t *testing.T) {
	bucket := NewTokenBucket(100, 0)
	base := time.Now().Add(time.Hour)
	var offset atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	r := New(func(o *Options) {
		o.RateLimiter = bucket
		o.Clock = clock
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
	})
	shared := errors.New("shared sentinel")
	var colliding error // another error in the same slot of the hand-off table
	for colliding == nil {
		if c := errors.New("other"); keyHash(c)%handoffSlots == keyHash(shared)%handoffSlots {
			colliding = c
		}
	}
	drain(t, r, bucket)
	soon, cancel := context.WithDeadline(context.Background(), clock().Add(30*time.Millisecond))
	defer cancel()
	_, err := r.GetRetryToken(soon, shared) // refused after its 10 ms wait
	require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	offset.Add(int64(150 * time.Millisecond)) // the refusal is stale, its deadline past
	bucket.AddTokens(100)

	_, err = r.GetRetryToken(context.Background(), shared) // no deadline
	require.NoError(t, err)
	_, err = r.GetRetryToken(context.Background(), colliding) // evicts its entry
	require.NoError(t, err)
	d, err := r.RetryDelay(1, shared)
	require.NoError(t, err, "expect the operation without a deadline not refused for another's")
	assert.Equal(t, 10*time.Millisecond, d)
}

// TestTwoRefusalsOfOneValueAreAmbiguous: two refusals of the same error
// value at once cannot be told apart; neither operation's RetryDelay may
// use the other's entry (the first took the second's backoff wait).
func TestTwoRefusalsOfOneValueAreAmbiguous(t *testing.T) {
	bucket := NewTokenBucket(14, 0)
	r := New(func(o *Options) {
		o.RateLimiter = bucket
		// The empty budget's wait before refusing is the first retry's
		// backoff: short, so the two refusals come together.
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return time.Duration(attempt) * time.Millisecond, nil
		})
	})
	drain(t, r, bucket)
	shared := errors.New("shared")
	soon, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, errA := r.GetRetryToken(soon, shared)
	_, errB := r.GetRetryToken(context.Background(), shared)
	require.ErrorIs(t, errA, ErrRetryBudgetExhausted)
	require.ErrorIs(t, errB, ErrRetryBudgetExhausted)
	for _, who := range []string{"first", "second"} {
		_, status, _ := r.handoff.take(shared, r.now)
		assert.Equal(t, handoffAmbiguous, status, "%s RetryDelay", who)
	}
}

// TestStaleGhostAfterAClocklessPut: a refusal left pending (its RetryDelay
// never comes), then an operation whose put read no clock (no deadline, a
// context that cannot end) made the slot ambiguous and took one of the two
// entries; the refusal's ghost stayed with no known age, and every later
// operation of the value was paired ambiguously for as long as the slot
// lived. A put into a slot with a pending entry of its value reads the
// clock when it made no reading of its own.
func TestStaleGhostAfterAClocklessPut(t *testing.T) {
	r, clock, offset, shared := afterARefusal(t)
	_, err := r.GetRetryToken(context.Background(), shared) // no clock reading
	require.NoError(t, err)
	_, status, _ := r.handoff.take(shared, r.now)
	require.Equal(t, handoffAmbiguous, status, "beside a fresh refusal, no telling")

	offset.Add(int64(2 * time.Second))
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
	defer cancel()
	_, err = r.GetRetryToken(ctx, shared)
	require.NoError(t, err)
	_, status, _ = r.handoff.take(shared, r.now)
	assert.Equal(t, handoffFound, status, "expect the ghost, two seconds old, replaced")
}

// blockingLimiter is a custom RateLimiter whose GetToken blocks for block on
// the retryer's clock (it advances the test's offset), as one that waits
// for tokens does.
type blockingLimiter struct {
	offset *atomic.Int64
	block  time.Duration
}

func (b blockingLimiter) GetToken(context.Context, uint) (func() error, error) {
	b.offset.Add(int64(b.block))
	return func() error { return nil }, nil
}

func (blockingLimiter) AddTokens(uint) error { return nil }

// TestDeadlineCountsFromAfterABlockingLimiter: the deadline check read the
// clock before a custom RateLimiter's GetToken, which may block, and so
// let a backoff end past the deadline by as long as it blocked (an
// outside review: a 1 s backoff allowed with 0.5 s left after a 1.5 s
// block); the hand-off took the stale reading too.
func TestDeadlineCountsFromAfterABlockingLimiter(t *testing.T) {
	base := time.Now()
	var offset atomic.Int64
	clock := func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
	r := New(func(o *Options) {
		o.RateLimiter = blockingLimiter{&offset, 1500 * time.Millisecond}
		o.Clock = clock
		o.DeadlineMargin = time.Millisecond
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
	})
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(2*time.Second))
	defer cancel()
	requireRetryRefusedForDeadline(t, r, ctx, errors.New("throttled"), "expect the 1 s backoff refused with 0.5 s left")
}

// requireRetryRefusedForDeadline runs the SDK's middleware's two calls for
// a retry of opErr under ctx, and requires the first to grant it and the
// second to refuse it for the deadline; why says what the test expected.
func requireRetryRefusedForDeadline(t *testing.T, r *Retryer, ctx context.Context, opErr error, why string) {
	t.Helper()
	_, err := r.GetRetryToken(ctx, opErr)
	require.NoError(t, err)
	_, err = r.RetryDelay(1, opErr)
	var gu *GiveUpError
	require.ErrorAs(t, err, &gu, why)
	assert.Equal(t, GiveUpDeadline, gu.Reason)
}

// TestRefusalGhostFadesUnderASteadyStream: after one refusal of a shared
// value (an ordinary operation's: its RetryDelay never comes), operations
// of that value one after another, 0.9 s apart, each with a deadline: the
// first, within a second of the refusal, cannot be told from it; the rest
// must be. Until each pending entry kept its own reading, every put
// refreshed one time for the slot and the ghost never aged.
func TestRefusalGhostFadesUnderASteadyStream(t *testing.T) {
	r, clock, offset, shared := afterARefusal(t)
	var statuses []handoffStatus
	for range 5 {
		offset.Add(int64(900 * time.Millisecond))
		ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
		_, err := r.GetRetryToken(ctx, shared)
		require.NoError(t, err)
		_, status, _ := r.handoff.take(shared, r.now)
		statuses = append(statuses, status)
		cancel()
	}
	assert.Equal(t, []handoffStatus{handoffAmbiguous, handoffFound, handoffFound, handoffFound, handoffFound}, statuses)
}

// afterARefusal returns a retryer on a clock the test moves (by offset) whose
// bucket refused a retry of shared, as an ordinary operation's whose
// RetryDelay never comes, and then got its tokens back.
func afterARefusal(t *testing.T) (r *Retryer, clock func() time.Time, offset *atomic.Int64, shared error) {
	t.Helper()
	return afterRefusals(t, 1)
}

// afterRefusals is afterARefusal with n refusals of shared.
func afterRefusals(t *testing.T, n int) (r *Retryer, clock func() time.Time, offset *atomic.Int64, shared error) {
	t.Helper()
	base := time.Now()
	offset = new(atomic.Int64)
	clock = func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
	bucket := NewTokenBucket(100, 0)
	r = New(func(o *Options) {
		o.RateLimiter = bucket
		o.Clock = clock
		o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
			return time.Duration(attempt) * time.Millisecond, nil
		})
	})
	shared = errors.New("shared")
	drain(t, r, bucket)
	for range n {
		_, err := r.GetRetryToken(context.Background(), shared)
		require.ErrorIs(t, err, ErrRetryBudgetExhausted)
	}
	bucket.AddTokens(100)
	return r, clock, offset, shared
}

// TestAnEvictedEntryMakesItsValueAmbiguous: operation A hands off a shared
// value, another error in the same slot evicts A's entry, then operation C
// hands off the same value; A's RetryDelay took C's entry, and was refused
// for C's deadline (500 ms against A's hour) in C's partition, with C's
// tokens refunded, while C's retry went unchecked and unreported
// (helper-59). A value that has a lost entry is ambiguous: neither
// operation uses the other's entry, and both are reported Unchecked.
func TestAnEvictedEntryMakesItsValueAmbiguous(t *testing.T) {
	var events []RetryEvent
	r := New(func(o *Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
		o.PartitionKey = PartitionFromContext
		o.OnRetry = func(e RetryEvent) { events = append(events, e) }
	})
	shared := errors.New("shared")
	var colliding error
	for colliding == nil {
		if c := errors.New("other"); keyHash(c)%handoffSlots == keyHash(shared)%handoffSlots {
			colliding = c
		}
	}
	hour, cancel := context.WithTimeout(WithPartition(context.Background(), "A"), time.Hour)
	defer cancel()
	soon, cancelSoon := context.WithTimeout(WithPartition(context.Background(), "C"), 500*time.Millisecond)
	defer cancelSoon()
	_, err := r.GetRetryToken(hour, shared) // A
	require.NoError(t, err)
	_, err = r.GetRetryToken(hour, colliding) // evicts A's entry
	require.NoError(t, err)
	_, err = r.GetRetryToken(soon, shared) // C
	require.NoError(t, err)

	for _, who := range []string{"A", "C"} {
		_, err := r.RetryDelay(1, shared)
		var gu *GiveUpError
		require.False(t, errors.As(err, &gu), "%s: expect no other operation's deadline, got %v", who, err)
	}
	require.Len(t, events, 2)
	for _, e := range events {
		assert.True(t, e.Unchecked, "expect each retry of the value reported unchecked, got %+v", e)
	}
}

// TestABurstOfRefusalsOfOneValueGoesStale: five refusals of one value left
// pending (ordinary operations: their RetryDelay never comes), more than
// the four put times a slot kept: the slot never went stale, and every
// later operation of the value was paired ambiguously, its deadline
// unchecked, until another error evicted it (helper-59).
func TestABurstOfRefusalsOfOneValueGoesStale(t *testing.T) {
	for _, refusals := range []int{4, 5, 9} {
		t.Run(fmt.Sprint(refusals), func(t *testing.T) {
			r, clock, offset, shared := afterRefusals(t, refusals)
			offset.Add(int64(2 * time.Second))
			ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
			defer cancel()
			_, err := r.GetRetryToken(ctx, shared)
			require.NoError(t, err)
			_, status, _ := r.handoff.take(shared, r.now)
			assert.Equal(t, handoffFound, status, "expect the refusals, two seconds old, replaced")
		})
	}
}

// TestAnEvictedGhostIsNotLostForever: a refusal's entry that no RetryDelay
// will take (an ordinary operation's), evicted by another error an hour
// later, made every later operation of the value ambiguous, its deadline
// unchecked, however old the eviction (helper-61). Only an entry evicted
// within handoffStale of its put may still be asked for.
func TestAnEvictedGhostIsNotLostForever(t *testing.T) {
	r, clock, offset, shared := afterARefusal(t)
	offset.Add(int64(time.Hour))
	evictWith(t, r, collidingWith(shared, 1)[0])
	pairsAfter(t, r, clock, offset, shared, time.Hour)
}

// evictWith runs an operation of other, an error of a slot holding another
// value's entry, in the middleware's order: it evicts that entry.
func evictWith(t *testing.T, r *Retryer, other error) {
	t.Helper()
	_, err := r.GetRetryToken(context.Background(), other)
	require.NoError(t, err)
	_, err = r.RetryDelay(1, other)
	require.NoError(t, err)
}

// pairsAfter moves clock on by d and checks that the next operation of
// shared, with a deadline, finds its own entry.
func pairsAfter(t *testing.T, r *Retryer, clock func() time.Time, offset *atomic.Int64, shared error, d time.Duration) {
	t.Helper()
	offset.Add(int64(d))
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
	defer cancel()
	_, err := r.GetRetryToken(ctx, shared)
	require.NoError(t, err)
	_, status, _ := r.handoff.take(shared, r.now)
	assert.Equal(t, handoffFound, status, "expect the operation's own entry %v later", d)
}

// TestHandoffOfASharedValueBesideCollidingOnesDrains: eight operations at
// once, in the middleware's order, hand off one shared value and four
// other errors of its slot; when every RetryDelay has come, what is left
// pending (an entry kept for an operation that might still ask) is stale
// a second later, and the value's next operation pairs exactly (an outside
// review's stress, helper-61; run under -race).
func TestHandoffOfASharedValueBesideCollidingOnesDrains(t *testing.T) {
	base := time.Now()
	var offset atomic.Int64
	clock := func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
	r := New(func(o *Options) {
		o.BucketCapacity = 1 << 30
		o.Clock = clock
	})
	shared := errors.New("shared")
	inEightGoroutines(shared, collidingWith(shared, 4), func(_ int, err error) {
		ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
		defer cancel()
		if _, e := r.GetRetryToken(ctx, err); e == nil {
			_, _ = r.RetryDelay(1, err)
		}
	})
	offset.Add(int64(2 * handoffStale))
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Minute))
	defer cancel()
	_, err := r.GetRetryToken(ctx, shared)
	require.NoError(t, err)
	_, status, _ := r.handoff.take(shared, r.now)
	assert.Equal(t, handoffFound, status, "expect what was left stale, and the next operation paired")
	s := tableOf(&tableOf(&r.handoff.slots)[keyHash(shared)%handoffSlots])
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Zero(t, s.pending, "expect nothing left pending after the take")
}

// inEightGoroutines calls op 2000 times in each of eight goroutines at
// once, with the shared value or, one time in three, one of others; n
// numbers the calls of each goroutine from where its own number starts.
func inEightGoroutines(shared error, others []error, op func(n int, err error)) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				err := shared
				if (i+g)%3 == 0 {
					err = others[(i+g)%len(others)]
				}
				op(i+g, err)
			}
		}()
	}
	wg.Wait()
}

// collidingWith returns n errors of shared's slot of the hand-off table.
func collidingWith(shared error, n int) []error {
	var out []error
	for len(out) < n {
		if c := errors.New("other"); keyHash(c)%handoffSlots == keyHash(shared)%handoffSlots {
			out = append(out, c)
		}
	}
	return out
}

// handoffValue is an error that is not a pointer: all its values share a
// key in the hand-off table, as a shared sentinel's operations do.
type handoffValue struct{ op int }

func (e handoffValue) Error() string { return fmt.Sprintf("value of operation %d", e.op) }

// TestAnEvictedOperationNeverTakesAnothersEntry: operations of other errors
// in the slot of a shared value's pending entry, then operations of the
// value, in orders the outside reviews found (helper-62, helper-63): each
// let an hour-long operation take a 500 ms one's entry and be refused for
// its deadline, with the 500 ms one's backoff let through unreported. The
// evicted operations of a value are counted (four values a slot): no
// RetryDelay of the value takes another operation's entry, and each is
// reported Unchecked.
func TestAnEvictedOperationNeverTakesAnothersEntry(t *testing.T) {
	type step struct {
		put  int // 0: the value in the hour-long context, 1: in the 500 ms one, 2 and 3: other errors
		take int // the same numbering, or -1 for a put
	}
	put := func(v int) step { return step{put: v, take: -1} }
	take := func(v int) step { return step{put: -1, take: v} }
	cases := map[string][]step{
		"two evictions, then the value again":      {put(0), put(2), put(3), put(1), take(0), take(1), take(2), take(3)},
		"an ambiguous pair evicted":                {put(0), put(0), put(2), take(0), put(1), take(0), take(1), take(2)},
		"two declines of one value":                {put(2), put(0), put(0), take(2), put(0), take(0), take(0), put(1), take(0), take(1)},
		"the first take of two declined, then one": {put(2), put(0), put(0), take(0), take(2), put(1), take(0), take(1)},
	}
	for name, steps := range cases {
		for _, shared := range []string{"a shared pointer", "values of one type"} {
			t.Run(name+", "+shared, func(t *testing.T) {
				var events []RetryEvent
				r := New(func(o *Options) {
					o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
					o.OnRetry = func(e RetryEvent) { events = append(events, e) }
				})
				sentinel := errors.New("shared")
				var value error = sentinel
				if shared == "values of one type" {
					value = handoffValue{}
				}
				others := collidingWith(value, 2)
				hour, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				soon, cancelSoon := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancelSoon()
				n := 0
				errOf := func(v int) error {
					switch {
					case v >= 2:
						return others[v-2]
					case shared == "values of one type":
						n++
						return handoffValue{op: n}
					}
					return sentinel
				}
				for _, s := range steps {
					if s.take < 0 {
						ctx := hour
						if s.put == 1 {
							ctx = soon
						}
						_, err := r.GetRetryToken(ctx, errOf(s.put))
						require.NoError(t, err)
						continue
					}
					_, err := r.RetryDelay(1, errOf(s.take))
					var gu *GiveUpError
					require.False(t, errors.As(err, &gu), "expect no operation refused for another's deadline, got %v", err)
				}
				for _, e := range events {
					if e.Err == sentinel || errors.As(e.Err, new(handoffValue)) {
						assert.True(t, e.Unchecked, "expect each retry of the value reported unchecked, got %+v", e)
					}
				}
			})
		}
	}
}

// TestAGhostsPhantomIsDated: a refusal's entry evicted by another error,
// then an operation without a deadline (no clock reading) puts the value
// within a second: the entry kept for the evicted one beside it had no
// reading, and made the value's next operation, an hour later, ambiguous
// (helper-62).
func TestAGhostsPhantomIsDated(t *testing.T) {
	r, clock, offset, shared := afterARefusal(t)
	evictWith(t, r, collidingWith(shared, 1)[0])            // evicts the refusal's entry
	_, err := r.GetRetryToken(context.Background(), shared) // no deadline, within the second
	require.NoError(t, err)
	_, err = r.RetryDelay(1, shared)
	require.NoError(t, err)
	pairsAfter(t, r, clock, offset, shared, time.Hour)
}

// TestAGhostAgesAfterAClockSteppedBack: after a refusal, a clock (one of
// the caller's, without a monotonic reading) steps back an hour: the
// refusal's entry never aged until the clock caught up, and every
// operation of its value meanwhile was ambiguous (helper-62). Its age
// counts from the first reading after the step.
func TestAGhostAgesAfterAClockSteppedBack(t *testing.T) {
	r, _, offset, shared := afterARefusal(t)
	offset.Add(int64(-time.Hour))
	var statuses []handoffStatus
	for range 3 {
		offset.Add(int64(2 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := r.GetRetryToken(ctx, shared)
		require.NoError(t, err)
		_, status, _ := r.handoff.take(shared, r.now)
		statuses = append(statuses, status)
		cancel()
	}
	assert.Equal(t, []handoffStatus{handoffAmbiguous, handoffFound, handoffFound}, statuses, "2, 4 and 6 s after the step")
}

// TestNoOperationTakesAnothersDeadlineUnderStress: eight goroutines call
// the retryer in the middleware's order with one shared value and four
// other errors of its slot, half of them with an hour left, half with
// 300 ms, a backoff of 1 s: no hour-long operation may be refused for a
// deadline (an outside review's stress, helper-62: 2-8 of 24,000 were,
// under -race, until the slot counted its evicted operations by value),
// and every 300 ms one let through is reported Unchecked.
func TestNoOperationTakesAnothersDeadlineUnderStress(t *testing.T) {
	for _, yield := range []bool{false, true} {
		t.Run(fmt.Sprintf("yield=%v", yield), func(t *testing.T) {
			r := New(func(o *Options) {
				o.BucketCapacity = 1 << 30
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
			})
			shared := errors.New("shared")
			others := collidingWith(shared, 4)
			var wrong, letThrough, unchecked atomic.Int64
			r.hooks.onRetry = func(e RetryEvent) {
				if e.Unchecked {
					unchecked.Add(1)
				}
			}
			inEightGoroutines(shared, others, func(n int, err error) {
				short := n%2 == 0
				d := time.Hour
				if short {
					d = 300 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				r.IsErrorRetryable(err)
				if _, e := r.GetRetryToken(ctx, err); e == nil {
					if yield && n%7 == 0 {
						runtime.Gosched()
					}
					_, e2 := r.RetryDelay(1, err)
					var gu *GiveUpError
					if errors.As(e2, &gu) && gu.Reason == GiveUpDeadline && !short {
						wrong.Add(1)
					}
					if e2 == nil && short {
						letThrough.Add(1)
					}
				}
			})
			assert.Zero(t, wrong.Load(), "expect no hour-long operation refused for a deadline")
			assert.LessOrEqual(t, letThrough.Load(), unchecked.Load(), "expect every 300 ms operation let through reported unchecked")
		})
	}
}

// TestASuspectSlotLeavesNoPhantom: after two other errors of its slot were
// evicted, an operation alone in its slot was counted twice (a phantom for
// an operation the slot had forgotten), and the phantom held the slot a
// second longer: an operation alone in its slot, 500 ms left and a 1 s
// backoff, was let through (helper-63, on a version that declined puts).
func TestASuspectSlotLeavesNoPhantom(t *testing.T) {
	base := time.Now()
	var offset atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(offset.Load())) }
	r := New(func(o *Options) {
		o.Clock = clock
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
	})
	errs := collidingWith(errors.New("x"), 5)
	x, y, z, a, b := errs[0], errs[1], errs[2], errs[3], errs[4]
	hop := func(err error) {
		ctx, cancel := context.WithDeadline(context.Background(), clock().Add(500*time.Millisecond))
		defer cancel()
		_, gerr := r.GetRetryToken(ctx, err)
		require.NoError(t, gerr)
	}
	hop(x) // pending
	hop(y) // evicts x
	hop(z) // evicts y
	for _, err := range []error{x, y, z} {
		_, _ = r.RetryDelay(1, err)
	}
	offset.Add(int64(900 * time.Millisecond))
	hop(a) // alone
	_, _ = r.RetryDelay(1, a)
	offset.Add(int64(600 * time.Millisecond))
	hop(b)
	d, err := r.RetryDelay(1, b)
	var gu *GiveUpError
	assert.True(t, errors.As(err, &gu) && gu.Reason == GiveUpDeadline, "expect the lone operation's 1 s backoff refused with 500 ms left, got %v, %v", d, err)
}

// skipCounter is a smithy-go Meter that keeps the skipped deadline checks
// counter's additions by reason, and creates no other instrument.
type skipCounter struct {
	metrics.Meter
	mu      sync.Mutex
	reasons map[string]int64
}

func (m *skipCounter) Int64Counter(name string, _ ...metrics.InstrumentOption) (metrics.Int64Counter, error) {
	if name != instUncheckable {
		return nil, nil
	}
	return skipAdder{m}, nil
}

func (m *skipCounter) Float64Histogram(string, ...metrics.InstrumentOption) (metrics.Float64Histogram, error) {
	return nil, nil
}

func (m *skipCounter) Int64AsyncGauge(string, metrics.Int64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	return nil, nil
}

func (m *skipCounter) Float64AsyncGauge(string, metrics.Float64Callback, ...metrics.InstrumentOption) (metrics.AsyncInstrument, error) {
	return nil, nil
}

type skipAdder struct{ m *skipCounter }

func (a skipAdder) Add(_ context.Context, n int64, opts ...metrics.RecordMetricOption) {
	var o metrics.RecordMetricOptions
	for _, fn := range opts {
		fn(&o)
	}
	reason, _ := o.Properties.Get(attrReason).(string)
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	a.m.reasons[reason] += n
}

type skipProvider struct{ m *skipCounter }

func (p skipProvider) Meter(string, ...metrics.MeterOption) metrics.Meter { return p.m }

// TestAnEvictedRetryIsCountedOnce: a retry whose hand-off another error
// evicted was counted as a skipped deadline check at the eviction (reason
// evicted) and again when its RetryDelay came (reason unpaired): the
// counter says it counts the checks not made (helper-63).
func TestAnEvictedRetryIsCountedOnce(t *testing.T) {
	m := &skipCounter{reasons: map[string]int64{}}
	r := New(func(o *Options) {
		o.MeterProvider = skipProvider{m}
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
	})
	require.NoError(t, r.Err())
	mine := errors.New("mine")
	other := collidingWith(mine, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := r.GetRetryToken(ctx, mine)
	require.NoError(t, err)
	_, err = r.GetRetryToken(ctx, other) // evicts mine's hand-off
	require.NoError(t, err)
	var events []RetryEvent
	r.hooks.onRetry = func(e RetryEvent) { events = append(events, e) }
	_, err = r.RetryDelay(1, mine)
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.True(t, events[0].Unchecked, "expect the retry reported unchecked to its hook")
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Equal(t, map[string]int64{"evicted": 1}, m.reasons, "expect the one skipped check counted once")
}

// TestAForgottenEvictedRetryIsReportedUnchecked: an operation's hand-off
// evicted, and then four more errors of its slot evicted while it is still
// to ask (a goroutine descheduled between GetRetryToken and RetryDelay on a
// busy machine), outgrows the slot's record of operations that may still
// ask: its RetryDelay found nothing, and let a backoff past its deadline
// through with no check, and told OnRetry it was checked (Unchecked false;
// the skipped checks' metric counted it at the eviction: helper-122). It is reported Unchecked within handoffStale of the
// forgetting, and not after, also when a RetryDelay with nothing handed
// off before it (a refused long-polling operation's) came first in the
// slot (helper-123).
func TestAForgottenEvictedRetryIsReportedUnchecked(t *testing.T) {
	for _, after := range []time.Duration{0, handoffStale} {
		t.Run(fmt.Sprintf("asking %v after", after), func(t *testing.T) {
			m := &skipCounter{reasons: map[string]int64{}}
			base := time.Now()
			var offset atomic.Int64
			clock := func() time.Time { return base.Add(time.Since(base) + time.Duration(offset.Load())) }
			r := New(func(o *Options) {
				o.MeterProvider = skipProvider{m}
				o.Clock = clock
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
			})
			require.NoError(t, r.Err())
			mine := errors.New("mine")
			soon, cancel := context.WithDeadline(context.Background(), clock().Add(300*time.Millisecond))
			defer cancel()
			_, err := r.GetRetryToken(soon, mine)
			require.NoError(t, err)
			hour, cancelHour := context.WithDeadline(context.Background(), clock().Add(time.Hour))
			defer cancelHour()
			for _, other := range collidingWith(mine, 5) { // each evicts the one before; their RetryDelays never come
				offset.Add(int64(time.Millisecond))
				_, err := r.GetRetryToken(hour, other)
				require.NoError(t, err)
			}
			offset.Add(int64(after))
			unasked := collidingWith(mine, 1)[0] // a refused long-poll's: nothing handed off
			_, err = r.RetryDelay(1, unasked)
			require.NoError(t, err)
			var events []RetryEvent
			r.hooks.onRetry = func(e RetryEvent) { events = append(events, e) }
			m.mu.Lock()
			evicted := m.reasons["evicted"] // mine's and four others', counted as they were evicted
			m.mu.Unlock()
			_, err = r.RetryDelay(1, mine)
			require.NoError(t, err, "expect no check, which would need the lost deadline")
			require.Len(t, events, 1)
			m.mu.Lock()
			defer m.mu.Unlock()
			assert.Equal(t, evicted, m.reasons["evicted"], "expect the skipped check counted once, at its eviction")
			if after < handoffStale {
				assert.True(t, events[0].Unchecked, "expect the retry reported unchecked to its hook")
			} else {
				assert.False(t, events[0].Unchecked, "expect a RetryDelay a second after its put not taken for the evicted operation")
			}
		})
	}
}

// TestEachSkippedCheckIsCountedOnce: the skipped deadline checks' metric
// counts each retry whose check was due and could not be made once, however
// its hand-off was shared or evicted. Before, an operation whose hand-off
// was evicted and whose value was then handed off again (a shared error
// value) was counted at the eviction and again when its RetryDelay found
// the slot ambiguous; an evicted ambiguous pair was counted once for two;
// and a retry with no deadline, sharing its value with one that had one,
// was counted as a check it never had.
func TestEachSkippedCheckIsCountedOnce(t *testing.T) {
	type step struct {
		put      bool // GetRetryToken, else RetryDelay
		other    bool // the colliding value, else the shared one
		deadline bool
		later    bool // a second after the step before
	}
	putShared := step{put: true, deadline: true}
	putSharedNoDeadline := step{put: true}
	putOther := step{put: true, other: true} // no deadline: only the shared value's checks are due
	askShared := step{}
	askOther := step{other: true}
	cases := []struct {
		name    string
		steps   []step
		skipped int64 // retries whose check was due and not made
	}{
		{"evicted, then its value handed off again", []step{putShared, putOther, putShared, askShared, askShared, askOther}, 2},
		{"an ambiguous pair evicted", []step{putShared, putShared, putOther, askShared, askShared, askOther}, 2},
		{"an ambiguous pair, one with no deadline", []step{putShared, putSharedNoDeadline, askShared, askShared}, 1},
		{"an ambiguous pair", []step{putShared, putShared, askShared, askShared}, 2},
		{"an ambiguous pair, one evicted before the other's put", []step{putShared, putOther, putSharedNoDeadline, askShared, askShared, askOther}, 1},
		{"an ambiguous pair whose RetryDelays never come, evicted", []step{putShared, putShared, putOther, askOther}, 2},
		{"unasked for a second, replaced by its own value", []step{putShared, {put: true, later: true}, askShared}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &skipCounter{reasons: map[string]int64{}}
			base := time.Now()
			var offset atomic.Int64
			r := New(func(o *Options) {
				o.MeterProvider = skipProvider{m}
				o.Clock = func() time.Time { return base.Add(time.Duration(offset.Load())) }
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
			})
			require.NoError(t, r.Err())
			shared := errors.New("shared")
			other := collidingWith(shared, 1)[0]
			hour, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			unchecked := 0
			r.hooks.onRetry = func(e RetryEvent) {
				if e.Unchecked {
					unchecked++
				}
			}
			for _, s := range tc.steps {
				if s.later {
					offset.Add(int64(handoffStale))
				}
				err := shared
				if s.other {
					err = other
				}
				ctx := context.Background()
				if s.deadline {
					ctx = hour
				}
				if s.put {
					_, gerr := r.GetRetryToken(ctx, err)
					require.NoError(t, gerr)
				} else {
					_, derr := r.RetryDelay(1, err)
					require.NoError(t, derr)
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			assert.Equal(t, tc.skipped, m.reasons["evicted"]+m.reasons["unpaired"], "expect each skipped check counted once, got %v (%d retries reported unchecked)", m.reasons, unchecked)
		})
	}
}

// sharedFailure is a retryable error that operations share, as a sentinel
// a transport or wrapper returns is.
type sharedFailure struct{ name string }

func (e *sharedFailure) Error() string        { return e.name }
func (e *sharedFailure) RetryableError() bool { return true }

// yieldBeforeRetryDelay lets other goroutines run between the first
// retry's GetRetryToken and its RetryDelay, as a preemption there would;
// the second retry's calls follow each other, as they mostly do.
type yieldBeforeRetryDelay struct{ aws.RetryerV2 }

func (y yieldBeforeRetryDelay) RetryDelay(attempt int, err error) (time.Duration, error) {
	if attempt == 1 {
		runtime.Gosched()
	}
	return y.RetryerV2.RetryDelay(attempt, err)
}

// TestSkippedChecksUnderTheMiddlewareAddUp: operations with deadlines,
// through the SDK's retry middleware from many goroutines at once, fail
// with three retryable error values of one hand-off slot, which they
// share: their hand-offs are shared and evict each other. Every retry the
// retryer reported Unchecked had its deadline check skipped, and the
// skipped checks' metric counts each of them once, whatever the
// interleaving; none is counted that was checked.
func TestSkippedChecksUnderTheMiddlewareAddUp(t *testing.T) {
	m := &skipCounter{reasons: map[string]int64{}}
	var retries, unchecked atomic.Int64
	r := New(func(o *Options) {
		o.MeterProvider = skipProvider{m}
		o.BucketCapacity = 1 << 30 // no retry refused: a refusal's hand-off is no skipped check
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.OnRetry = func(e RetryEvent) {
			retries.Add(1)
			if e.Unchecked {
				unchecked.Add(1)
			}
		}
	})
	require.NoError(t, r.Err())
	first := &sharedFailure{name: "shared"}
	values := []error{first}
	for len(values) < 3 {
		if c := (&sharedFailure{name: "colliding"}); keyHash(c)%handoffSlots == keyHash(first)%handoffSlots {
			values = append(values, c)
		}
	}
	// The middleware yields between the first retry's GetRetryToken and
	// RetryDelay, so that the goroutines' hand-offs meet on one core too: with GOMAXPROCS=1
	// they met only where the scheduler preempted one between the two
	// calls, and ten rounds of none failed the test in 2 of 2 runs.
	attempt := retry.NewAttemptMiddleware(yieldBeforeRetryDelay{r}, func(in any) any { return in })
	const workers, operations = 8, 2_000
	// A round of operations where no hand-off met another's shows
	// nothing: on a machine busy elsewhere, the goroutines of one round
	// ran one after another (a run of 2026-12-07, with a benchmark on both
	// cores). Rounds follow until one does, ten at most.
	rounds := 0
	for ; rounds < 10 && unchecked.Load() == 0; rounds++ {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range operations {
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					calls := 0
					next := smithymiddle.FinalizeHandlerFunc(func(context.Context, smithymiddle.FinalizeInput) (smithymiddle.FinalizeOutput, smithymiddle.Metadata, error) {
						calls++
						if calls == 3 {
							return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, nil
						}
						return smithymiddle.FinalizeOutput{}, smithymiddle.Metadata{}, values[(w+i+calls)%len(values)]
					})
					in := smithymiddle.FinalizeInput{Request: &smithyhttp.Request{Request: &http.Request{Header: http.Header{}}}}
					_, _, err := attempt.HandleFinalize(ctx, in, next)
					cancel()
					if err != nil {
						t.Errorf("expect every operation to succeed on its third attempt, got %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	counted := m.reasons["evicted"] + m.reasons["unpaired"]
	require.Equal(t, int64(2*workers*operations*rounds), retries.Load(), "expect two retries per operation")
	require.Positive(t, unchecked.Load(), "expect the shared values to leave some checks unmade, or this test shows nothing")
	assert.Equal(t, unchecked.Load(), counted, "expect each retry reported Unchecked counted once in the metric, got %v", m.reasons)
	t.Logf("%d rounds, %d retries, %d unchecked, counted %v", rounds, retries.Load(), unchecked.Load(), m.reasons)
}

// onAClockTheTestMoves returns a retryer whose clock only the test moves
// (by offset), whose every backoff is 1 s, and the events of its retries.
func onAClockTheTestMoves() (r *Retryer, clock func() time.Time, offset *atomic.Int64, events *[]RetryEvent) {
	base := time.Now()
	offset, events = new(atomic.Int64), new([]RetryEvent)
	clock = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	r = New(func(o *Options) {
		o.Clock = clock
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
		o.OnRetry = func(e RetryEvent) { *events = append(*events, e) }
	})
	return r, clock, offset, events
}

// TestARetryDelayAfterTheSweepIsReportedUnchecked: a RetryDelay that comes
// after its hand-off was dropped (a goroutine descheduled past it) finds
// no deadline to check; it must say so, as after an eviction, not go ahead
// reported checked (helper-196: a 1 s backoff with 800 ms left went ahead,
// Unchecked false). Dropped by the sweep; evicted by another error, then
// its absent record swept; or evicted by another error when a second old,
// which leaves no absent record (helper-197).
func TestARetryDelayAfterTheSweepIsReportedUnchecked(t *testing.T) {
	for _, how := range []string{"swept", "evicted, then swept", "evicted when stale"} {
		t.Run(how, func(t *testing.T) {
			r, clock, offset, events := onAClockTheTestMoves()
			ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Hour))
			defer cancel()
			mine := errors.New("mine")
			_, err := r.GetRetryToken(ctx, mine)
			require.NoError(t, err)
			var colliding error
			for colliding == nil {
				if c := errors.New("other"); keyHash(c)%handoffSlots == keyHash(mine)%handoffSlots {
					colliding = c
				}
			}
			offset.Add(int64(4500 * time.Millisecond)) // the goroutine descheduled
			switch how {
			case "swept":
				r.sweepHandoff() // finds the hand-off
				r.sweepHandoff() // drops it
			case "evicted, then swept":
				offset.Add(-int64(4 * time.Second)) // evicted while fresh
				_, err = r.GetRetryToken(ctx, colliding)
				require.NoError(t, err)
				_, err = r.RetryDelay(1, colliding)
				require.NoError(t, err)
				*events = nil
				r.sweepHandoff()
				r.sweepHandoff()
			case "evicted when stale":
				_, err = r.GetRetryToken(context.Background(), colliding)
				require.NoError(t, err)
			}
			_, err = r.RetryDelay(1, mine)
			require.NoError(t, err)
			require.Len(t, *events, 1)
			assert.True(t, (*events)[0].Unchecked, "expect a retry whose hand-off was dropped reported unchecked")
		})
	}
}

// pendingHandoffs counts the entries waiting in r's hand-off table.
func pendingHandoffs(r *Retryer) int {
	n := 0
	for i := range tableOf(&r.handoff.slots) {
		s := tableOf(&r.handoff.slots)[i].Load()
		if s == nil {
			continue
		}
		s.mu.Lock()
		n += s.pending
		s.mu.Unlock()
	}
	return n
}

// panickingCounters is a MeterProvider whose counters panic.
type panickingCounters struct{ metrics.NopMeter }

func (p panickingCounters) Meter(string, ...metrics.MeterOption) metrics.Meter { return p }

func (panickingCounters) Int64Counter(string, ...metrics.InstrumentOption) (metrics.Int64Counter, error) {
	return panickingCounter{}, nil
}

type panickingCounter struct{}

func (panickingCounter) Add(context.Context, int64, ...metrics.RecordMetricOption) {
	panic("a meter's bug")
}

// TestALateRetryDelayTakesNoEntryPutAfterTheSweep: an operation's
// hand-off dropped by the sweep (its goroutine descheduled for seconds),
// then another operation's of the same error value: the late RetryDelay
// took the new entry as its own, and the hour-long operation was refused
// for the 300 ms one's deadline, while the 300 ms one found nothing
// (helper-249; operations sharing an error value must never swap
// deadlines). The keys were dropped with the entries, so a put that finds
// the record of forgotten operations live cannot tell whose its value is:
// its entry is ambiguous, and both operations are reported Unchecked.
func TestALateRetryDelayTakesNoEntryPutAfterTheSweep(t *testing.T) {
	cases := map[string]struct {
		timeout   time.Duration // the late operation's; 0: no deadline
		unchecked int           // the two retries reported Unchecked
	}{
		// Both checks skipped: the late one's own, and the 300 ms one's,
		// whose entry the late one took.
		"an hour-long deadline": {timeout: time.Hour, unchecked: 2},
		// One check skipped, the 300 ms one's, counted where it was
		// taken: the pairing is lost, the total is not. Both retries are
		// reported Unchecked: the 300 ms one, asking second, was reported
		// checked, its 1 s backoff let through (helper-256).
		"no deadline": {unchecked: 2},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var events []RetryEvent
			r := New(func(o *Options) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
				o.OnRetry = func(e RetryEvent) { events = append(events, e) }
			})
			shared := errors.New("shared")
			late := context.Background()
			if c.timeout > 0 {
				var cancel context.CancelFunc
				late, cancel = context.WithTimeout(late, c.timeout)
				defer cancel()
			}
			_, err := r.GetRetryToken(late, shared)
			require.NoError(t, err)
			r.sweepHandoff() // finds the late operation's hand-off
			r.sweepHandoff() // drops it
			short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancelShort()
			_, err = r.GetRetryToken(short, shared)
			require.NoError(t, err)
			_, errLate := r.RetryDelay(1, shared) // the late operation's
			assert.NoError(t, errLate, "expect the late operation not refused for the 300 ms one's deadline")
			_, err = r.RetryDelay(1, shared) // the 300 ms one's
			assert.NoError(t, err)
			require.Len(t, events, 2)
			unchecked := 0
			for _, e := range events {
				if e.Unchecked {
					unchecked++
				}
			}
			assert.Equal(t, c.unchecked, unchecked, "expect the checks skipped reported: which hand-off is whose is lost")
		})
	}
}

// TestALateRetryDelayLetsGoOfItsKeptValue: the operation whose hand-off
// the sweep dropped asks late, and is told its check was not made; its
// value, kept so that a later operation's entry is not taken for its own,
// is then let go of: the next entry of the value (the operation called
// again) is its own, and its deadline is checked. Kept, that entry was
// ambiguous, and every retry of a value used by one goroutine alone was
// reported Unchecked after a sweep had passed its RetryDelay (helper-249's
// stress, 2,384 times in a run).
func TestALateRetryDelayLetsGoOfItsKeptValue(t *testing.T) {
	var events []RetryEvent
	r := New(func(o *Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
		o.OnRetry = func(e RetryEvent) { events = append(events, e) }
	})
	mine := errors.New("mine")
	long, cancelLong := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLong()
	_, err := r.GetRetryToken(long, mine)
	require.NoError(t, err)
	r.sweepHandoff()
	r.sweepHandoff()               // drops the hand-off
	_, err = r.RetryDelay(1, mine) // late
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.True(t, events[0].Unchecked, "expect the late retry told its check was not made")

	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err = r.GetRetryToken(short, mine) // called again
	require.NoError(t, err)
	_, err = r.RetryDelay(1, mine)
	var gu *GiveUpError
	if assert.ErrorAs(t, err, &gu, "expect the entry its own: a 1 s backoff refused with 300 ms left") {
		assert.Equal(t, GiveUpDeadline, gu.Reason)
	}
}

// TestForgottenValuesKeepTheNewest: past its five places, the record of
// forgotten operations lets go of the oldest value; a value noted again
// keeps its place, and one asked for leaves a place free.
func TestForgottenValuesKeepTheNewest(t *testing.T) {
	var f forgottenOps
	errs := make([]error, 7)
	for i := range errs {
		errs[i] = fmt.Errorf("e%d", i)
	}
	for _, e := range errs[:6] {
		f.noteKey(e)
	}
	f.noteKey(errs[3]) // again: no new place
	assert.Equal(t, -1, f.indexOf(errs[0]), "expect the oldest let go")
	for i, e := range errs[1:6] {
		assert.Equal(t, i, f.indexOf(e), "expect %v kept in order", e)
	}
	f.askedBy(errs[2])
	assert.Equal(t, -1, f.indexOf(errs[2]))
	f.noteKey(errs[6]) // the place asked for, no value let go
	assert.Equal(t, 0, f.indexOf(errs[1]))
	assert.Equal(t, 4, f.indexOf(errs[6]))
	f.dropKeys()
	assert.False(t, f.holdsKeys())
}

// TestTheSweepDropsEverythingStale: the second sweep that finds a
// hand-off drops it, every one of them though counting their checks panics
// (a MeterProvider's bug: after the first, 49 of 50 were left, for good on
// an idle client: helper-196), and the timer stays set while anything is
// left; and no sweep reads the Retryer's Clock, which may be a test's
// unsynchronised fake, from the timer's goroutine (one that did raced
// such a clock in this module's own tests).
func TestTheSweepDropsEverythingStale(t *testing.T) {
	base := time.Now()
	var reads, offset atomic.Int64
	clock := func() time.Time { reads.Add(1); return base.Add(time.Duration(offset.Load())) }
	r := New(func(o *Options) {
		o.Clock = clock
		o.MeterProvider = panickingCounters{}
		o.BucketCapacity = 1000 // no budget give-up, which would count one
	})
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Hour))
	defer cancel()
	// Fifty errors in fifty slots: two in one would evict one at the put,
	// whose count (panicking) would reach the test (one run in a busy
	// make test did so).
	slots := map[uintptr]bool{}
	for len(slots) < 50 {
		e := errors.New("never asked for its delay")
		if slot := keyHash(e) % handoffSlots; !slots[slot] {
			slots[slot] = true
			_, err := r.GetRetryToken(ctx, e)
			require.NoError(t, err)
		}
	}
	require.Equal(t, 50, pendingHandoffs(r))
	before := reads.Load()
	r.sweepHandoff() // marks
	require.Positive(t, pendingHandoffs(r))
	assert.True(t, r.handoff.sweepArmed.Load(), "expect the timer set while hand-offs are left")
	r.sweepHandoff() // drops
	assert.Zero(t, pendingHandoffs(r), "expect every hand-off the sweep found before dropped")
	assert.Equal(t, before, reads.Load(), "expect no sweep to read the Clock")
}

// TestTheHandOffTableIsMadeByTheFirstRetry: New allocated the hand-off
// table's 256 slots (some 164 KB of its 225 KB) for a retryer that may
// never retry; the first GetRetryToken makes it. So with the slots that
// track the retries whose context may end (8 shards of 4 KB), each made by
// the first retry its shard tracks.
func TestTheHandOffTableIsMadeByTheFirstRetry(t *testing.T) {
	var before, after runtime.MemStats
	const news = 20 // what other goroutines allocate meanwhile is shared out
	kept := make([]*Retryer, news)
	runtime.ReadMemStats(&before)
	for i := range kept {
		kept[i] = New()
	}
	runtime.ReadMemStats(&after)
	r := kept[0]
	require.NoError(t, r.Err())
	// 12 KB since the tracked retries' slots are made by the first
	// tracked retry too (53 KB before).
	assert.Less(t, (after.TotalAlloc-before.TotalAlloc)/news, uint64(24<<10), "expect New to allocate under 24 KB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	release, err := r.GetAttemptToken(ctx)
	require.NoError(t, err)
	require.NoError(t, release(nil))
	failure := errors.New("first failure")
	_, err = r.RetryDelay(1, failure) // a take with nothing put finds nothing
	require.NoError(t, err)
	assert.Nil(t, r.handoff.slots.Load(), "expect no table before a retry token is taken")
	shardsMade := func() (n int) {
		for i := range r.tracked.shards {
			if r.tracked.shards[i].slots.Load() != nil {
				n++
			}
		}
		return n
	}
	_ = r.Remaining() // a sweep
	assert.Zero(t, shardsMade(), "expect no tracked retry's slots made before a retry token is taken, by a sweep either")
	_, err = r.GetRetryToken(ctx, failure)
	require.NoError(t, err)
	assert.NotNil(t, r.handoff.slots.Load(), "expect the table made by the first retry")
	handoffSlotsMade := 0
	for i := range r.handoff.slots.Load() {
		if r.handoff.slots.Load()[i].Load() != nil {
			handoffSlotsMade++
		}
	}
	assert.Equal(t, 1, handoffSlotsMade, "expect the hand-off slot of the first retry made, not the 256 (170 KB)")
	assert.Equal(t, 1, shardsMade(), "expect the slots of the shard that tracks the retry made (its context has a deadline)")
	_, err = r.RetryDelay(1, failure)
	require.NoError(t, err)
}

// TestALateOperationTakesNoNewerEntryOfItsValue: an operation descheduled
// over handoffStale between its GetRetryToken and its RetryDelay finds
// its entry replaced by a newer operation's of the same error value, and
// took that one as its own: refused for the newer one's deadline (an hour
// left, refused for 100 ms), the newer one's tokens refunded while its
// retry is sent, and the newer one's backoff let past its deadline and
// reported checked (helper-256). A replaced entry that had a deadline check
// due makes the new one ambiguous, as a forgotten operation's does: both
// are reported Unchecked, neither refused for the other's deadline.
func TestALateOperationTakesNoNewerEntryOfItsValue(t *testing.T) {
	r, clock, offset, events := onAClockTheTestMoves()
	shared := errors.New("shared")
	late, cancelLate := context.WithDeadline(context.Background(), clock().Add(time.Hour))
	defer cancelLate()
	_, err := r.GetRetryToken(late, shared)
	require.NoError(t, err)
	offset.Add(int64(handoffStale + 100*time.Millisecond)) // descheduled
	soon, cancelSoon := context.WithDeadline(context.Background(), clock().Add(100*time.Millisecond))
	defer cancelSoon()
	_, err = r.GetRetryToken(soon, shared)
	require.NoError(t, err)
	paid := r.Remaining()

	_, err = r.RetryDelay(1, shared) // the late operation's
	require.NoError(t, err, "expect the hour-long operation not refused for the other's 100 ms deadline")
	_, err = r.RetryDelay(1, shared) // the newer operation's
	require.NoError(t, err)
	require.Len(t, *events, 2)
	assert.True(t, (*events)[0].Unchecked, "expect the late operation's retry reported Unchecked")
	assert.True(t, (*events)[1].Unchecked, "expect the newer operation's 1 s backoff with 100 ms left reported Unchecked, its check not made")
	assert.Equal(t, paid, r.Remaining(), "expect no tokens refunded for a retry that is sent")
}

// TestAForgottenOperationWithoutADeadlineLeavesNoCheckReportedMade: an
// operation with no deadline, evicted and then forgotten by five other
// values of its slot, asks late, after a newer operation of its value with
// 100 ms left put its entry; the late one takes the (ambiguous) entry, and
// the newer one, finding nothing, was reported checked, its 1 s backoff let
// through: the slot's record of the forgotten had only the late
// operation's deadline, none (helper-256). The newer entry's check is
// counted among the forgotten's.
func TestAForgottenOperationWithoutADeadlineLeavesNoCheckReportedMade(t *testing.T) {
	var events []RetryEvent
	r := New(func(o *Options) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Second, nil })
		o.OnRetry = func(e RetryEvent) { events = append(events, e) }
	})
	value := errors.New("value")
	_, err := r.GetRetryToken(context.Background(), value) // no deadline
	require.NoError(t, err)
	for _, other := range collidingWith(value, 5) { // each evicts the one before; the fifth forgets the first
		_, err := r.GetRetryToken(context.Background(), other)
		require.NoError(t, err)
	}
	soon, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = r.GetRetryToken(soon, value) // the newer operation
	require.NoError(t, err)
	_, err = r.RetryDelay(1, value) // the forgotten one, late
	require.NoError(t, err)
	d, err := r.RetryDelay(1, value) // the newer one
	require.Len(t, events, 2)
	assert.True(t, err != nil || events[1].Unchecked, "expect the newer operation's 1 s backoff with 100 ms left refused or reported Unchecked; %v let through as checked", d)
}

// TestAStaleEntryLeavesOnlyTheNextEntryAmbiguous: an entry of a value gone
// stale with its deadline check due makes the next entry of its value
// ambiguous (see TestALateOperationTakesNoNewerEntryOfItsValue), not every
// entry of the value for another second: kept by value, the record did,
// and a neighbour's retries of a value shared with a client under
// retry.AddWithMaxBackoffDelay, whose entries go stale by design, were
// reported Unchecked 99.8% of the time, from 66.5% (helper-258).
func TestAStaleEntryLeavesOnlyTheNextEntryAmbiguous(t *testing.T) {
	r, clock, offset, events := onAClockTheTestMoves()
	shared := errors.New("shared")
	withDeadline := func() {
		t.Helper()
		ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Hour))
		defer cancel()
		_, err := r.GetRetryToken(ctx, shared)
		require.NoError(t, err)
		_, err = r.RetryDelay(1, shared)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), clock().Add(time.Hour))
	defer cancel()
	_, err := r.GetRetryToken(ctx, shared) // its RetryDelay never comes
	require.NoError(t, err)
	offset.Add(int64(handoffStale + 100*time.Millisecond))
	withDeadline() // the next: ambiguous
	withDeadline() // the one after: its own
	require.Len(t, *events, 2)
	assert.True(t, (*events)[0].Unchecked, "expect the entry after the stale one ambiguous")
	assert.False(t, (*events)[1].Unchecked, "expect the entry after that paired with its operation, its deadline checked")
}

// TestAStaleAmbiguousEntryWithACheckDueLeavesTheNextAmbiguous: two
// operations of one value hand off at once (ambiguous), the one without a
// deadline takes first, and the one with an hour's deadline is descheduled
// over handoffStale; a newer operation with 100 ms left then puts the
// value. Whether a replaced entry had a check due was read from the slot's
// uncounted checks, which the first take had counted: the newer entry was
// made as anyone's, the late operation took it and was refused for its
// 100 ms, and the newer one's 1 s backoff went ahead reported checked
// (helper-260). Each put's due check is kept with its reading.
func TestAStaleAmbiguousEntryWithACheckDueLeavesTheNextAmbiguous(t *testing.T) {
	r, clock, offset, events := onAClockTheTestMoves()
	shared := errors.New("shared")
	hour, cancelHour := context.WithDeadline(context.Background(), clock().Add(time.Hour))
	defer cancelHour()
	_, err := r.GetRetryToken(hour, shared) // descheduled before its RetryDelay
	require.NoError(t, err)
	_, err = r.GetRetryToken(context.Background(), shared) // no deadline
	require.NoError(t, err)
	_, err = r.RetryDelay(1, shared) // the one without a deadline
	require.NoError(t, err)
	offset.Add(int64(handoffStale + 100*time.Millisecond))
	soon, cancelSoon := context.WithDeadline(context.Background(), clock().Add(100*time.Millisecond))
	defer cancelSoon()
	_, err = r.GetRetryToken(soon, shared)
	require.NoError(t, err)
	_, err = r.RetryDelay(1, shared) // the hour-long one, late
	require.NoError(t, err, "expect the hour-long operation not refused for the newer one's 100 ms")
	_, err = r.RetryDelay(1, shared) // the newer one
	require.NoError(t, err)
	last := (*events)[len(*events)-1]
	assert.True(t, last.Unchecked, "expect the newer operation's 1 s backoff with 100 ms left reported Unchecked, its check not made")
}
