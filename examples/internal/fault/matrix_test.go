package fault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
	"github.com/jitterretry/jitterretry/examples/internal/fault"
	"github.com/jitterretry/jitterretry/examples/internal/occ"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// The fault matrix: for each fault of fault.Matrix and each server, 16
// workers make matrixIncrements() optimistic-locking increments each
// through the fault proxy, on top of a capacity proxy that throttles and injects 500s before
// and after forwarding. Afterwards every counter must equal its
// acknowledged increments plus the failed ones whose token shows they
// landed: no loss, no double apply, and every failure reported with a typed
// error.
const (
	matrixWorkers = 16
	matrixItems   = 16
	// matrixRequeues is how often an increment goes back to its worker's
	// queue before it is reported as failed.
	matrixRequeues = 3
	// closeIdleEvery makes the clients open new connections all along, so
	// that toxics with a toxicity below 1 keep striking.
	closeIdleEvery = 25 * time.Millisecond
)

// matrixIncrements is each worker's number of increments: 100 when
// JITTERRETRY_FAULT_MATRIX=full (make reliability), 25 otherwise, so that
// make test runs every fault on both servers in a fraction of the time.
// 25 still leaves each fault hundreds of new connections to strike.
func matrixIncrements() int {
	if os.Getenv("JITTERRETRY_FAULT_MATRIX") == "full" {
		return 100
	}
	return 25
}

// The capacity proxy's part, on top of every fault: 2% of requests
// answered 500 before forwarding, 2% after (the write landed), and
// throttling episodes: every throttleEvery the table's capacity drops to
// zero for throttleFor, then comes back.
const (
	throttleEvery = 400 * time.Millisecond
	throttleFor   = 60 * time.Millisecond
)

var (
	matrixCapacity = capacity.Capacity{Read: 1000, Write: 1000}
	matrixProxy    = func(seed uint64) func(*capacity.Options) {
		return func(o *capacity.Options) {
			o.Default = matrixCapacity
			o.BurstSeconds = 0.1
			o.ErrorRate = 0.02
			o.LostResponseRate = 0.02
			o.Seed = seed
		}
	}
)

// throttleEpisodes drops p's capacity to zero for throttleFor every
// throttleEvery until the returned stop is called.
func throttleEpisodes(t *testing.T, p *ddbtest.CapacityProxy) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(throttleEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			assert.NoError(t, p.SetDefaultCapacity(capacity.Capacity{}))
			select {
			case <-done:
			case <-time.After(throttleFor):
			}
			assert.NoError(t, p.SetDefaultCapacity(matrixCapacity))
		}
	}()
	return func() { close(done); wg.Wait() }
}

// evidence is the retry causes of which each fault must have caused at
// least one retry, so that a fault that stopped biting fails the test
// instead of passing it.
var evidence = map[string][]string{
	"latency":    {causeTimeout}, // the spikes outlast the attempt timeout
	"reset_peer": {causeReset},
	"truncate":   {causeEOF, causeConnection}, // a cut body, a cut head
	"timeout":    {causeTimeout},
}

type matrixRow struct {
	fault, server     string
	ops, acked        int
	failed, landed    int
	retries           int64
	lost, doubled     int64
	throttled, errors int64 // capacity proxy: throttles, 500s before and after forwarding
	bucketMin         float64
	leftovers         int // toxiproxy goroutines stuck after the proxy closed
	causes            map[string]int64
	kinds             map[string]int
	wall              time.Duration
}

func TestFaultMatrix(t *testing.T) {
	servers := []struct {
		name  string
		start func(testing.TB) *ddbtest.Backend
	}{{"minidyn", ddbtest.Minidyn}, {"dynalite", ddbtest.Dynalite}}
	var rows []matrixRow
	for i, f := range fault.Matrix() {
		t.Run(f.Name, func(t *testing.T) {
			for j, s := range servers {
				t.Run(s.name, func(t *testing.T) {
					rows = append(rows, runFault(t, s.start(t), s.name, f, uint64(10*i+j+1)))
				})
			}
		})
	}
	var b strings.Builder
	writeMatrix(&b, rows)
	t.Log("fault matrix (go test -v -run TestFaultMatrix ./examples/internal/fault prints it):\n" + b.String())
}

