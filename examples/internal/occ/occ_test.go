package occ

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// The scenarios below run on the embedded minidyn server here and on
// dynalite in dynalite_test.go.

// scenarioNoLostUpdates runs workers x increments under throttling and lost
// responses with each strategy, and checks every counter.
func scenarioNoLostUpdates(t *testing.T, s *testServer, strategies []string, transact bool, proxyOpts ...func(*capacity.Options)) {
	const workers, increments, items = 16, 10, 3
	// Each strategy has its own table, proxy and client, and its run waits
	// mostly on the proxy's 60 writes a second: run together, they take
	// the time of one. The tables are made first, and dropped after the
	// last: minidyn's table map is not safe for a CreateTable beside
	// other calls (a data race under -race).
	tables := make([]string, len(strategies))
	for i := range tables {
		tables[i] = s.table(t, items)
	}
	// The workload makes workers conflict, whichever strategy runs it;
	// under full jitter with transactions three quarters of the calls are
	// throttled and 2-7 conflicts a run are left (one run of a quiet make
	// test had none), so the check is of the strategies together, once
	// their parallel subtests are over.
	var conflicts atomic.Int64
	t.Cleanup(func() {
		assert.Positive(t, conflicts.Load(), "expect %d workers on %d items to conflict", workers, items)
	})
	for i, name := range strategies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			seed := uint64(100 + i)
			table := tables[i]
			proxy, endpoint := s.proxy(t, func(o *capacity.Options) {
				o.Default = capacity.Capacity{Read: 60, Write: 60}
				// A bucket of 3 tokens: the workers' first requests, sent
				// together, are throttled however slow the machine (on
				// a busy one, a 1 s bucket once kept dynalite's workers
				// under 60 a second for a whole run, and so did the
				// strategies run together here: "the proxy throttled"
				// failed).
				o.BurstSeconds = 0.05
				o.LostResponseRate = 0.1
				o.Seed = seed
				for _, fn := range proxyOpts {
					fn(o)
				}
			})
			p := fastPolicy(t, name, seed)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var progress atomic.Int64
			res, err := Run(ctx, s.client(endpoint, p.SDK), p, Config{
				Table: table, Workers: workers, Increments: increments, Items: items, Seed: seed,
				Transact: transact, Progress: func() { progress.Add(1) },
			})
			require.NoError(t, err)

			check, err := Verify(context.Background(), s.admin(), table, res)
			require.NoError(t, err)
			assert.True(t, check.OK(), "expect every counter to equal its acknowledged increments, got %+v", check)
			assert.Zero(t, check.Lost, "lost updates")
			assert.Zero(t, check.Double, "double-applied increments")
			assert.Equal(t, int64(workers*increments), res.Successes)
			assert.Equal(t, int64(workers*increments), progress.Load())
			var sum int64
			for _, it := range check.Items {
				sum += it.Counter
			}
			assert.Equal(t, int64(workers*increments), sum, "expect the counters to add up to every increment exactly once")

			st := proxy.Stats()
			assert.Positive(t, st.Throttled, "expect the capacity proxy to have throttled")
			assert.Positive(t, st.LostResponses, "expect lost responses to have been injected")
			assert.Positive(t, res.Recognised, "expect a retry to have recognised its own lost write")
			conflicts.Add(res.Conflicts)
			t.Logf("%s: %d calls, %d throttled, %d lost responses, %d conflicts, %d recognised, %d requeued, %d refused",
				name, st.Requests, st.Throttled, st.LostResponses, res.Conflicts, res.Recognised, res.GaveUp, p.Refused())
		})
	}
}

// scenarioLostWriteRecognised loses the response of the first write and
// checks that the SDK's retry, failing its condition, recognises the
// worker's own token instead of applying the increment twice. It returns
// the reads the workload made: one for the first increment, whose version
// the worker does not know yet, plus any re-read after a condition failure.
func scenarioLostWriteRecognised(t *testing.T, s *testServer, transact bool) (reads int) {
	table := s.table(t, 1)
	endpoint := loseFirstWrite(t, s.URL)
	p := fastPolicy(t, "full", 1)
	before := s.ops.count("GetItem")
	res, err := Run(context.Background(), s.client(endpoint, p.SDK), p, Config{
		Table: table, Workers: 1, Increments: 3, Items: 1, Transact: transact,
	})
	require.NoError(t, err)
	reads = s.ops.count("GetItem") - before
	assert.Equal(t, int64(1), res.Recognised)
	assert.Zero(t, res.Conflicts, "expect the failed condition to be recognised as our own write, not a conflict")
	check, err := Verify(context.Background(), s.admin(), table, res)
	require.NoError(t, err)
	require.True(t, check.OK(), "got %+v", check)
	assert.Equal(t, int64(3), check.Items[0].Counter, "expect 3 increments applied once each")
	return reads
}

