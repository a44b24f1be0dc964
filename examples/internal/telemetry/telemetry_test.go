package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// series names one data point: the operation ("" outside one), and the
// attribute that classifies it (jitterretry.class or jitterretry.reason)
// with its value.
type series struct{ method, key, value string }

// attrs returns the attributes the retryer should record for s.
func (s series) attrs() map[string]string {
	a := map[string]string{"jitterretry.partition": "", s.key: s.value}
	if s.method != "" {
		a["rpc.service"], a["rpc.method"] = "DynamoDB", s.method
	}
	return a
}

// hookLog is what the retryer's hooks saw, by series. Phases run one at a
// time, each with one operation, so the phase names the operation.
type hookLog struct {
	mu      sync.Mutex
	method  string
	retries map[series]int
	delays  map[series]float64 // seconds
	giveUps map[series]int
}

func newHookLog() *hookLog {
	return &hookLog{retries: map[series]int{}, delays: map[series]float64{}, giveUps: map[series]int{}}
}

func (h *hookLog) phase(method string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.method = method
}

func (h *hookLog) onRetry(e jitterretry.RetryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := series{h.method, "jitterretry.class", e.Class.String()}
	if e.Class == jitterretry.ClassConflict {
		s.method = "" // Do's retries: Do's context is no SDK operation's
	}
	h.retries[s]++
	h.delays[s] += e.Delay.Seconds()
}

func (h *hookLog) onGiveUp(e *jitterretry.GiveUpError) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := series{h.method, "jitterretry.reason", e.Reason.String()}
	if e.Reason == jitterretry.GiveUpNotRetryable {
		// The SDK gives IsErrorRetryable no context, so the retryer cannot
		// tell which operation it refuses: no rpc.* attributes.
		s.method = ""
	}
	h.giveUps[s]++
}