func runFault(t *testing.T, b *ddbtest.Backend, server string, f fault.Fault, seed uint64) matrixRow {
	ctx := context.Background()
	admin := b.Admin(t)
	table := ddbtest.TableName("fault-" + f.Name)
	require.NoError(t, occ.Setup(ctx, admin.Client, table, matrixItems, 1000, 1000))
	t.Cleanup(func() { _ = occ.Teardown(context.Background(), admin.Client, table) })

	capProxy := ddbtest.Capacity(t, b.URL, matrixProxy(seed))
	faults, err := fault.Start(capProxy.URL)
	require.NoError(t, err)
	t.Cleanup(faults.Close)
	require.NoError(t, faults.Apply(f))

	causes := &causeCounter{n: map[string]int64{}, sample: map[string]error{}}
	meters, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = meters.Shutdown(context.Background()) })
	p, err := occ.NewPolicy(occ.Contention, occ.PolicyOptions{
		MeterProvider:     meters.Provider,
		Seed:              seed,
		BaseDelay:         time.Millisecond,
		ThrottleBaseDelay: 25 * time.Millisecond,
		MaxBackoff:        250 * time.Millisecond,
		RequeueCap:        100 * time.Millisecond,
		OnRetry:           causes.record,
	})
	require.NoError(t, err)
	client := b.NewClient(t, faults.URL(), func(o *ddbtest.ClientOptions) {
		o.Retryer = p.SDK
		o.AttemptTimeout = f.Timeout()
		o.CloseIdleEvery = closeIdleEvery
	})

	bucket := watchBucket(meters, table)
	stopThrottling := throttleEpisodes(t, capProxy)
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := occ.Run(runCtx, client.Client, p, occ.Config{
		Table: table, Workers: matrixWorkers, Increments: matrixIncrements(), Items: matrixItems,
		Seed: seed, MaxRequeues: matrixRequeues,
		// Conflicts are the price of contention, not a sign of trouble: Do
		// charges them no tokens, so the bucket is left to the retries the
		// faults and the throttles cause.
	})
	stopThrottling()
	bucketMin, bucketMax := bucket.stop()
	require.NoError(t, err)

	// Nothing may reach the server once the table is read: close the
	// client's connections, then the fault proxy (it passes on what its
	// toxics still hold), then the capacity proxy, which waits for every
	// request it accepted to be answered.
	client.Close()
	faults.Close()
	require.NoError(t, capProxy.Close())
	quiet, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	require.NoError(t, b.Quiesce(quiet))
	leftovers := toxiproxyLeftovers()

	check, err := occ.Verify(ctx, admin.Client, table, res)
	require.NoError(t, err)
	ops := matrixWorkers * matrixIncrements()
	assert.Equal(t, ops, int(res.Successes)+len(res.Failed), "expect every increment either acknowledged or reported as failed")
	assert.Zero(t, check.Lost, "expect no acknowledged increment missing from the table")
	assert.Zero(t, check.Double, "expect no increment applied twice")
	assert.Zero(t, check.Unresolved, "expect every increment's outcome known to its worker")
	assert.True(t, check.OK(), "got %+v", check)
	var sum int64
	for _, it := range check.Items {
		sum += it.Counter
	}
	assert.Equal(t, res.Successes+int64(check.FailedApplied), sum,
		"expect the counters to hold every acknowledged increment and every failed one that landed, once")

	kinds := map[string]int{}
	for _, fl := range res.Failed {
		kind := failureKind(fl.Err)
		if kinds[kind] == 0 {
			t.Logf("first %s: %v", kind, fl.Err)
		}
		kinds[kind]++
		assert.NotEqual(t, "untyped", kind, "expect a typed error for worker %d's increment %d, got %T: %v", fl.Worker, fl.Seq, fl.Err, fl.Err)
		assert.False(t, errors.Is(fl.Err, context.Canceled), "expect the real cause, not a cancellation: %v", fl.Err)
	}
	assert.GreaterOrEqual(t, int(res.Successes), ops*9/10, "expect the retries to carry at least 90%% of the increments through %s; failures: %v", f.Name, kinds)

	assert.GreaterOrEqual(t, bucketMin, 0.0, "expect the table's bucket on the retryer's gauge")
	assert.LessOrEqual(t, bucketMax, float64(defaultBucketCapacity), "expect the retry bucket never above its capacity (nor wrapped below 0)")
	st := capProxy.Stats()
	assert.Positive(t, st.Throttled, "expect the capacity proxy to have throttled")
	assert.Positive(t, causes.get(causeThrottle), "expect throttles to have been retried")
	assert.Positive(t, causes.get(cause5xx), "expect injected 500s to have been retried")
	if want, ok := evidence[f.Name]; ok {
		// The fault bit if it caused a retry of its kind, or a failure of
		// its kind that is not retried (a body cut short may have landed,
		// so neither the SDK nor the retryer sends it again): with the
		// short matrix's few requests, either may happen alone.
		var n int64
		for _, c := range want {
			n += causes.get(c)
			for _, fl := range res.Failed {
				if causeOf(fl.Err) == c {
					n++
				}
			}
		}
		assert.Positive(t, n, "expect %s to have caused %v retries or failures; retry causes: %v, failures: %v", f.Name, want, causes.counts(), kinds)
	}
	for _, c := range []string{causeEOF, causeConnection, causeOther} {
		if e := causes.sampleOf(c); e != nil {
			t.Logf("first retry after %s: %v", c, e)
		}
	}
	return matrixRow{
		fault: f.Name, server: server, ops: ops, acked: int(res.Successes),
		failed: len(res.Failed), landed: check.FailedApplied, retries: p.Retries(),
		lost: check.Lost, doubled: check.Double,
		throttled: st.Throttled, errors: st.InjectedErrors + st.LostResponses,
		bucketMin: bucketMin, leftovers: leftovers, causes: causes.counts(), kinds: kinds, wall: res.Wall,
	}
}