// scenarioCapacityDropThenRecover drops the table's write capacity to zero
// a third of the way through, restores it shortly after, and checks that
// every increment still lands exactly once.
func scenarioCapacityDropThenRecover(t *testing.T, s *testServer) {
	const workers, increments, items = 16, 6, 2
	table := s.table(t, items)
	proxy, endpoint := s.proxy(t, func(o *capacity.Options) {
		o.Default = capacity.Capacity{Read: 200, Write: 200}
	})
	p := fastPolicy(t, "decorrelated", 7)
	var dropped sync.Once
	var restored sync.WaitGroup
	var throttledWhileDown int64
	var acks atomic.Int64
	progress := func() {
		if acks.Add(1) != workers*increments/3 {
			return
		}
		dropped.Do(func() {
			assert.NoError(t, proxy.SetDefaultCapacity(capacity.Capacity{Read: 200, Write: 0}))
			before := proxy.Stats().Throttled
			restored.Add(1)
			time.AfterFunc(300*time.Millisecond, func() {
				defer restored.Done()
				throttledWhileDown = proxy.Stats().Throttled - before
				assert.NoError(t, proxy.SetDefaultCapacity(capacity.Capacity{Read: 200, Write: 200}))
			})
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, s.client(endpoint, p.SDK), p, Config{
		Table: table, Workers: workers, Increments: increments, Items: items, Seed: 7, Progress: progress,
	})
	require.NoError(t, err)
	restored.Wait()
	assert.Positive(t, throttledWhileDown, "expect writes to be throttled while the capacity is zero")
	check, err := Verify(context.Background(), s.admin(), table, res)
	require.NoError(t, err)
	assert.True(t, check.OK(), "got %+v", check)
	assert.Equal(t, int64(workers*increments), res.Successes)
}

func TestMinidynNoLostUpdatesUnderThrottling(t *testing.T) {
	scenarioNoLostUpdates(t, minidyn(t), StrategyNames()[1:], false)
}

func TestMinidynSDKStandardNoLostUpdates(t *testing.T) {
	// The SDK's standard retryer waits up to 1 s after a throttle whatever
	// the options, so give it capacity enough to throttle only a little.
	s := minidyn(t)
	table := s.table(t, 2)
	proxy, endpoint := s.proxy(t, func(o *capacity.Options) {
		o.Default = capacity.Capacity{Read: 300, Write: 300}
		o.LostResponseRate = 0.05
	})
	p := fastPolicy(t, SDKStandard, 3)
	res, err := Run(context.Background(), s.client(endpoint, p.SDK), p, Config{
		Table: table, Workers: 16, Increments: 5, Items: 2, Seed: 3,
	})
	require.NoError(t, err)
	check, err := Verify(context.Background(), s.admin(), table, res)
	require.NoError(t, err)
	assert.True(t, check.OK(), "got %+v", check)
	assert.Positive(t, proxy.Stats().LostResponses)
}

func TestMinidynTransactionsNoLostUpdatesUnderThrottling(t *testing.T) {
	scenarioNoLostUpdates(t, minidyn(t), []string{"full", "decorrelated"}, true)
}

func TestMinidynLostWriteRecognisedFromAllOld(t *testing.T) {
	for name, transact := range map[string]bool{"UpdateItem": false, "TransactWriteItems": true} {
		t.Run(name, func(t *testing.T) {
			reads := scenarioLostWriteRecognised(t, minidyn(t), transact)
			assert.Equal(t, 1, reads, "expect only the first read: ALL_OLD makes the re-read unnecessary")
		})
	}
}

func TestMinidynCapacityDropThenRecover(t *testing.T) {
	scenarioCapacityDropThenRecover(t, minidyn(t))
}

func TestMinidynConflictReturnsAllOld(t *testing.T) {
	for name, transact := range map[string]bool{"UpdateItem": false, "TransactWriteItems": true} {
		t.Run(name, func(t *testing.T) {
			s := minidyn(t)
			table := s.table(t, 1)
			client := s.client(s.URL, aws.NopRetryer{})
			ctx := context.Background()
			w := &worker{id: 1, cfg: &Config{Table: table, Transact: transact}, client: client,
				conflicts: new(atomic.Int64), recognised: new(atomic.Int64), gaveUp: new(atomic.Int64)}
			// Another writer moves the item to version 1 behind our back.
			other := increment{table: table, item: 0, worker: 2, seq: 1, version: 0}
			_, err := client.UpdateItem(ctx, other.updateItem())
			require.NoError(t, err)

			a := &attempt{w: w, item: 0, seq: 1, version: 0, known: true}
			err = a.try(ctx)
			require.Equal(t, jitterretry.ClassConflict, jitterretry.Classify(err), "got %T: %v", err, err)
			assert.Equal(t, jitterretry.ClassConflict, Classify(doDefault(t))(err))
			if transact {
				var tce *types.TransactionCanceledException
				require.ErrorAs(t, err, &tce)
			} else {
				var ccf *types.ConditionalCheckFailedException
				require.ErrorAs(t, err, &ccf)
			}
			assert.True(t, a.known, "expect the version to be known from ALL_OLD")
			assert.Equal(t, int64(1), a.version)

			reads := s.ops.count("GetItem")
			require.NoError(t, a.try(ctx))
			assert.Equal(t, reads, s.ops.count("GetItem"), "expect no re-read")
			assert.Equal(t, int64(1), w.conflicts.Load())
		})
	}
}

// doDefault returns Do's default classification, as Do hands it to its
// option functions.
func doDefault(t *testing.T) func(error) jitterretry.ErrorClass {
	t.Helper()
	var def func(error) jitterretry.ErrorClass
	err := jitterretry.Do(context.Background(), jitterretry.New(), func(context.Context) error { return nil },
		func(o *jitterretry.DoOptions) { def = o.Classify })
	require.NoError(t, err)
	require.NotNil(t, def)
	return def
}

func TestClassify(t *testing.T) {
	throttledTCE := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("None")}, {Code: aws.String("ThrottlingError")},
	}}
	conflictTCE := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("TransactionConflict")},
	}}
	mixedTCE := &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{
		{Code: aws.String("ThrottlingError")}, {Code: aws.String("ValidationError")},
	}}
	ptee := &types.ProvisionedThroughputExceededException{}
	classify := Classify(doDefault(t))
	cases := map[string]struct {
		err         error
		want        jitterretry.ErrorClass
		requeueable bool
	}{
		"conflict":                                     {jitterretry.Conflict(&types.ConditionalCheckFailedException{}, 0, 1), jitterretry.ClassConflict, true},
		"marked transaction conflict":                  {jitterretry.Conflict(conflictTCE, 1, 1), jitterretry.ClassConflict, true},
		"throttled transaction":                        {&ThrottledTransactionError{Err: throttledTCE}, jitterretry.ClassThrottle, true},
		"bare condition failure":                       {&types.ConditionalCheckFailedException{}, jitterretry.ClassConflict, true},
		"bare transaction cancelled":                   {conflictTCE, jitterretry.ClassConflict, true},
		"transaction cancelled for a validation error": {mixedTCE, jitterretry.ClassNotRetryable, false},
		"throttle the SDK gave up on":                  {&retry.MaxAttemptsError{Attempt: 4, Err: ptee}, jitterretry.ClassNotRetryable, true},
		"budget the SDK's retry spent":                 {&jitterretry.GiveUpError{Reason: jitterretry.GiveUpBudget, Err: ptee}, jitterretry.ClassNotRetryable, true},
		"validation":                                   {errors.New("ValidationException"), jitterretry.ClassNotRetryable, false},
		// Do's refusal is final to another Do (a loop around this one
		// would run it again for each of its own conflicts); the worker
		// requeues the increment instead.
		"wrapped conflict after max tries": {
			&jitterretry.GiveUpError{Reason: jitterretry.GiveUpConflicts, Attempt: 101, Err: jitterretry.Conflict(conflictTCE, 1, 1)},
			jitterretry.ClassNotRetryable, true,
		},
		"wrapped throttled transaction after max tries": {
			&jitterretry.GiveUpError{Reason: jitterretry.GiveUpMaxAttempts, Attempt: 10, Err: &ThrottledTransactionError{Err: throttledTCE}},
			jitterretry.ClassThrottle, true,
		},
		"nil is not retryable": {nil, jitterretry.ClassNotRetryable, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, classify(tc.err), "expect %v, got %v", tc.want, classify(tc.err))
			if tc.err != nil {
				assert.Equal(t, tc.requeueable, requeueable(tc.err), "requeueable")
			}
		})
	}
	assert.True(t, throttledTransaction(throttledTCE))
	assert.False(t, throttledTransaction(conflictTCE))
	assert.False(t, throttledTransaction(mixedTCE), "expect a validation reason to make the cancellation final")
	old, ok := conflictItem(conflictTCE)
	assert.True(t, ok)
	assert.Nil(t, old)
}

