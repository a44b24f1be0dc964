package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// TestRunEndToEnd runs two modes for a fraction of a second each on
// loopback: the figures depend on the machine, so it checks only that the
// pieces fit (requests reach the proxy, successes come back, the report and
// the charts are written).
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := run([]string{"-k", "4", "-modes", "sdk-standard,ours-full+rate", "-scenarios", "drop",
		"-scale", "0.05", "-pause", "0", "-plot", dir}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	assert.Contains(t, out.String(), "== K=4, drop:")
	assert.Regexp(t, `ours-full\+rate\s+\d+\.\d`, out.String())
	for _, ext := range []string{"svg", "png"} {
		fi, err := os.Stat(filepath.Join(dir, "throttle_k4_drop."+ext))
		require.NoError(t, err)
		assert.Positive(t, fi.Size())
	}
}

func TestRunOneCountsWhatTheServerSaw(t *testing.T) {
	up := mustUpstream(t)
	m := mustMode(t, "ours-full")
	s := mustScenario(t, scenarioSteady, 0.03)
	r, err := runOne(loadConfig{capacity: 1000, burstSeconds: 0.1, drain: 30 * time.Second}, up, m, 2, s)
	require.NoError(t, err)
	assert.Positive(t, r.successes)
	assert.GreaterOrEqual(t, r.requests, r.successes, "expect every success seen by the server")
	var perSecond int64
	for _, sec := range r.seconds {
		perSecond += sec.requests
	}
	assert.Equal(t, r.requests, perSecond, "expect the per-second counts to add up")
	assert.Equal(t, int(r.successes+r.failed.total()), len(r.latencies))
}

func TestParseFlagsIssue15(t *testing.T) {
	for name, tc := range map[string]struct {
		args  []string
		check func(t *testing.T, cfg config)
	}{
		"fleet": {[]string{"-fleet", "16", "-k", "4"}, func(t *testing.T, cfg config) {
			assert.Equal(t, 16, cfg.load.fleet)
			assert.Equal(t, []int{4}, cfg.k)
		}},
		"random throttles on an unlimited table": {[]string{"-capacity", "0", "-throttle-prob", "0.2", "-scenarios", "steady", "-seed", "9"}, func(t *testing.T, cfg config) {
			assert.True(t, math.IsInf(cfg.load.capacity, 1), "expect -capacity 0 to be unlimited")
			assert.Equal(t, 0.2, cfg.load.throttleProb)
			assert.Equal(t, uint64(9), cfg.load.seed)
		}},
		"random throttles on a finite table": {[]string{"-throttle-prob", "1", "-scenarios", "drop"}, func(t *testing.T, cfg config) {
			assert.Equal(t, 500.0, cfg.load.capacity)
			assert.Equal(t, 1.0, cfg.load.throttleProb)
		}},
		"warm-up": {[]string{"-warmup", "1s"}, func(t *testing.T, cfg config) {
			assert.Equal(t, time.Second, cfg.load.warmup)
		}},
		"a late client": {[]string{"-fleet", "4", "-late", "5s", "-scenarios", "steady,drop"}, func(t *testing.T, cfg config) {
			assert.Equal(t, 5*time.Second, cfg.load.late)
		}},
		"as many goroutines as allowed": {[]string{"-fleet", "5", "-k", "1000"}, func(t *testing.T, cfg config) {
			assert.Equal(t, 5, cfg.load.fleet)
		}},
		"one deadline": {[]string{"-deadline", "300ms"}, func(t *testing.T, cfg config) {
			assert.Equal(t, deadlineRange{300 * time.Millisecond, 300 * time.Millisecond}, cfg.load.deadline)
		}},
		"a range of deadlines": {[]string{"-deadline", "200ms, 500ms"}, func(t *testing.T, cfg config) {
			assert.Equal(t, deadlineRange{200 * time.Millisecond, 500 * time.Millisecond}, cfg.load.deadline)
			assert.Contains(t, describeLoad(cfg.load), "every operation under a deadline of 200ms–500ms (uniform)")
		}},
		"a swing every second": {[]string{"-scenarios", "swing", "-swing", "1s"}, func(t *testing.T, cfg config) {
			require.Len(t, cfg.scenarios, 1)
			assert.Len(t, cfg.scenarios[0].phases, 10)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := parseFlags(tc.args, &bytes.Buffer{})
			require.NoError(t, err)
			tc.check(t, cfg)
		})
	}

	for name, args := range map[string][]string{
		"no client":                     {"-fleet", "0"},
		"negative fleet":                {"-fleet", "-2"},
		"too many goroutines in all":    {"-fleet", "2", "-k", "2501"},
		"probability above one":         {"-throttle-prob", "1.1"},
		"negative probability":          {"-throttle-prob", "-0.1"},
		"probability NaN":               {"-throttle-prob", "NaN"},
		"negative warm-up":              {"-warmup", "-1s"},
		"warm-up too long":              {"-warmup", "2m"},
		"negative capacity":             {"-capacity", "-1"},
		"infinite capacity":             {"-capacity", "+Inf"},
		"a drop of an unlimited table":  {"-capacity", "0", "-scenarios", "drop"},
		"unlimited with every scenario": {"-capacity", "0"},
		"negative seed":                 {"-seed", "-1"},
		"a late client without a fleet": {"-late", "1s"},
		"a negative late join":          {"-fleet", "2", "-late", "-1s"},
		"a join after the end":          {"-fleet", "2", "-late", "10s", "-scenarios", "steady"},
		"a join after a scaled end":     {"-fleet", "2", "-late", "1s", "-scale", "0.1"},
		"a zero deadline":               {"-deadline", "0s"},
		"a negative deadline":           {"-deadline", "-1s"},
		"a deadline range reversed":     {"-deadline", "500ms,200ms"},
		"a deadline without a unit":     {"-deadline", "300"},
		"three deadlines":               {"-deadline", "1s,2s,3s"},
		"a swing longer than its run":   {"-scenarios", "swing", "-swing", "11s"},
		"a swing of zero":               {"-scenarios", "swing", "-swing", "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(args, &bytes.Buffer{})
			assert.Error(t, err, "expect %q rejected", strings.Join(args, " "))
		})
	}
}

