package jitterretry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// A goroutine that panics kills the whole test binary and hides which test
// caused it, and a test that edits the SDK's package-level state would leak
// it into the others. Such tests (the stress tests, a contract test) run in
// a child process: the same test binary, asked to run only that test; the
// parent reports the child's output when it fails.
const stressEnv = "JITTERRETRY_STRESS_CHILD"

// runInChild runs t in a child process when called from the parent, and
// reports whether this process is the child.
func runInChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(stressEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), stressEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("expect %s to pass in its child process, got %v:\n%s", t.Name(), err, out)
	}
	return false
}

// TestStressCancelsAndDeadlines races 100,000 retry decisions against
// contexts cancelled from other goroutines and deadlines firing at any
// moment: before GetRetryToken, between it and RetryDelay, during the
// backoff, after the release. Nothing may panic, no token may be created or
// lost: once every operation has ended and the abandoned retries are
// reclaimed, the bucket is full again.
func TestStressCancelsAndDeadlines(t *testing.T) {
	if !runInChild(t) {
		return
	}
	const operations = 100_000
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Microsecond, 50*time.Microsecond, time.Millisecond
		o.BucketCapacity = 2_000_000 // every retry is paid, none refused
	})
	require.NoError(t, r.Err())
	shared := serverErr() // also race operations that share one error value

	var wg sync.WaitGroup
	var next, failed atomic.Int64
	workers := 4 * runtime.GOMAXPROCS(0)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > operations {
					return
				}
				if decideUnderFire(r, i, shared) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// A retry that was sent and failed has spent its 14 tokens, as in the
	// SDK; every other retry gets them back, a cut backoff once a sweep has
	// seen its context done for the grace period.
	// A release later than the grace period finds its tokens refunded
	// already (on a loaded machine a goroutine can wait that long): the
	// bucket may then hold a few tokens more, never fewer, and never more
	// than its capacity.
	want := uint(2_000_000 - 14*failed.Load())
	_ = r.Remaining()
	time.Sleep(200 * time.Millisecond)
	got := r.Remaining()
	assert.GreaterOrEqual(t, got, want, "expect no token lost: only the sent and failed retries' tokens spent")
	assert.LessOrEqual(t, got, uint(2_000_000), "expect no token created")
	t.Logf("%d operations, %d retries sent and failed, %d tokens beyond the exact count", operations, failed.Load(), got-want)
}

// decideUnderFire runs one retry decision, as the SDK's middleware does,
// while its context is cancelled or times out at a point chosen by i. It
// reports whether the retry was sent and failed, spending its tokens.
func decideUnderFire(r *jitterretry.Retryer, i int64, shared error) bool {
	var ctx context.Context
	var cancel context.CancelFunc
	switch i % 4 {
	case 0:
		ctx, cancel = context.WithCancel(context.Background())
	case 1:
		ctx, cancel = context.WithTimeout(context.Background(), time.Duration(i%50)*time.Microsecond)
	case 2:
		ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	default:
		ctx, cancel = context.WithDeadline(context.Background(), time.Now()) // already over
	}
	defer cancel()
	if i%7 == 0 {
		go cancel() // races every step below
	}
	opErr := shared
	if i%2 == 0 {
		opErr = serverErr()
	}
	if !r.IsErrorRetryable(opErr) {
		panic("expect a 500 to be retryable")
	}
	release, err := r.GetRetryToken(ctx, opErr)
	if err != nil {
		return false // refused before any token was taken
	}
	d, err := r.RetryDelay(1, opErr)
	if err != nil {
		return false // refused and refunded: the middleware drops the release
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false // the middleware drops the release of a cut backoff
	case <-t.C:
	}
	// The retry is sent: three in five succeed (their cost comes back),
	// two fail.
	var outcome error
	if i%5 < 2 {
		outcome = opErr
	}
	_ = release(outcome)
	return outcome != nil
}