func TestRunRejectsBadConfig(t *testing.T) {
	p := fastPolicy(t, "full", 1)
	_, err := Run(context.Background(), dynamodb.New(dynamodb.Options{}), p, Config{Workers: 0, Increments: 1, Items: 1})
	require.Error(t, err)
	_, err = Run(context.Background(), dynamodb.New(dynamodb.Options{}), p, Config{Workers: 1, Increments: 1, Items: 1, MaxRequeues: -1})
	require.Error(t, err)
	_, err = NewPolicy("linear", PolicyOptions{})
	require.Error(t, err)
}

func TestRunStopsOnAnErrorNoRetryCanMend(t *testing.T) {
	s := minidyn(t)
	p := fastPolicy(t, "full", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, s.client(s.URL, p.SDK), p, Config{Table: "no-such-table", Workers: 4, Increments: 3, Items: 1})
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "expect Run to stop at once, not at the deadline")
	assert.Zero(t, res.Successes)
}

func TestPercentile(t *testing.T) {
	r := &Result{}
	assert.Zero(t, r.Percentile(50))
	for i := 1; i <= 100; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, r.Percentile(50))
	assert.Equal(t, 99*time.Millisecond, r.Percentile(99))
	assert.Equal(t, 100*time.Millisecond, r.Percentile(100))
}