// TestInstrumentsMatchTheHooks drives a real DynamoDB client through every
// path the retryer records (throttles, 500s, an exhausted budget, a
// deadline give-up, conflicts in Do, send-rate waits) and checks that each
// instrument holds what the hooks saw, with its attributes.
func TestInstrumentsMatchTheHooks(t *testing.T) {
	m, err := telemetry.New(telemetry.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	log := newHookLog()
	const rate = 20 // the send-rate limiter's, pinned: an attempt every 50 ms
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MaxAttempts = 4
		o.BaseDelay, o.ThrottleBaseDelay, o.MaxBackoff = time.Millisecond, time.Millisecond, 5*time.Millisecond
		o.BucketCapacity = 40          // two retries of a 500 (14 tokens each) after the first phases, not three
		o.FailFastOnEmptyBudget = true // nothing to wait for in a test
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: rate, MinRate: rate, MaxRate: rate}
		o.OnRetry, o.OnGiveUp = log.onRetry, log.onGiveUp
		o.MeterProvider = m.Provider
	})
	require.NoError(t, r.Err())
	srv := newScriptServer(t)
	client := newClient(srv.URL, func(o *dynamodb.Options) {
		o.Retryer = r
		o.MeterProvider = m.Provider
	})
	ctx := context.Background()
	start := time.Now()

	log.phase("PutItem") // two throttles, then success
	srv.script(throttle, throttle)
	require.NoError(t, putItem(ctx, client))

	log.phase("GetItem") // a 500, then success
	srv.script(serverErr)
	require.NoError(t, getItem(ctx, client))

	log.phase("UpdateItem") // 500s until the bucket refuses
	srv.script(serverErr, serverErr, serverErr)
	err = updateItem(ctx, client)
	require.ErrorIs(t, err, jitterretry.ErrRetryBudgetExhausted)
	require.Zero(t, srv.pending(), "expect every scripted reply used")

	log.phase("DeleteItem") // a throttle asking for 5 s, with 2 s left (300 ms went by in a stall of a busy machine)
	srv.script(reply{code: ddbwire.Throttling, retryAfter: "5000"})
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = deleteItem(dctx, client)
	cancel()
	var g *jitterretry.GiveUpError
	require.ErrorAs(t, err, &g)
	require.Equal(t, jitterretry.GiveUpDeadline, g.Reason, "%v", err)

	log.phase("GetItem") // a table that does not exist: not retryable
	srv.script(reply{code: ddbwire.ResourceNotFound})
	var rnf *types.ResourceNotFoundException
	require.ErrorAs(t, getItem(ctx, client), &rnf)

	log.phase("UpdateItem") // two conflicts, retried by Do: no give-ups
	srv.script(conditions, conditions)
	require.NoError(t, jitterretry.Do(ctx, r, func(ctx context.Context) error {
		err := updateItem(ctx, client)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return jitterretry.Conflict(err, 1, 2)
		}
		return err
	}))

	// Eight reads at once: the limiter lets one go and queues the others,
	// an interval apart.
	log.phase("GetItem")
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-gate
			assert.NoError(t, getItem(ctx, client))
		})
	}
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, srv.pending(), "expect every scripted reply used")

	rm, err := m.Collect(ctx)
	require.NoError(t, err)
	rows := telemetry.Rows(rm)

	// The retryer's counters and the backoff histogram hold what the hooks
	// saw, series by series, and nothing else.
	assert.Equal(t, expect(log.retries), counts(t, rows, telemetry.Retries), telemetry.Retries)
	assert.Equal(t, expect(log.giveUps), counts(t, rows, telemetry.GiveUps), telemetry.GiveUps)
	assert.Equal(t, expect(log.retries), counts(t, rows, telemetry.Backoff), "recordings of "+telemetry.Backoff)
	for s, sum := range log.delays {
		row := find(t, rows, telemetry.Backoff, s.attrs())
		assert.InDelta(t, sum, row.Sum, 1e-9, "sum of %s %v", telemetry.Backoff, s)
	}
	// Every path was taken.
	for _, s := range []series{
		{"PutItem", "jitterretry.class", "throttle"},
		{"GetItem", "jitterretry.class", "transient"},
		{"UpdateItem", "jitterretry.class", "transient"},
		{"", "jitterretry.class", "conflict"},
	} {
		assert.Positive(t, log.retries[s], "expect retries of %v", s)
	}
	for _, s := range []series{
		{"UpdateItem", "jitterretry.reason", "budget"},
		{"DeleteItem", "jitterretry.reason", "deadline"},
		{"", "jitterretry.reason", "not_retryable"},
	} {
		assert.Equal(t, 1, log.giveUps[s], "expect give-ups %v", s)
	}

	// The gauges: the bucket as Remaining sees it, the pinned rate.
	tokens := find(t, rows, telemetry.BucketTokens, map[string]string{"jitterretry.partition": "", "rpc.service": "DynamoDB"})
	assert.Equal(t, float64(r.Remaining()), tokens.Value)
	limit := find(t, rows, telemetry.SendRateLimit, map[string]string{"jitterretry.partition": "", "rpc.service": "DynamoDB", "cloud.region": "us-east-1"})
	assert.Equal(t, float64(rate), limit.Value)

	// The send-rate waits: no hook reports them, so check that the queued
	// reads waited, under their operation, and no longer than the run.
	var waits int
	for _, row := range byName(rows, telemetry.SendRateWait) {
		a := attrsOf(row)
		assert.Equal(t, "queued", a["jitterretry.reason"])
		assert.Contains(t, a, "jitterretry.partition")
		assert.NotEmpty(t, a["rpc.method"], "expect the waiting operation named")
		assert.LessOrEqual(t, row.Max, elapsed.Seconds())
		waits += int(row.Value)
	}
	assert.Positive(t, waits, "expect the limiter to have made some reads wait")

	// The SDK's per-attempt instruments agree with the server.
	for op, n := range srv.attempts {
		a := map[string]string{"rpc.service": "DynamoDB", "rpc.method": op}
		assert.Equal(t, float64(n), find(t, rows, telemetry.CallAttempts, a).Value, "%s of %s", telemetry.CallAttempts, op)
		assert.Equal(t, float64(n), find(t, rows, telemetry.CallAttemptDuration, a).Value, "%s of %s", telemetry.CallAttemptDuration, op)
	}
	for k, n := range srv.errors {
		a := map[string]string{"rpc.service": "DynamoDB", "rpc.method": k[0], "exception.type": k[1]}
		assert.Equal(t, float64(n), find(t, rows, telemetry.CallErrors, a).Value, "%s %v", telemetry.CallErrors, k)
	}
	assert.Len(t, byName(rows, telemetry.CallErrors), len(srv.errors), "expect no other errors recorded")
	assert.Empty(t, byName(rows, telemetry.DeadlineSkipped), "expect no deadline check skipped")
}

// expect returns the counts the instruments should show for what the hooks
// saw, keyed as counts keys them.
func expect(seen map[series]int) map[string]float64 {
	want := map[string]float64{}
	for s, n := range seen {
		want[canonical(s.attrs())] = float64(n)
	}
	return want
}

// counts returns an instrument's values (a histogram's count) by their
// attributes.
func counts(t *testing.T, rows []telemetry.Row, name string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, r := range byName(rows, name) {
		got[canonical(attrsOf(r))] = r.Value
	}
	return got
}

func byName(rows []telemetry.Row, name string) []telemetry.Row {
	var out []telemetry.Row
	for _, r := range rows {
		if r.Instrument == name {
			out = append(out, r)
		}
	}
	return out
}

// find returns the row of instrument name whose attributes are exactly attrs.
func find(t *testing.T, rows []telemetry.Row, name string, attrs map[string]string) telemetry.Row {
	t.Helper()
	for _, r := range byName(rows, name) {
		if maps.Equal(attrsOf(r), attrs) {
			return r
		}
	}
	var have []string
	for _, r := range byName(rows, name) {
		have = append(have, canonical(attrsOf(r)))
	}
	t.Fatalf("no %s with attributes %s; have %v", name, canonical(attrs), have)
	return telemetry.Row{}
}

func attrsOf(r telemetry.Row) map[string]string {
	a := map[string]string{}
	for _, kv := range r.Attributes.ToSlice() {
		a[string(kv.Key)] = kv.Value.Emit()
	}
	return a
}

func canonical(a map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, a[k]))
	}
	return strings.Join(parts, " ")
}
