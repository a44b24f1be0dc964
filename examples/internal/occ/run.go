package occ

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/jitterretry/jitterretry"
)

// Config describes one run of the workload.
type Config struct {
	// Table is the table Setup prepared.
	Table string
	// Workers is the number of concurrent workers (W). At least 1.
	Workers int
	// Increments is the number of increments each worker makes (M). At
	// least 1.
	Increments int
	// Items is the number of hot items; each increment picks one at random.
	// At least 1.
	Items int
	// Seed seeds each worker's choice of items.
	Seed uint64
	// Transact makes each increment a TransactWriteItems instead of an
	// UpdateItem (not every server supports transactions).
	Transact bool
	// LoopAttempts is jitterretry.DoOptions.MaxAttempts for one try of an
	// increment under the Contention policy: the most calls that fail with a
	// transaction cancelled by throttling before the increment goes back to
	// the worker's queue. Conflicts do not count: they have Do's own
	// conflict budget (DoOptions.MaxConflicts, left at its default). The
	// blind policies, which retry conflicts as transient errors, allow
	// BlindConflictAttempts calls instead (see Policy). Zero means 10.
	LoopAttempts int
	// MaxRequeues bounds how often an increment goes back to the worker's
	// queue after jitterretry.Do gave up on it. Zero means no bound: the
	// increment is tried until it is acknowledged or ctx ends, and an error
	// no retry can mend stops the run. With a bound, an increment that still
	// fails after MaxRequeues requeues, or fails with an error no retry can
	// mend, is recorded in Result.Failed with its error, and the worker goes
	// on with its next increment under a new identity (a new token
	// attribute), so that whether the failed one landed can still be read
	// from the table afterwards, even if a delayed attempt lands late.
	MaxRequeues int
	// Progress, when set, is called after each acknowledged increment. It
	// must be safe for concurrent use.
	Progress func()
}

// Result is what one run did, as the workers saw it.
type Result struct {
	// Acked is the number of acknowledged increments of each item.
	Acked []int64
	// Successes is the number of acknowledged increments.
	Successes int64
	// Conflicts is the number of condition failures caused by another
	// worker's write (not by the worker's own earlier success).
	Conflicts int64
	// Recognised is the number of increments acknowledged because a retry
	// found the worker's own token on the item: the earlier write had landed
	// but its response was lost.
	Recognised int64
	// GaveUp is the number of times jitterretry.Do gave up on an increment
	// (retry bucket empty, attempts spent, or a throttle the SDK could not
	// retry away) and the increment went back to the worker's queue.
	GaveUp int64
	// Latencies holds each acknowledged increment's time from its first
	// attempt to its acknowledgement, sorted.
	Latencies []time.Duration
	// Wall is the run's duration.
	Wall time.Duration
	// Unresolved lists the increments still in flight when the context
	// ended; Verify finds out whether they landed.
	Unresolved []Pending
	// Failed lists the increments the workers gave up on, each with the
	// error they were given (only with Config.MaxRequeues); Verify finds out
	// whether they landed anyway.
	Failed []Failure
}

// Pending is an increment whose outcome the worker never learned.
type Pending struct {
	Worker, Item int
	Seq          int64
}

// Failure is an increment that failed, with the error its worker got.
type Failure struct {
	Pending
	Err error
}

// Percentile returns the p-th percentile (0 < p <= 100, nearest rank) of
// the latencies, 0 when there are none.
func (r *Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(r.Latencies))+0.999999) - 1
	return r.Latencies[min(max(rank, 0), len(r.Latencies)-1)]
}

// ThrottledTransactionError is a TransactionCanceledException whose only
// cancellation reasons are throttles. The SDK does not retry it, since the
// exception itself is not a throttle; the application does, as a throttle.
type ThrottledTransactionError struct {
	// Err is the TransactionCanceledException.
	Err error
}

func (e *ThrottledTransactionError) Error() string {
	return "occ: transaction cancelled by throttling: " + e.Err.Error()
}

// Unwrap returns the service error.
func (e *ThrottledTransactionError) Unwrap() error { return e.Err }

// Classify returns the application-level classification Do uses: def,
// Do's default, which retries conflicts (with the item the error carried,
// or after a fresh read) with their own budget and no retry tokens, and
// leaves throttles and 5xx to the SDK's retry middleware, so the two layers
// never retry the same failure (def also retries a transaction cancelled
// for throttles, which the SDK does not); and in addition, as throttles,
// transactions cancelled by throttling that a loop's retries gave up on
// (ThrottledTransactionError inside a *jitterretry.GiveUpError), which the
// worker requeues.
func Classify(def func(error) jitterretry.ErrorClass) func(error) jitterretry.ErrorClass {
	return func(err error) jitterretry.ErrorClass {
		if throttledTransactionErr(err) {
			return jitterretry.ClassThrottle
		}
		return def(err)
	}
}

func throttledTransactionErr(err error) bool {
	var t *ThrottledTransactionError
	return errors.As(err, &t)
}