func TestMinidynBoundedRequeuesReportEveryFailure(t *testing.T) {
	// The first write lands, then no response comes back at all: no
	// increment can be acknowledged, one has landed all the same. Each must
	// be reported as failed, with the SDK's or the retryer's typed error,
	// and Verify must find the landed one through its token: none lost,
	// none applied twice.
	const workers, increments, items = 4, 3, 2
	s := minidyn(t)
	table := s.table(t, items)
	endpoint := blackoutAfterFirstWrite(t, s.URL)
	p := fastPolicy(t, "full", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := Run(ctx, s.client(endpoint, p.SDK), p, Config{
		Table: table, Workers: workers, Increments: increments, Items: items, Seed: 5, MaxRequeues: 1, LoopAttempts: 2,
	})
	require.NoError(t, err, "expect failures to be reported per increment, not to stop the run")
	assert.Zero(t, res.Successes)
	require.Len(t, res.Failed, workers*increments)
	ids := map[int]bool{}
	for _, f := range res.Failed {
		var sdkMax *retry.MaxAttemptsError
		assert.True(t, errors.As(f.Err, &sdkMax) || errors.Is(f.Err, jitterretry.ErrRetryBudgetExhausted),
			"expect a typed give-up error, got %T: %v", f.Err, f.Err)
		var ise *types.InternalServerError
		assert.ErrorAs(t, f.Err, &ise, "expect the 500 that caused it inside")
		assert.False(t, ids[f.Worker], "expect a new identity after each failure, got worker %d twice", f.Worker)
		ids[f.Worker] = true
	}
	check, err := Verify(context.Background(), s.admin(), table, res)
	require.NoError(t, err)
	assert.True(t, check.OK(), "got %+v", check)
	assert.Equal(t, workers*increments, check.Failed)
	assert.Positive(t, check.FailedApplied, "expect some failed writes to have landed")
	var sum int64
	for _, it := range check.Items {
		sum += it.Counter
	}
	assert.Equal(t, int64(check.FailedApplied), sum, "expect the counters to hold exactly the failed increments that landed")
}

func TestPolicyWiring(t *testing.T) {
	ccf := jitterretry.Conflict(&types.ConditionalCheckFailedException{}, 1, 2)
	for _, name := range StrategyNames() {
		t.Run(name, func(t *testing.T) {
			p, err := NewPolicy(name, PolicyOptions{Seed: 1})
			require.NoError(t, err)
			var o jitterretry.DoOptions
			require.NoError(t, jitterretry.Do(context.Background(), p.Loop, func(context.Context) error { return nil },
				func(d *jitterretry.DoOptions) { p.DoOptions(7)(d); o = *d }))
			if name == Contention {
				assert.False(t, p.Blind())
				assert.Same(t, p.SDK, p.Loop, "expect Do to share the client's retryer, as the README shows")
				assert.Equal(t, jitterretry.ClassConflict, o.Classify(ccf))
				assert.Equal(t, 7, o.MaxAttempts)
				return
			}
			assert.True(t, p.Blind())
			assert.NotSame(t, p.SDK, p.Loop)
			assert.Equal(t, jitterretry.ClassTransient, o.Classify(ccf), "expect a conflict retried as any transient error")
			assert.Equal(t, BlindConflictAttempts, o.MaxAttempts)

			// No bucket: 40 conflicts would cost 560 tokens of a bucket of 500.
			fast, err := NewPolicy(name, PolicyOptions{Seed: 1, BaseDelay: 100 * time.Microsecond, MaxBackoff: time.Millisecond})
			require.NoError(t, err)
			calls := 0
			err = jitterretry.Do(context.Background(), fast.Loop, func(context.Context) error {
				if calls++; calls <= 40 {
					return ccf
				}
				return nil
			}, fast.DoOptions(7))
			require.NoError(t, err)
			assert.Equal(t, 41, calls)
			assert.Zero(t, fast.Refused())
		})
	}
}
