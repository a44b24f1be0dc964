package jitterretry_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// TestRetryWaitsAheadOfFirstAttempts: through the SDK's retry middleware, an
// operation throttled while eight others queued behind it for their first
// attempts sends its retry ahead of them, at the next turn: it waited its
// turn once already. Sent behind them, an operation throttled once waited
// the queue twice (issue 15: the p99 at 64 callers). The rate is pinned at
// 20 a second, a turn every 50 ms, so the order does not depend on the
// machine's speed.
func TestRetryWaitsAheadOfFirstAttempts(t *testing.T) {
	type runner = func(ctx context.Context, r *jitterretry.Retryer, answer func(int) error) error
	sdk := func(asCall func(context.Context) context.Context) runner {
		return func(ctx context.Context, r *jitterretry.Retryer, answer func(int) error) error {
			_, err := operation(asCall(ctx), r, answer)
			return err
		}
	}
	// inDo retries in a Do loop whose fn makes one call through the
	// retryer under the context asCall derives from fn's; a conflict, not
	// retried by the SDK, cancels the first "transaction" as a throttle
	// would, which Do retries.
	inDo := func(asCall func(context.Context) (context.Context, context.CancelFunc)) runner {
		return func(ctx context.Context, r *jitterretry.Retryer, answer func(int) error) error {
			calls := 0
			return jitterretry.Do(ctx, r, func(ctx context.Context) error {
				calls++
				n := calls
				ctx, cancel := asCall(ctx)
				defer cancel()
				_, err := operation(ctx, r, func(int) error {
					if answer(n) != nil {
						return conflictErr()
					}
					return nil
				})
				if err != nil {
					return throttleErr()
				}
				return nil
			})
		}
	}
	same := func(ctx context.Context) context.Context { return ctx }
	putItem := func(ctx context.Context) context.Context {
		return awsmiddle.SetOperationName(awsmiddle.SetServiceID(ctx, "DynamoDB"), "PutItem")
	}
	byOperation := func(o *jitterretry.Options) { o.PartitionKey = jitterretry.PartitionByOperation }
	cases := map[string]struct {
		opts   func(*jitterretry.Options)
		asCall func(context.Context) context.Context // the first attempts' calls
		run    runner
	}{
		"the SDK's middleware":               {nil, same, sdk(same)},
		"the SDK's middleware, by operation": {byOperation, putItem, sdk(putItem)},
		"Do around a call through the retryer": {nil, same, inDo(func(ctx context.Context) (context.Context, context.CancelFunc) {
			return ctx, func() {}
		})},
		// helper-157: fn's call has a Done channel of its own, and its
		// partition is not Do's.
		"Do, fn's call under a timeout of its own": {nil, same, inDo(func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, time.Minute)
		})},
		"Do, by operation": {byOperation, putItem, inDo(func(ctx context.Context) (context.Context, context.CancelFunc) {
			return putItem(ctx), func() {}
		})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := pinnedAt20(tc.opts)
			var order sendOrder
			firstSent, answerFirst := make(chan struct{}), make(chan struct{})
			ctx, cancel := context.WithCancel(context.Background()) // the operation's own context
			defer cancel()
			retried := make(chan error, 1)
			go func() {
				retried <- tc.run(ctx, r, func(attempt int) error {
					if attempt == 1 {
						close(firstSent)
						<-answerFirst
						return throttleErr()
					}
					order.send("retry")
					return nil
				})
			}()
			<-firstSent
			var wg sync.WaitGroup
			// The first of them is sent a turn after the throttled
			// attempt; the others wait 50 ms a turn behind it.
			queueFirstAttempts(t, r, &order, tc.asCall, &wg, 1)
			close(answerFirst)
			require.NoError(t, <-retried)
			wg.Wait()
			at, sent := order.indexOf("retry")
			assert.LessOrEqual(t, at, 3, "expect the retry sent at one of the next turns, ahead of the first attempts waiting: %v", sent)
		})
	}
}