// TestStressDoUnderCancel runs Do loops whose contexts end at random points,
// with conflicts and transient errors, from many goroutines.
func TestStressDoUnderCancel(t *testing.T) {
	if !runInChild(t) {
		return
	}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Microsecond, 10*time.Microsecond, 100*time.Microsecond
		o.BucketCapacity = 1_000_000
	})
	var wg sync.WaitGroup
	var done atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((g*i)%300)*time.Microsecond)
				calls := 0
				err := jitterretry.Do(ctx, r, func(context.Context) error {
					calls++
					switch calls % 3 {
					case 1:
						return conflictErr()
					case 2:
						return serverErr()
					}
					return nil
				}, func(o *jitterretry.DoOptions) { o.MaxAttempts = jitterretry.UnlimitedAttempts })
				cancel()
				var gu *jitterretry.GiveUpError
				if err != nil && !errors.As(err, &gu) {
					panic(fmt.Sprintf("expect nil or a *GiveUpError, got %T %v", err, err))
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(16000), done.Load())
	assert.Equal(t, uint(1_000_000), r.Remaining(), "expect Do to refund every retry it did not send")
}

// TestStressSendRateUnderCancel races attempts through the send-rate
// limiter, paced low enough that most of them wait, against contexts that
// are cancelled or reach their deadline at any moment, from many goroutines,
// with throttles and successes feeding the limiter as they go. Four
// deadlines in five are under 2 ms, refused at once; one in five under
// 50 ms, long enough for a caller to be held in the queue until just
// before its deadline and raced by the cancels there. Nothing may panic, every wait must return,
// and a refused wait is a *GiveUpError or the context's own error.
func TestStressSendRateUnderCancel(t *testing.T) {
	if !runInChild(t) {
		return
	}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 2000, MinRate: 500, MaxRate: 5000}
		o.BucketCapacity = 1_000_000
	})
	require.NoError(t, r.Err())
	throttle := throttleErr()
	var wg sync.WaitGroup
	var done, refused, held atomic.Int64
	const perGoroutine = 1000
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				deadline := time.Duration((g*7+i*13)%2000) * time.Microsecond
				if i%5 == 1 {
					deadline = time.Duration((g*7919+i*104729)%50_000) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				if i%5 == 0 || i%10 == 1 { // some refused at once, half the held ones
					go cancel() // a cancel from elsewhere, at any moment
				}
				release, err := r.GetAttemptToken(ctx)
				switch {
				case err == nil:
					if i%4 == 0 {
						_ = release(throttle)
					} else {
						_ = release(nil)
					}
				default:
					var gu *jitterretry.GiveUpError
					if !errors.As(err, &gu) && ctx.Err() == nil {
						panic(fmt.Sprintf("expect a *GiveUpError or the context's error, got %T %v", err, err))
					}
					refused.Add(1)
					if strings.Contains(err.Error(), "held in the send queue") {
						held.Add(1)
					}
				}
				cancel()
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d attempts, %d refused, %d of them after a hold", done.Load(), refused.Load(), held.Load())
	assert.Equal(t, int64(16*perGoroutine), done.Load())
	assert.Positive(t, refused.Load(), "expect some waits refused by their deadline, or the stress did not stress the queue")
	assert.Positive(t, held.Load(), "expect some callers held in the queue before their refusal, or the stress missed the hold")
}

// TestWrapperReplacingRetryDelayStaysFlat: under retry.AddWithMaxBackoffDelay
// the retryer's RetryDelay is never called, so no hand-off is ever taken.
// A million such decisions with fresh deadline contexts leave the heap as it
// was; BenchmarkWrappedRetryDelay shows the time per decision stays flat.
func TestWrapperReplacingRetryDelayStaysFlat(t *testing.T) {
	cycles := 1_000_000
	if raceEnabled || testing.Short() {
		cycles = 100_000 // the tables are fixed-size and saturate far sooner
	}
	r := jitterretry.New()
	wrapped := retry.AddWithMaxBackoffDelay(r, 20*time.Second).(aws.RetryerV2)
	throttle := throttleErr()
	cycle := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		retryDecision(ctx, wrapped, throttle)
		cancel()
	}
	for range 10_000 {
		cycle() // fill the tables
	}
	var before, after runtimeHeap
	before.read()
	for range cycles {
		cycle()
	}
	after.read()
	grew := after.inUse - before.inUse
	assert.Less(t, grew, int64(1<<20), "expect a flat heap after %d cycles, it grew %d bytes", cycles, grew)
	assert.Equal(t, uint(500), r.Remaining())
}

