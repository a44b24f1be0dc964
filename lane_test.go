package jitterretry

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIdleLimiterLaneIsForgotten: a partition whose limiter learnt a rate
// and then went idle has nothing left to remember once the limiter's own
// idle reset would start it over; the partition table forgets it then,
// not only when the table is full.
//
// The limiter may be that of an SDK service in the partition (see
// lanes.getFor): the partition is kept while it remembers, and
// forgotten with it.
func TestIdleLimiterLaneIsForgotten(t *testing.T) {
	for _, svc := range []string{"", "DynamoDB"} {
		t.Run("service "+svc, func(t *testing.T) {
			now := t0
			r := New(func(o *Options) {
				o.Clock = func() time.Time { return now }
				o.SendRate = &SendRateOptions{}
				o.PartitionKey = PartitionFromContext
			})
			require.NoError(t, r.Err())
			ctx := WithPartition(context.Background(), "a")
			if svc != "" {
				// The partition's own limiter is its first service's: the
				// second's is a lane of its own.
				r.lanes.get(awsmiddle.SetServiceID(ctx, "STS"))
				ctx = awsmiddle.SetServiceID(ctx, svc)
			}
			a := r.lanes.get(ctx)
			require.Equal(t, svc != "", a.bucketOf != nil, "expect the service's own lane")

			// Throttled for three seconds, the limiter learns a rate.
			sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(200), 0))
			c := sim.add(a.sender, 16, 0)
			c.stop = 3 * time.Second
			sim.run(3 * time.Second)
			require.False(t, math.IsInf(a.sender.currentRate(), 1), "expect a limit after throttles")

			part, _ := r.lanes.lookup("a")
			require.NotNil(t, part)
			assert.False(t, part.idle(), "expect the partition to have something to remember while its limiter does")

			// Idle since; other partitions come and go, a sweep interval apart.
			now = sim.now
			for _, key := range []string{"b", "c", "d"} {
				now = now.Add(partitionIdleTimeout)
				r.lanes.get(WithPartition(context.Background(), key))
			}
			_, kept := r.lanes.lookup("a")
			assert.False(t, kept, "expect the idle partition forgotten")
		})
	}
}

// TestPartitionsAreForgottenAfterAClockSteppedBack: a custom clock that
// steps back (a wall clock corrected) must not stop the sweeps that forget
// idle partitions for the length of the step: the interval starts over from
// the new time (an outside review; an hour's step held them an hour more).
func TestPartitionsAreForgottenAfterAClockSteppedBack(t *testing.T) {
	now := t0
	r := New(func(o *Options) {
		o.Clock = func() time.Time { return now }
		o.PartitionKey = PartitionFromContext
	})
	require.NoError(t, r.Err())
	r.lanes.get(WithPartition(context.Background(), "a"))
	now = now.Add(-time.Hour) // stepped back
	for _, key := range []string{"b", "c", "d"} {
		now = now.Add(partitionIdleTimeout)
		r.lanes.get(WithPartition(context.Background(), key))
	}
	_, kept := r.lanes.lookup("a")
	assert.False(t, kept, "expect the idle partition forgotten within three sweep intervals of the step")
}

// TestFullPartitionTableForgetsTheLeastRecentlyUsed: beyond maxPartitions
// keys, the lane forgotten for a new key is the least recently used one,
// so a key in steady use keeps its lane (and its drained bucket) however
// many other keys come and go.
func TestFullPartitionTableForgetsTheLeastRecentlyUsed(t *testing.T) {
	r := New(func(o *Options) { o.PartitionKey = PartitionFromContext })
	require.NoError(t, r.Err())
	busy := func(key string) *lane { return busyPartition(t, r, key) }
	hot := busy("hot")
	for i := range 3 * maxPartitions {
		busy(fmt.Sprintf("tenant-%d", i))
		if i%100 == 0 {
			require.True(t, hot == r.lanes.get(WithPartition(context.Background(), "hot")),
				"expect the hot key's lane kept after %d new keys", i)
		}
	}
	assert.LessOrEqual(t, len(r.lanes.m), maxPartitions)
}