// Run starts cfg.Workers workers that each make cfg.Increments increments
// through client, whose retryer must be p.SDK, and waits for them. It returns
// early with an error when an increment fails for a reason no retry can
// mend (a missing table, a validation error), and with ctx's error when ctx
// ends first; Result is valid in every case.
func Run(ctx context.Context, client *dynamodb.Client, p *Policy, cfg Config) (*Result, error) {
	if cfg.Workers < 1 || cfg.Increments < 1 || cfg.Items < 1 {
		return nil, fmt.Errorf("occ: workers, increments and items must be at least 1, got %d, %d, %d", cfg.Workers, cfg.Increments, cfg.Items)
	}
	if cfg.MaxRequeues < 0 {
		return nil, fmt.Errorf("occ: MaxRequeues must be 0 (no bound) or positive, got %d", cfg.MaxRequeues)
	}
	if cfg.LoopAttempts == 0 {
		cfg.LoopAttempts = 10
	}
	ctx, cancel := context.WithCancelCause(jitterretry.WithPartition(ctx, cfg.Table))
	defer cancel(nil)

	res := &Result{Acked: make([]int64, cfg.Items)}
	var (
		mu                                    sync.Mutex
		conflicts, recognised, gaveUp, succes atomic.Int64
		wg                                    sync.WaitGroup
	)
	start := time.Now()
	for w := range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &worker{
				id: w + 1, cfg: &cfg, client: client, policy: p,
				rng:       rand.New(rand.NewPCG(cfg.Seed, uint64(w))),
				versions:  map[int]int64{},
				conflicts: &conflicts, recognised: &recognised, gaveUp: &gaveUp,
			}
			lat, acked, pending, failed, err := wk.run(ctx)
			succes.Add(int64(len(lat)))
			mu.Lock()
			res.Latencies = append(res.Latencies, lat...)
			res.Failed = append(res.Failed, failed...)
			for i, n := range acked {
				res.Acked[i] += n
			}
			if pending != nil {
				res.Unresolved = append(res.Unresolved, *pending)
			}
			mu.Unlock()
			if err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	slices.Sort(res.Latencies)
	res.Successes = succes.Load()
	res.Conflicts, res.Recognised, res.GaveUp = conflicts.Load(), recognised.Load(), gaveUp.Load()
	return res, context.Cause(ctx)
}

// worker makes one worker's increments, one after the other.
type worker struct {
	id     int
	cfg    *Config
	client *dynamodb.Client
	policy *Policy
	rng    *rand.Rand
	// versions caches the last version this worker saw of each item, so the
	// first attempt of an increment needs no read.
	versions map[int]int64

	conflicts, recognised, gaveUp *atomic.Int64
}

func (w *worker) run(ctx context.Context) (lat []time.Duration, acked []int64, pending *Pending, failed []Failure, err error) {
	acked = make([]int64, w.cfg.Items)
	for k := 1; k <= w.cfg.Increments; k++ {
		it := w.rng.IntN(w.cfg.Items)
		begin := time.Now()
		if err := w.increment(ctx, it, int64(k)); err != nil {
			p := Pending{Worker: w.id, Item: it, Seq: int64(k)}
			switch {
			case ctx.Err() != nil:
				return lat, acked, &p, failed, nil
			case w.cfg.MaxRequeues == 0:
				return lat, acked, &p, failed, err
			}
			failed = append(failed, Failure{Pending: p, Err: err})
			// A new identity: no later write of this worker touches the
			// failed increment's token, so the token tells afterwards
			// whether that increment landed.
			w.id += w.cfg.Workers
			continue
		}
		acked[it]++
		lat = append(lat, time.Since(begin))
		if w.cfg.Progress != nil {
			w.cfg.Progress()
		}
	}
	return lat, acked, nil, failed, nil
}

// increment applies increment seq of this worker to item it exactly once,
// trying again after a backoff whenever Do gives up, until it is
// acknowledged, ctx ends, or an error no retry can mend.
func (w *worker) increment(ctx context.Context, it int, seq int64) error {
	op := &attempt{w: w, item: it, seq: seq}
	op.version, op.known = w.versions[it]
	for requeues := 1; ; requeues++ {
		err := jitterretry.Do(ctx, w.policy.Loop, op.try, w.policy.DoOptions(w.cfg.LoopAttempts))
		if err == nil {
			w.versions[it] = op.version
			return nil
		}
		if ctx.Err() != nil || !requeueable(err) {
			return err
		}
		if w.cfg.MaxRequeues > 0 && requeues > w.cfg.MaxRequeues {
			return err
		}
		w.gaveUp.Add(1)
		// The last write's outcome may be unknown (a lost response then a
		// throttle): read before writing again.
		op.known = false
		d, derr := w.policy.Requeue.BackoffDelay(requeues, err)
		if derr != nil {
			return derr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// requeueable reports whether an increment that Do gave up on may succeed
// later: a conflict, a throttle or 5xx the SDK gave up on, or a retry the
// bucket refused.
func requeueable(err error) bool {
	var q ratelimit.QuotaExceededError
	return throttledTransactionErr(err) || errors.As(err, &q) ||
		errors.Is(err, jitterretry.ErrRetryBudgetExhausted) ||
		jitterretry.Classify(err) != jitterretry.ClassNotRetryable
}