// failureKind names the typed error a failed increment was reported with:
// the retryer's, by its reason, or the SDK's operation error around its
// cause; "untyped" when it is none of them.
func failureKind(err error) string {
	var (
		giveUp *jitterretry.GiveUpError
		sdkMax *retry.MaxAttemptsError
		op     *smithy.OperationError
	)
	switch {
	case errors.As(err, &giveUp) && giveUp.Err != nil: // before the SDK's: GiveUpMaxAttempts also matches that
		return "GiveUpError " + giveUp.Reason.String()
	case errors.As(err, &sdkMax) && sdkMax.Err != nil:
		return "SDK MaxAttemptsError"
	case errors.As(err, &op) && op.Err != nil:
		return fmt.Sprintf("SDK %T", op.Err)
	}
	return "untyped"
}

// Retry causes, from the failed attempt's error.
const (
	causeConflict = "conflict"
	causeThrottle = "throttle"
	cause5xx      = "500"
	causeReset    = "reset"
	causeEOF      = "eof"
	causeTimeout  = "timeout"
	// causeConnection is any other failure to send the request or read the
	// response head (the SDK's RequestSendError), such as a truncated head.
	causeConnection = "connection"
	causeOther      = "other"
)

type causeCounter struct {
	mu     sync.Mutex
	n      map[string]int64
	sample map[string]error
}

func (c *causeCounter) record(e jitterretry.RetryEvent) {
	k := causeOf(e.Err)
	if e.Class == jitterretry.ClassConflict {
		k = causeConflict
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
	if _, ok := c.sample[k]; !ok {
		c.sample[k] = e.Err
	}
}

func (c *causeCounter) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func (c *causeCounter) sampleOf(k string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sample[k]
}

func (c *causeCounter) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func causeOf(err error) string {
	var (
		ptee   *types.ProvisionedThroughputExceededException
		ise    *types.InternalServerError
		netErr net.Error
		conn   interface{ ConnectionError() bool }
	)
	switch {
	case errors.As(err, &ptee):
		return causeThrottle
	case errors.As(err, &ise):
		return cause5xx
	case errors.Is(err, syscall.ECONNRESET):
		return causeReset
	case errors.As(err, &netErr) && netErr.Timeout():
		return causeTimeout
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return causeEOF
	case errors.As(err, &conn) && conn.ConnectionError():
		return causeConnection
	}
	return causeOther
}

// bucketWatch samples the bucket of one partition every 5 ms, from the
// retryer's bucket gauge: occ.Run keys the retries by table, so the
// shared partition, which Retryer.Remaining reads, is never drawn on (it
// stood at 500 through every row, and the column said so).
type bucketWatch struct {
	m         *telemetry.Metrics
	partition string
	min, max  float64
	done      chan struct{}
	wg        sync.WaitGroup
}

func watchBucket(m *telemetry.Metrics, partition string) *bucketWatch {
	w := &bucketWatch{m: m, partition: partition, min: math.Inf(1), max: math.Inf(-1), done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *bucketWatch) sample() {
	rm, err := w.m.Collect(context.Background())
	if err != nil {
		return
	}
	for _, row := range telemetry.Rows(rm) {
		if p, _ := row.Attr("jitterretry.partition"); row.Instrument == telemetry.BucketTokens && p == w.partition {
			w.min, w.max = min(w.min, row.Value), max(w.max, row.Value)
		}
	}
}

// stop ends the watch and returns the least and the most tokens seen; -1
// for both when the partition's bucket never showed.
func (w *bucketWatch) stop() (lo, hi float64) {
	close(w.done)
	w.wg.Wait()
	w.sample()
	if w.min > w.max {
		return -1, -1
	}
	return w.min, w.max
}

// toxiproxyLeftovers counts the toxiproxy goroutines still running once
// every proxy of the test is closed, after letting them wind down: those
// stuck by toxiproxy's link teardown (see TestMain).
func toxiproxyLeftovers() int {
	var n int
	for range 20 {
		buf := make([]byte, 8<<20)
		buf = buf[:runtime.Stack(buf, true)]
		n = 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "github.com/Shopify/toxiproxy/v2") {
				n++
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

func writeMatrix(w io.Writer, rows []matrixRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tserver\tops\tacked\tfailed (landed)\tretries\tlost\tdoubled\tthrottled\t500s\tbucket min\ttoxiproxy stuck\twall\tretry causes\tfailures")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d (%d)\t%d\t%d\t%d\t%d\t%d\t%v\t%d\t%s\t%s\t%s\n",
			r.fault, r.server, r.ops, r.acked, r.failed, r.landed, r.retries, r.lost, r.doubled,
			r.throttled, r.errors, r.bucketMin, r.leftovers, r.wall.Round(10*time.Millisecond), formatCounts(r.causes), formatCounts(r.kinds))
	}
	_ = tw.Flush()
}

func formatCounts[V int | int64](m map[string]V) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