// TestFullPartitionTableForgetsABatchOfTheLeastRecentlyUsed: a new key that
// finds the table full of lanes with something to remember forgets the
// evictBatch least recently used at once, so that the keys after it need
// no scan; the others, and one just used, stay.
func TestFullPartitionTableForgetsABatchOfTheLeastRecentlyUsed(t *testing.T) {
	r := New(func(o *Options) { o.PartitionKey = PartitionFromContext })
	require.NoError(t, r.Err())
	ctx := func(i int) context.Context { return WithPartition(context.Background(), fmt.Sprintf("tenant-%d", i)) }
	lanes := make([]*lane, maxPartitions)
	for i := range lanes {
		lanes[i] = r.lanes.get(ctx(i))
		_, _, _, ok := lanes[i].take(context.Background(), 5, false) // nothing idle to forget
		require.True(t, ok)
	}
	require.Len(t, r.lanes.m, maxPartitions)
	require.True(t, lanes[0] == r.lanes.get(ctx(0)), "expect tenant-0 kept while the table has room")
	r.lanes.get(ctx(maxPartitions)) // a new key: tenant-0 was used after every other
	assert.Len(t, r.lanes.m, maxPartitions-evictBatch+1)
	for i, l := range lanes {
		_, kept := r.lanes.m[l.key]
		assert.Equal(t, i == 0 || i > evictBatch, kept, "lane %d", i)
	}
}

// TestAFullTableForgetsTheIdleKeysUnusedSinceItsLastSweep: at a full
// table of idle lanes (full buckets), a sweep comes with every evictBatch
// new keys, and forgets every idle lane unused since the sweep before,
// however recently before: the rule the README and Options.PartitionKey
// state (they said only the 64 least recently used went: helper-183). A
// lane used since is kept, idle or not.
func TestAFullTableForgetsTheIdleKeysUnusedSinceItsLastSweep(t *testing.T) {
	r := New(func(o *Options) { o.PartitionKey = PartitionFromContext })
	require.NoError(t, r.Err())
	ctx := func(i int) context.Context { return WithPartition(context.Background(), fmt.Sprintf("tenant-%d", i)) }
	for i := range maxPartitions {
		r.lanes.get(ctx(i))
	}
	r.lanes.get(ctx(maxPartitions)) // the first sweep: no lane was unused since one before
	require.Len(t, r.lanes.m, maxPartitions-evictBatch+1, "expect the 64 least recently used gone")
	for i := 100; i < 200; i++ {
		r.lanes.get(ctx(i)) // used since that sweep
	}
	next := maxPartitions + 1
	for ; len(r.lanes.m) < maxPartitions; next++ {
		r.lanes.get(ctx(next))
	}
	r.lanes.get(ctx(next)) // the next sweep
	// Kept: the 100, the first sweep's new key and the evictBatch-1 that
	// filled the table, and this sweep's new key.
	assert.Equal(t, 100+evictBatch+1, len(r.lanes.m), "expect only the lanes used since the first sweep kept")
	for i := 100; i < 200; i++ {
		_, kept := r.lanes.m[fmt.Sprintf("tenant-%d", i)]
		assert.True(t, kept, "tenant-%d", i)
	}
}