// TestRunOneEndsOperationsAtTheirDeadline runs against a table that
// throttles every request: with -deadline much shorter than the 1 s base of
// a throttle's backoff, most operations end at their deadlines, and count
// as such (a few may run out of attempts first, on short backoffs).
func TestRunOneEndsOperationsAtTheirDeadline(t *testing.T) {
	up := mustUpstream(t)
	s := mustScenario(t, scenarioSteady, 0.1)
	cfg := loadConfig{capacity: math.Inf(1), throttleProb: 1, burstSeconds: 0.1, drain: 30 * time.Second,
		deadline: deadlineRange{50 * time.Millisecond, 150 * time.Millisecond}}
	r, err := runOne(cfg, up, mustMode(t, "ours-full"), 2, s)
	require.NoError(t, err)
	assert.Zero(t, r.successes)
	assert.Positive(t, r.failed.deadline, "expect operations ended by their deadlines: %+v", r.failed)
	assert.Zero(t, r.failed.other, "expect every deadline counted as one: %+v", r.failed)
}

func TestRunLabelAndPlotFile(t *testing.T) {
	assert.Equal(t, "K=64", runLabel(1, 64))
	assert.Equal(t, "16 clients × K=4", runLabel(16, 4))
	assert.Equal(t, "throttle_k64_drop", plotFile(1, 64, "drop"), "expect a single client to keep its chart's name")
	assert.Equal(t, "throttle_f16_k4_steady", plotFile(16, 4, "steady"))
}

// TestRunIssue15EndToEnd runs a fleet with a warm-up and random throttles
// for a fraction of a second: the figures depend on the machine, so it
// checks only that the report has its parts.
func TestRunIssue15EndToEnd(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := run([]string{"-fleet", "3", "-k", "2", "-warmup", "100ms", "-throttle-prob", "0.1", "-modes", "sdk-standard,ours-full+rate",
		"-scenarios", "drop", "-scale", "0.1", "-pause", "0", "-plot", dir}, &out, &errOut)
	require.NoError(t, err, errOut.String())
	text := out.String()
	assert.Contains(t, text, "a fleet of 3 clients per mode")
	assert.Contains(t, text, "random throttles: each request with probability 0.1")
	assert.Contains(t, text, "a warm-up of 100ms")
	assert.Contains(t, text, "== 3 clients × K=2, drop:")
	assert.Contains(t, text, "fairness over the 3 clients")
	assert.Regexp(t, `recovery\s+\+1s %`, text)
	assert.Contains(t, errOut.String(), "in the warm-up, not counted")
	_, err = os.Stat(filepath.Join(dir, "throttle_f3_k2_drop.png"))
	assert.NoError(t, err)
}

