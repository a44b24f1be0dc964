package jitterretry_test

import (
	"context"
	"slices"
	"sync"
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
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Backoff = fixedBackoff(0)
				o.SendRate = &jitterretry.SendRateOptions{InitialRate: 20, MaxRate: 20}
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			var mu sync.Mutex
			var sent []string
			send := func(label string) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, label)
			}
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
					send("retry")
					return nil
				})
			}()
			<-firstSent
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					callCtx, cancel := context.WithCancel(context.Background())
					defer cancel()
					_, err := operation(tc.asCall(callCtx), r, func(int) error {
						send("first " + itoa(i))
						return nil
					})
					assert.NoError(t, err)
				}()
			}
			// The first of them is sent a turn after the throttled
			// attempt; the others wait 50 ms a turn behind it.
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(sent) > 0
			}, 10e9, 1e6)
			close(answerFirst)
			require.NoError(t, <-retried)
			wg.Wait()
			at := slices.Index(sent, "retry")
			assert.LessOrEqual(t, at, 3, "expect the retry sent at one of the next turns, ahead of the first attempts waiting: %v", sent)
		})
	}
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
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.Backoff = fixedBackoff(0)
				o.SendRate = &jitterretry.SendRateOptions{InitialRate: 20, MaxRate: 20}
			})
			var mu sync.Mutex
			var sent []string
			send := func(label string) {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, label)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			setUp := func() {
				for i := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithCancel(context.Background())
						defer cancel()
						_, err := operation(ctx, r, func(int) error { send("first " + itoa(i)); return nil })
						assert.NoError(t, err)
					}()
				}
				// Two sent, a turn (50 ms) apart: the others have
				// had that long to take their places, on a busy
				// machine too (after the first alone, under -race, a
				// place was taken after the probe's, one run in ten).
				require.Eventually(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(sent) >= 2
				}, 10*time.Second, time.Millisecond)
			}
			probe := func(ctx context.Context) error {
				_, err := operation(ctx, r, func(int) error { send("probe"); return nil })
				return err
			}
			require.NoError(t, run(t, r, setUp, probe))
			wg.Wait()
			at := slices.Index(sent, "probe")
			assert.Greater(t, at, 3, "expect an attempt that never waited its turn behind the first attempts queued: %v", sent)
		})
	}
}