// TestLimiterHearsAConflictAsAnAnswerNotThrottled: a conflict is the
// service's answer at its usual load (the request was taken, and DynamoDB
// spent its capacity), so the limiter counts it as a success: left out, a
// hot item's conditional writes were no answers at all, the rate could
// never grow past twice the few accepted (an outside review: 32 writers on
// one item ran at 78 requests a second where the table took 100 writes,
// 6.9 requests per increment against 2.7 without the limiter). A
// transaction cancelled for throttles only is a throttle to the limiter
// (a review of the first form of this fix: counting the conflicts' and not
// these, a transactional client at capacity heard only answers that said
// all was well); one cancelled for races and throttles at once, and a 5xx,
// say nothing of the rate. The caller's throttle checks come first, for a
// conflict's code too.
func TestLimiterHearsAConflictAsAnAnswerNotThrottled(t *testing.T) {
	coded := func(code string) error { return &smithy.GenericAPIError{Code: code} }
	transaction := func(reasons ...string) error {
		return sdkShaped{CancellationReasons: codes(reasons...)}
	}
	cases := []struct {
		describe string
		err      error
		ok, thr  int
	}{
		{"a success", nil, 1, 0},
		{"a conflict", coded("ConditionalCheckFailedException"), 1, 0},
		{"a transaction conflict", coded("TransactionConflictException"), 1, 0},
		{"a transaction cancelled for conflicts", transaction("None", "ConditionalCheckFailed"), 1, 0},
		{"a throttle", coded("ProvisionedThroughputExceededException"), 0, 1},
		{"a transaction cancelled for throttles", transaction("ThrottlingError", "None"), 0, 1},
		{"a transaction cancelled for a race and a throttle", transaction("TransactionConflict", "ThrottlingError"), 0, 0},
		{"a 5xx", &smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.describe, func(t *testing.T) {
			r := New(func(o *Options) {
				o.Clock = func() time.Time { return t0 }
				o.SendRate = &SendRateOptions{}
			})
			require.NoError(t, r.Err())
			release, err := r.GetAttemptToken(context.Background())
			require.NoError(t, err)
			require.NoError(t, release(c.err))
			w := windowOf(r.lanes.main.sender)
			assert.Equal(t, c.ok, w.ok, "expect the successes counted after %s", c.describe)
			assert.Equal(t, c.thr, w.thr, "expect the throttles counted after %s", c.describe)
		})
	}
	t.Run("the caller's check that a throttled transaction is no throttle", func(t *testing.T) {
		r := New(func(o *Options) {
			o.Clock = func() time.Time { return t0 }
			o.SendRate = &SendRateOptions{}
			o.Throttles = append([]retry.IsErrorThrottle{retry.IsErrorThrottleFunc(func(error) aws.Ternary { return aws.FalseTernary })}, o.Throttles...)
		})
		require.NoError(t, r.Err())
		release, err := r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(transaction("ThrottlingError", "None")))
		w := windowOf(r.lanes.main.sender)
		assert.Equal(t, 0, w.ok+w.thr, "expect it not counted, as Do classes it transient (a review)")
	})
	t.Run("the caller's throttle check on a conflict's code", func(t *testing.T) {
		r := New(func(o *Options) {
			o.Clock = func() time.Time { return t0 }
			o.SendRate = &SendRateOptions{}
			o.Throttles = append(o.Throttles, retry.ThrottleErrorCode{Codes: map[string]struct{}{"TransactionConflictException": {}}})
		})
		require.NoError(t, r.Err())
		release, err := r.GetAttemptToken(context.Background())
		require.NoError(t, err)
		require.NoError(t, release(coded("TransactionConflictException")))
		assert.Equal(t, 1, windowOf(r.lanes.main.sender).thr, "expect the caller's throttle check to decide")
	})
}

// TestLongPartitionKeysAreKeptShort: a key longer than maxKeyLen is kept as
// a short prefix and a hash of the whole, the same for the same key and
// different for keys that differ only past the prefix, so that the 1024
// keys kept hold little memory whatever their length (1024 keys of 256 KB
// kept 266 MB before: an outside review).
func TestLongPartitionKeysAreKeptShort(t *testing.T) {
	r := New(func(o *Options) { o.PartitionKey = PartitionFromContext })
	require.NoError(t, r.Err())
	long := func(tail string) string { return strings.Repeat("é", 40_000) + tail } // 80 KB; a cut at 64 bytes would split an é
	get := func(key string) *lane { return r.lanes.get(WithPartition(context.Background(), key)) }

	a, b := get(long("a")), get(long("b"))
	assert.Same(t, a, get(long("a")), "expect the same key to find the same partition")
	assert.NotSame(t, a, b, "expect keys that differ past the prefix apart")
	assert.LessOrEqual(t, len(a.key), maxKeyLen)
	assert.True(t, utf8.ValidString(a.key), "expect whole characters in %.300q", a.key)
	assert.True(t, strings.HasPrefix(a.key, strings.Repeat("é", 32)+"…"), "expect a readable prefix in %.300q", a.key)
	ctxA := WithPartition(context.Background(), long("a"))
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.lanes.get(ctxA) }), "expect a long key found again without a copy of it")
	assert.Less(t, len(get(long(strings.Repeat("\xff", 99))).key), shortKeyLen+1, "expect invalid bytes dropped from the prefix")
	short := strings.Repeat("k", maxKeyLen)
	assert.Equal(t, short, get(short).key, "expect a key of maxKeyLen bytes kept as it is")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range maxPartitions {
		get(long(strconv.Itoa(i)))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grew, int64(16<<20), "expect 1024 keys of 80 KB to keep little of them (80 MB kept whole), grew %d bytes", grew)
}