// TestFinishedOperationsKeepNoContextAlive: once an operation is over, the
// retryer holds nothing of its context (request-scoped values, loggers,
// spans), whose size it cannot know. Under a wrapper that skips RetryDelay
// the hand-off keeps the contexts of its last entries, at most one per slot
// (256). Before, each of 4096 tracking slots kept the last retry's.
func TestFinishedOperationsKeepNoContextAlive(t *testing.T) {
	type payloadKey struct{}
	for name, wrap := range map[string]func(aws.Retryer) aws.Retryer{
		"the SDK's middleware": func(r aws.Retryer) aws.Retryer { return r },
		"under retry.AddWithMaxBackoffDelay": func(r aws.Retryer) aws.Retryer {
			return retry.AddWithMaxBackoffDelay(r, time.Microsecond)
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := jitterretry.New(fast)
			retryer := wrap(r)
			const operations = 2000
			payloads := make([]weak.Pointer[[1024]byte], 0, operations)
			for range operations {
				payload := new([1024]byte)
				payloads = append(payloads, weak.Make(payload))
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), payloadKey{}, payload), time.Hour)
				_, err := operation(ctx, retryer, script(serverErr, ok))
				cancel()
				require.NoError(t, err)
			}
			alive := func() int {
				runtime.GC()
				n := 0
				for _, p := range payloads {
					if p.Value() != nil {
						n++
					}
				}
				return n
			}
			// The runtime may still hold a few stopped timers, and their
			// contexts, until it cleans its timer heap.
			const bound = 8
			if name == "the SDK's middleware" {
				assert.LessOrEqual(t, alive(), bound, "expect the contexts of finished operations collected")
			} else {
				// The hand-offs no RetryDelay took hold their contexts
				// until the table's sweep drops them, some 2 to 4 s after
				// they were put, with no further call (a client gone
				// idle): 256 of them, 1 MB each in an outside review's
				// run, were kept for good before.
				assert.Eventually(t, func() bool { return alive() <= bound }, 30*time.Second, 100*time.Millisecond,
					"expect the contexts of finished operations collected once the sweep dropped their hand-offs")
			}
			assert.Equal(t, uint(500), r.Remaining())
		})
	}
}

// TestStressColdStarts races new retryers' first attempts, the cold ones
// whose times keep no margin until a warm one is timed (see
// attemptTimes), through the SDK's retry middleware: in each of 200 rounds
// 16 goroutines start together on a fresh retryer, the attempts before the
// round's first answer slow (a credential fetch) and the rest quick, under
// deadlines of a few milliseconds, cancels racing every step, far
// deadlines, and Do loops whose first call conflicts (sized on cold times
// only). Nothing may panic, and no token may be created.
func TestStressColdStarts(t *testing.T) {
	if !runInChild(t) {
		return
	}
	const rounds, workers = 200, 16
	shared := serverErr()
	for round := range rounds {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = 100*time.Microsecond, 200*time.Microsecond, time.Millisecond
		})
		require.NoError(t, r.Err())
		var answered atomic.Bool
		answer := func(attempt int) error {
			if !answered.Load() {
				time.Sleep(2 * time.Millisecond) // the client's one-time costs
			} else {
				time.Sleep(50 * time.Microsecond)
			}
			answered.Store(true)
			if attempt == 1 {
				return shared
			}
			return nil
		}
		concurrently(workers, func(w int) {
			i := round*workers + w
			var ctx context.Context
			var cancel context.CancelFunc
			switch i % 3 {
			case 0:
				ctx, cancel = context.WithTimeout(context.Background(), time.Duration(1+i%5)*time.Millisecond)
			case 1:
				ctx, cancel = context.WithCancel(context.Background())
				go func() {
					time.Sleep(time.Duration(i%3000) * time.Microsecond)
					cancel()
				}()
			default:
				ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
			}
			defer cancel()
			if i%2 == 0 {
				_, _ = operation(ctx, r, answer)
				return
			}
			calls := 0
			_ = jitterretry.Do(ctx, r, func(ctx context.Context) error {
				calls++
				_, err := operation(ctx, r, answer)
				if calls == 1 {
					return jitterretry.Conflict(errors.Join(err, errors.New("conditional check failed")), 1, 2)
				}
				return err
			})
		})
		assert.LessOrEqual(t, r.Remaining(), uint(500), "expect no token created")
	}
}