// TestARetryWaitsAheadOfTheFirstAttemptsOfItsContext: operations that
// share one context (a server's root context, context.Background) ask for
// their first attempts with its Done channel while a retry of one of them
// backs off. The retry is told apart by the end of its backoff, before
// which the SDK's middleware does not ask for it, and goes ahead of the
// first attempts still queued. Taken by the first of them to ask, its
// place went to another operation, and the retry was sent last: at 64
// callers on a shared context, a retried operation waited the queue twice
// (a p99 of 250 to 280 ms, the median 126). The first attempts queue for
// a second at 40 a second, the retry backs off 250 ms.
//
// The backoff's end is on the monotonic clock, as the middleware's sleep:
// on a clock of the caller's stepped back 100 ms during the backoff, the
// retry asked before its end by that clock, and was sent last (helper-231).
// With an x-amz-retry-after hint it is the end of the wait the middleware
// sleeps: a hint of 1.5 s on a backoff of 250 ms had the retry expected
// until 1.25 s only, and sent last.
//
// Retries whose operations ended during their backoffs (an errgroup's
// context cancelled while its workers back off) no longer come: 256 of
// them filled the limiter's set for as long as their backoffs, and no
// retry was expected until they lapsed; a live retry was sent with the
// first attempts (helper-235: 2 s behind 20 at 10 a second, 47 ms alone).
func TestARetryWaitsAheadOfTheFirstAttemptsOfItsContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	defer cancel()
	type setup struct {
		ctx         context.Context
		steppedBack bool // Options.Clock steps back 100 ms as the backoff begins
		answer      func() error
		firsts      int // first attempts queued during the backoff, 40 a second
		ended       int // operations whose retries were expected, ended before
	}
	for name, tc := range map[string]setup{
		"a cancellable context":                 {ctx: cancelled, answer: throttleErr, firsts: 40},
		"context.Background":                    {ctx: context.Background(), answer: throttleErr, firsts: 40},
		"a clock stepped back":                  {ctx: cancelled, steppedBack: true, answer: throttleErr, firsts: 40},
		"an x-amz-retry-after hint":             {ctx: cancelled, answer: func() error { return retryAfter(1500) }, firsts: 80},
		"a full set of retries that never came": {ctx: cancelled, answer: throttleErr, firsts: 40, ended: 256},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := tc.ctx
			retrying := make(chan struct{})
			var back atomic.Int64
			var armed atomic.Bool // the operation under test retries
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Backoff = fixedBackoff(250 * time.Millisecond)
				o.SendRate = &jitterretry.SendRateOptions{InitialRate: 40, MaxRate: 40}
				o.BucketCapacity = 10_000 // the ended operations' retries too
				o.Clock = func() time.Time { return time.Now().Add(time.Duration(back.Load())) }
				o.OnRetry = func(jitterretry.RetryEvent) {
					if !armed.Load() {
						return
					}
					if tc.steppedBack {
						back.Store(int64(-100 * time.Millisecond))
					}
					close(retrying)
				}
			})
			for range tc.ended {
				// As the SDK's middleware asks, the backoff (5.25 s with
				// the hint) cut short by the context's end.
				ctx, cancel := context.WithCancel(context.Background())
				err := retryAfter(60_000)
				_, gerr := r.GetRetryToken(ctx, err)
				require.NoError(t, gerr)
				_, derr := r.RetryDelay(1, err)
				require.NoError(t, derr)
				cancel()
			}
			armed.Store(true)
			var order sendOrder
			retried := make(chan error, 1)
			go func() {
				_, err := operation(ctx, r, script(tc.answer, func() error { order.send("retry"); return nil }))
				retried <- err
			}()
			<-retrying
			firsts := tc.firsts
			var wg sync.WaitGroup
			for i := range firsts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := operation(ctx, r, func(int) error { order.send("first " + itoa(i)); return nil })
					assert.NoError(t, err)
				}()
			}
			require.NoError(t, <-retried)
			wg.Wait()
			at, sent := order.indexOf("retry")
			assert.Less(t, at, firsts-5, "expect the retry sent ahead of first attempts that asked during its backoff: %v", sent)
		})
	}
}

// pinnedAt20 is a retryer with opts (nil: none) whose limiter sends 20
// requests a second, a turn every 50 ms, so that the order of sends does
// not depend on the machine's speed, and which retries without backoff.
func pinnedAt20(opts func(*jitterretry.Options)) *jitterretry.Retryer {
	return jitterretry.New(func(o *jitterretry.Options) {
		o.Backoff = fixedBackoff(0)
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 20, MaxRate: 20}
		if opts != nil {
			opts(o)
		}
	})
}