// TestPartitionKeysNotValidUTF8AreKeptShort: a key that is not valid
// UTF-8, however short, is kept as its valid prefix and a hash of the
// whole, as a long key is: named as it was, in metrics, it made every
// Prometheus scrape fail (examples/internal/telemetry's
// TestAPartitionKeyNotValidUTF8KeepsTheScrapeWorking has the scrape).
func TestPartitionKeysNotValidUTF8AreKeptShort(t *testing.T) {
	r := New(func(o *Options) { o.PartitionKey = PartitionFromContext })
	require.NoError(t, r.Err())
	get := func(key string) *lane { return r.lanes.get(WithPartition(context.Background(), key)) }

	a, b := get("tenant-\xff"), get("tenant-\xfe")
	assert.Same(t, a, get("tenant-\xff"), "expect the same key to find the same partition")
	assert.NotSame(t, a, b, "expect keys that differ in their invalid bytes apart")
	assert.True(t, utf8.ValidString(a.key), "expect %q valid", a.key)
	assert.True(t, strings.HasPrefix(a.key, "tenant-…"), "expect the valid prefix in %q", a.key)
	assert.True(t, utf8.ValidString(get("\xff").key), "expect a key of one invalid byte named in valid UTF-8")
	assert.Equal(t, "tenant-é", get("tenant-é").key, "expect a valid key kept as it is")
	ctxA := WithPartition(context.Background(), "tenant-\xff")
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.lanes.get(ctxA) }), "expect such a key found again without a copy of it")
}

// TestGetInitialTokenTurnsPacingOffForAMinute: the older interface's
// attempts never wait at the limiter, so for a minute after the last of
// them no retry is left to its pacing or sent ahead of first attempts;
// until 2026-12-06 one such attempt turned both off for good.
func TestGetInitialTokenTurnsPacingOffForAMinute(t *testing.T) {
	now := t0
	r := New(func(o *Options) {
		o.SendRate = &SendRateOptions{}
		o.Clock = func() time.Time { return now }
	})
	require.True(t, r.lanes.attemptsWait(), "expect retries paced before any GetInitialToken")
	r.GetInitialToken()
	now = now.Add(unpacedFor / 2)
	r.GetInitialToken() // refreshes the minute
	now = now.Add(unpacedFor)
	assert.False(t, r.lanes.attemptsWait(), "expect a minute counted from the last call")
	now = now.Add(unpacedStamp)
	assert.True(t, r.lanes.attemptsWait(), "expect pacing back a minute after the last call")
	now = now.Add(-time.Hour) // a clock stepped back
	r.GetInitialToken()
	assert.False(t, r.lanes.attemptsWait())
}

// TestGetInitialTokenUnderAClockAtTheZeroTime: a custom Clock that returns
// the zero time (year 1, whose UnixNano overflows) still turns the pacing
// off, and back on a minute later, without a panic.
func TestGetInitialTokenUnderAClockAtTheZeroTime(t *testing.T) {
	var now time.Time
	r := New(func(o *Options) {
		o.SendRate = &SendRateOptions{}
		o.Clock = func() time.Time { return now }
	})
	r.GetInitialToken()
	assert.False(t, r.lanes.attemptsWait())
	now = now.Add(unpacedFor + time.Nanosecond)
	assert.True(t, r.lanes.attemptsWait())
}