// TestRunOneFleetAfterWarmup checks what holds whatever the machine's
// speed: every client of the fleet is counted apart, and after a warm-up
// on an unlimited table the scenario, which throttles every request,
// counts none of the warm-up's successes.
func TestRunOneFleetAfterWarmup(t *testing.T) {
	up := mustUpstream(t)
	m := mustMode(t, "sdk-standard")
	cfg := loadConfig{capacity: math.Inf(1), burstSeconds: 0.1, drain: 30 * time.Second,
		fleet: 3, throttleProb: 1, seed: 1, warmup: 200 * time.Millisecond}
	r, err := runOne(cfg, up, m, 2, mustScenario(t, scenarioSteady, 0.03))
	require.NoError(t, err)
	require.Len(t, r.clientOK, 3)
	assert.Positive(t, r.warmupOK, "expect the warm-up's requests to succeed")
	assert.Zero(t, r.successes, "expect no success counted when the scenario throttles everything")
	assert.Equal(t, []int64{0, 0, 0}, r.clientOK)
	assert.Equal(t, r.requests, r.throttled, "expect the server's counts to leave the warm-up out")

	cfg.throttleProb, cfg.warmup = 0, 0
	r, err = runOne(cfg, up, m, 2, mustScenario(t, scenarioSteady, 0.03))
	require.NoError(t, err)
	var sum int64
	for i, ok := range r.clientOK {
		assert.Positive(t, ok, "client %d", i)
		sum += ok
	}
	assert.Equal(t, r.successes, sum, "expect the clients' successes to add up")
	assert.Zero(t, r.warmupOK)
}

// TestRunOneLateClient checks what holds whatever the machine's speed: the
// late client succeeds only after it joins, and the fleet's successes from
// the join on are counted apart and add up to no more than the run's. The
// table has no capacity limit: at 1000/s the early clients had drained it
// when the late one joined, and a throttle's backoff (up to 1 s) could
// outlast the 300 ms it had left, so that once under load it succeeded
// not at all (the counting under test needs no throttles).
func TestRunOneLateClient(t *testing.T) {
	up := mustUpstream(t)
	m := mustMode(t, "ours-full+rate")
	s := mustScenario(t, scenarioSteady, 0.06) // 600 ms
	cfg := loadConfig{capacity: math.Inf(1), burstSeconds: 0.1, drain: 30 * time.Second, fleet: 3,
		warmup: 100 * time.Millisecond, late: 300 * time.Millisecond}
	r, err := runOne(cfg, up, m, 2, s)
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, r.joined)
	require.Len(t, r.clientSinceJoin, 3)
	for i := range r.clientOK {
		assert.LessOrEqual(t, r.clientSinceJoin[i], r.clientOK[i], "client %d", i)
	}
	assert.Equal(t, r.clientOK[2], r.clientSinceJoin[2], "expect the late client to succeed only once it joined")
	assert.Positive(t, r.clientSinceJoin[2], "expect the late client to run")
	assert.Greater(t, r.clientOK[0], r.clientSinceJoin[0], "expect the early clients to succeed before the join too")
}

// TestRunOneCountsOperationsTheQueueCarriedOver checks what holds whatever
// the machine's speed: a limiter at 50/s with 10 callers always has
// operations waiting, so some started in the warm-up are sent in the
// scenario, and they count (before, they did not: at K = 1000 a fifth of
// the capacity the limiter used went unreported).
func TestRunOneCountsOperationsTheQueueCarriedOver(t *testing.T) {
	up := mustUpstream(t)
	m := mustMode(t, "ours-full+rate")
	m.retryer = func() aws.Retryer {
		return jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
			o.SendRate = &jitterretry.SendRateOptions{InitialRate: 50, MaxRate: 50}
		})
	}
	cfg := loadConfig{capacity: math.Inf(1), burstSeconds: 0.1, drain: 30 * time.Second, warmup: 300 * time.Millisecond}
	r, err := runOne(cfg, up, m, 10, mustScenario(t, scenarioSteady, 0.05)) // 500 ms
	require.NoError(t, err)
	assert.Positive(t, r.warmupOK, "expect the operations answered in the warm-up left out")
	assert.Positive(t, r.carried, "expect operations queued across the switch counted")
	assert.LessOrEqual(t, r.carried, r.successes+r.failed.total())
	assert.Zero(t, r.throttled)
}