// sendOrder records the labels of attempts in the order they were sent.
type sendOrder struct {
	mu   sync.Mutex
	sent []string
}

func (o *sendOrder) send(label string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, label)
}

func (o *sendOrder) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.sent)
}

// indexOf returns where label was sent (-1: not), and the order.
func (o *sendOrder) indexOf(label string) (int, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Index(o.sent, label), slices.Clone(o.sent)
}

// queueFirstAttempts starts eight operations on r, each under a context of
// its own (as asCall derives it), sent as "first 0" to "first 7", and
// waits until sent of them were: the others wait their turns behind. wg
// waits for them all.
func queueFirstAttempts(t *testing.T, r *jitterretry.Retryer, order *sendOrder, asCall func(context.Context) context.Context, wg *sync.WaitGroup, sent int) {
	t.Helper()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := operation(asCall(ctx), r, func(int) error {
				order.send("first " + itoa(i))
				return nil
			})
			assert.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool { return order.count() >= sent }, 10*time.Second, time.Millisecond)
}

// TestFirstAttemptsStayAheadOfAttemptsThatNeverWaited: the retries' line is
// for attempts that waited their turn once already. An attempt arriving
// behind eight first attempts queued at 20 a second waits behind them when
// it is a plain first attempt, the next call of a Do loop that retries fn's
// own failure (nothing sent through the limiter), or a straggler fn left
// behind that sends after its loop returned, while another loop of the
// retryer runs (helper-158: the first two went ahead, and closed loops of
// the first kind held first attempts back for as long as they ran).
func TestFirstAttemptsStayAheadOfAttemptsThatNeverWaited(t *testing.T) {
	// probe is made after its set-up, once the eight are queued.
	cases := map[string]func(t *testing.T, r *jitterretry.Retryer, setUp func(), probe func(context.Context) error) error{
		"a plain first attempt": func(t *testing.T, r *jitterretry.Retryer, setUp func(), probe func(context.Context) error) error {
			setUp()
			return probe(context.Background())
		},
		"Do retrying fn's own failure": func(t *testing.T, r *jitterretry.Retryer, setUp func(), probe func(context.Context) error) error {
			calls := 0
			return jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				if calls++; calls == 1 {
					return serverErr() // nothing sent
				}
				setUp()
				return probe(ctx)
			})
		},
		"a straggler after its loop": func(t *testing.T, r *jitterretry.Retryer, setUp func(), probe func(context.Context) error) error {
			hold, other := make(chan struct{}), make(chan error, 1)
			go func() { // another loop of the retryer runs throughout
				other <- jitterretry.Do(context.Background(), r, func(context.Context) error { <-hold; return nil })
			}()
			defer func() { close(hold); assert.NoError(t, <-other) }()
			var kept context.Context
			calls := 0
			err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
				kept = ctx
				if calls++; calls == 1 {
					_, err := operation(ctx, r, script(conflictErr)) // sent, and retried by Do
					return err
				}
				return nil // the retry served without the limiter
			})
			require.NoError(t, err)
			require.Equal(t, 2, calls)
			setUp()
			return probe(kept)
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			r := pinnedAt20(nil)
			var order sendOrder
			var wg sync.WaitGroup
			defer wg.Wait()
			// Two sent, a turn (50 ms) apart: the others have had that
			// long to take their places, on a busy machine too (after
			// the first alone, under -race, a place was taken after the
			// probe's, one run in ten).
			setUp := func() {
				queueFirstAttempts(t, r, &order, func(ctx context.Context) context.Context { return ctx }, &wg, 2)
			}
			probe := func(ctx context.Context) error {
				_, err := operation(ctx, r, func(int) error { order.send("probe"); return nil })
				return err
			}
			require.NoError(t, run(t, r, setUp, probe))
			wg.Wait()
			at, sent := order.indexOf("probe")
			assert.Greater(t, at, 3, "expect an attempt that never waited its turn behind the first attempts queued: %v", sent)
		})
	}
}