// TestGetInitialTokenMinuteAfterAClockSteppedBack: a custom Clock stepped
// back an hour behind the stamp of the last GetInitialToken moves the
// stamp back with it once seen: pacing returns a minute later, not after
// the hour and the minute (helper-159).
func TestGetInitialTokenMinuteAfterAClockSteppedBack(t *testing.T) {
	now := t0
	r := New(func(o *Options) {
		o.SendRate = &SendRateOptions{}
		o.Clock = func() time.Time { return now }
	})
	r.GetInitialToken()
	now = now.Add(-time.Hour)
	assert.False(t, r.lanes.attemptsWait(), "expect the minute to count from the step")
	now = now.Add(unpacedFor + time.Nanosecond)
	assert.True(t, r.lanes.attemptsWait(), "expect pacing back a minute after the step was seen")
}

// TestAFullTableKeepsAPartitionWhoseCallersWait: a partition whose limiter
// has callers waiting in its queue is not forgotten by a full table, however
// many new keys come (helper-200: under a churn of 1,100 new keys the hot
// key got a second limiter beside the one its callers waited in, and sent
// 20/s at a MaxRate of 10/s); once they are gone, it may be.
func TestAFullTableKeepsAPartitionWhoseCallersWait(t *testing.T) {
	r, now := pacedPartitions(t)
	hot := r.lanes.get(WithPartition(context.Background(), "hot"))
	var places []sendPlace
	for range 5 {
		p, _, _, _ := hot.sender.reserve(nil, false)
		places = append(places, p)
	}
	require.True(t, hot.sender.inUse(), "expect callers waiting at 10/s")
	churn := func(from int) {
		for i := range 3 * maxPartitions {
			busyPartition(t, r, fmt.Sprintf("tenant-%d", from+i))
		}
	}
	churn(0)
	assert.True(t, hot == r.lanes.get(WithPartition(context.Background(), "hot")), "expect the waiting callers' partition kept")
	assert.LessOrEqual(t, len(r.lanes.m), maxPartitions+1)

	for _, p := range places {
		hot.sender.cancel(p)
	}
	*now = now.Add(2 * heldBackFor)
	require.False(t, hot.sender.inUse())
	churn(3 * maxPartitions)
	_, kept := r.lanes.lookup("hot")
	assert.False(t, kept, "expect the partition forgotten once nobody waits")
}

// TestAFullTableOfWaitingPartitionsSweepsOnceInABatch: a table that holds
// more than maxPartitions lanes because their callers wait sweeps once in
// evictBatch new keys, not for every new key (helper-201: a sort and every
// limiter's lock under the table's lock, 961 µs for each new key with 3,000
// lanes in use); and a partition whose callers were held back but left is
// not kept for it, so keys churned through held-back callers keep the
// table at its bound (2,001 lanes, none waiting, when a hold in the last
// second kept a lane).
func TestAFullTableOfWaitingPartitionsSweepsOnceInABatch(t *testing.T) {
	r, now := pacedPartitions(t)
	key := func(i int) context.Context {
		*now = now.Add(time.Microsecond) // a sweep's time tells it from the one before
		return WithPartition(context.Background(), fmt.Sprintf("tenant-%d", i))
	}
	// Held back, then gone: each key's second caller waits, and leaves.
	for i := range 3 * maxPartitions {
		l := r.lanes.get(key(i))
		first, _, _, _ := l.sender.reserve(nil, false)
		second, wait, _, _ := l.sender.reserve(nil, false)
		require.Positive(t, wait)
		l.sender.cancel(second)
		_ = first
	}
	assert.LessOrEqual(t, len(r.lanes.m), maxPartitions, "expect no lane kept with nobody waiting")

	// Waiting: every key's second caller stays in its queue.
	for i := range 2 * maxPartitions {
		l := r.lanes.get(key(3*maxPartitions + i))
		l.sender.reserve(nil, false)
		l.sender.reserve(nil, false)
	}
	require.Greater(t, len(r.lanes.m), maxPartitions)
	sweeps, last := 0, r.lanes.lastSweep
	const more = 10 * evictBatch
	for i := range more {
		r.lanes.get(key(5*maxPartitions + i))
		if r.lanes.lastSweep != last {
			sweeps, last = sweeps+1, r.lanes.lastSweep
		}
	}
	assert.LessOrEqual(t, sweeps, more/evictBatch+1, "expect a sweep once in %d new keys", evictBatch)
}

// TestAFullTableWithNobodyWaitingStaysAtItsBound: the rule that an
// over-full table sweeps once in evictBatch new keys is for a table whose
// last sweep could not make room; counted from any sweep, an idle sweep
// just below the bound let the table hold 1078 lanes with nobody waiting
// (helper-202).
func TestAFullTableWithNobodyWaitingStaysAtItsBound(t *testing.T) {
	r, now := pacedPartitions(t)
	n := 0
	add := func() {
		*now = now.Add(time.Microsecond)
		busyPartition(t, r, fmt.Sprintf("tenant-%d", n))
		n++
	}
	for range maxPartitions - 10 {
		add()
	}
	*now = now.Add(partitionIdleTimeout)
	add() // an idle sweep, which forgets nothing
	for range 100 {
		add()
		require.LessOrEqual(t, len(r.lanes.m), maxPartitions, "expect the bound kept with nobody waiting")
	}
}

// pacedPartitions returns a retryer with a partition per WithPartition key,
// each paced at 10 requests a second by its send-rate limiter, on a clock
// that moves only when the test moves it.
func pacedPartitions(t *testing.T) (*Retryer, *time.Time) {
	t.Helper()
	now := t0
	r := New(func(o *Options) {
		o.Clock = func() time.Time { return now }
		o.PartitionKey = PartitionFromContext
		o.SendRate = &SendRateOptions{InitialRate: 10, MaxRate: 10}
	})
	require.NoError(t, r.Err())
	return r, &now
}

// busyPartition returns the lane of key after taking a retry's tokens from
// it: a bucket not full, nothing idle for a sweep to forget.
func busyPartition(t *testing.T, r *Retryer, key string) *lane {
	t.Helper()
	l := r.lanes.get(WithPartition(context.Background(), key))
	_, _, _, ok := l.take(context.Background(), 5, false)
	require.True(t, ok)
	return l
}

// TestALaneTellsItsLimiterHowLongThrottlesTake: a timed attempt answered
// with a throttle gives the partition's limiter its time, which the
// attempt time learnt from successes does not say (see
// sendRate.noteThrottleTime, a moving average from 0); a success's, or a
// 500's, does not.
func TestALaneTellsItsLimiterHowLongThrottlesTake(t *testing.T) {
	at := time.Now()
	r := New(func(o *Options) {
		o.SendRate = &SendRateOptions{}
		o.Clock = func() time.Time { return at }
	})
	require.NoError(t, r.Err())
	attempt := func(took time.Duration, err error) {
		release, terr := r.GetAttemptToken(context.Background())
		require.NoError(t, terr)
		at = at.Add(took)
		_ = release(err)
	}
	for range 5 {
		attempt(2*time.Millisecond, nil)
	}
	attempt(300*time.Millisecond, &smithy.GenericAPIError{Code: "InternalServerError"})
	l := r.lanes.main.sender
	l.mu.Lock()
	assert.Zero(t, l.throttleRTT, "expect no throttle's time from successes and a 500")
	l.mu.Unlock()
	attempt(200*time.Millisecond, &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"})
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, 50*time.Millisecond, l.throttleRTT, "expect a quarter of the first throttle's time: a moving average from 0")
}

// TestServiceLanesAreBounded: with the send-rate limiter, each SDK
// service's attempts in a partition have a limiter of their own, over the
// partition's bucket (the first service's the partition's own); a caller
// that makes up service IDs by the thousand gets, for those past the
// bound (maxSharedServices in the shared partition, maxPartitionServices
// in another), one lane with no limiter over the partition's bucket, not
// a lane each, nor the first service's limiter.
func TestServiceLanesAreBounded(t *testing.T) {
	r := serviceLanesRetryer(t)
	inService := func(ctx context.Context, s string) context.Context {
		return awsmiddle.SetServiceID(ctx, s)
	}
	shared := context.Background()
	ddb, sts := r.lanes.get(inService(shared, "DynamoDB")), r.lanes.get(inService(shared, "STS"))
	require.Same(t, r.lanes.main, ddb, "expect the partition's own limiter its first service's")
	require.NotSame(t, ddb, sts, "expect a limiter for each service")
	assert.NotSame(t, ddb.sender, sts.sender)
	assert.Same(t, r.lanes.main.bucket, ddb.bucket, "expect one bucket")
	assert.Same(t, r.lanes.main.bucket, sts.bucket, "expect one bucket")
	assert.Same(t, ddb, r.lanes.get(inService(shared, "DynamoDB")), "expect the service's lane kept")
	west := r.lanes.get(awsmiddle.SetRegion(inService(shared, "DynamoDB"), "eu-west-1"))
	assert.NotSame(t, ddb.sender, west.sender, "expect a limiter for each region of a service")
	assert.Same(t, r.lanes.main.bucket, west.bucket, "expect one bucket")
	assert.Same(t, west, r.lanes.get(awsmiddle.SetRegion(inService(shared, "DynamoDB"), "eu-west-1")), "expect the region's lane kept")
	assert.Same(t, r.lanes.main, r.lanes.get(shared), "expect the shared lane outside an SDK operation")

	// Callers racing to a new service find one lane.
	var wg sync.WaitGroup
	found := make([][4]*lane, 8)
	for g := range found {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				found[g][i] = r.lanes.get(inService(shared, fmt.Sprint("raced-", i)))
			}
		}()
	}
	wg.Wait()
	for g := range found {
		assert.Equal(t, found[0], found[g], "expect one lane per service whoever made it")
	}

	for i := range 1000 {
		r.lanes.get(inService(shared, fmt.Sprint("made-up-", i)))
	}
	assert.Len(t, r.lanes.main.serviceLanes(), maxSharedServices, "expect the bound on the services past the first")
	past := r.lanes.get(inService(shared, "made-up-999"))
	assert.Same(t, past, r.lanes.get(inService(shared, "made-up-998")), "expect one lane for the services past the bound")
	assert.True(t, past.sender == nil, "expect the services past the bound unpaced, not behind the first service's limiter")
	assert.Same(t, r.lanes.main.bucket, past.bucket, "expect the partition's bucket past the bound")
	assert.Same(t, ddb, r.lanes.get(inService(shared, "DynamoDB")), "expect the lanes made before kept")

	// A partition: its services' lanes share its bucket and carry its name.
	orders := WithPartition(shared, "orders")
	ordersDDB := r.lanes.get(inService(orders, "DynamoDB"))
	ordersSTS := r.lanes.get(inService(orders, "STS"))
	part, _ := r.lanes.lookup("orders")
	require.NotNil(t, part)
	assert.Same(t, part, ordersDDB, "expect the partition's own limiter its first service's")
	assert.NotSame(t, ordersDDB.sender, ordersSTS.sender, "expect a limiter for each service of the partition")
	assert.NotSame(t, ddb.sender, ordersDDB.sender, "expect the partition's limiters its own")
	for _, l := range []*lane{ordersDDB, ordersSTS} {
		assert.Same(t, part.bucket, l.bucket, "expect the partition's bucket")
		assert.Equal(t, "orders", l.key, "expect the partition's name")
	}
	for i := range 100 {
		r.lanes.get(inService(orders, fmt.Sprint("made-up-", i)))
	}
	assert.Len(t, part.serviceLanes(), maxPartitionServices)
	past = r.lanes.get(inService(orders, "made-up-99"))
	assert.True(t, past.sender == nil, "expect the services past the bound unpaced")
	assert.Same(t, part.bucket, past.bucket, "expect the partition's bucket past the bound")
	assert.Equal(t, "orders", past.key, "expect the partition's name")
}

// serviceLanesRetryer returns a Retryer with the send-rate limiter whose
// partition is WithPartition's key alone: "" (the shared partition) where
// none was set, not the operation's name, which PartitionFromContext
// falls back to.
func serviceLanesRetryer(t *testing.T) *Retryer {
	t.Helper()
	r := New(func(o *Options) {
		o.SendRate = &SendRateOptions{}
		o.PartitionKey = func(ctx context.Context) string {
			key, _ := ctx.Value(partitionKey{}).(string)
			return key
		}
	})
	require.NoError(t, r.Err())
	return r
}
