package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

func mustScenario(t *testing.T, name string, scale float64) scenario {
	t.Helper()
	s, err := newScenario(name, scale, defaultSwing)
	require.NoError(t, err)
	return s
}

// mustUpstream starts an upstream answering at once, closed when t ends.
func mustUpstream(t *testing.T) *upstream {
	t.Helper()
	up, err := startUpstream(0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = up.Close() })
	return up
}

// mustMode returns the mode called name, its limiter starting unlimited.
func mustMode(t *testing.T, name string) mode {
	t.Helper()
	m, err := parseMode(name, tuning{})
	require.NoError(t, err)
	return m
}

func TestScenarioCapacity(t *testing.T) {
	drop := mustScenario(t, scenarioDrop, 1)
	for name, tc := range map[string]struct {
		from, to time.Duration
		want     float64
	}{
		"whole drop run":          {0, 12 * time.Second, 2*500 + 5*100 + 5*500},
		"first second":            {0, time.Second, 500},
		"second of the drop":      {2 * time.Second, 3 * time.Second, 100},
		"across the drop":         {1500 * time.Millisecond, 2500 * time.Millisecond, 250 + 50},
		"across the recovery":     {6500 * time.Millisecond, 7500 * time.Millisecond, 50 + 250},
		"past the end, last rate": {12 * time.Second, 13 * time.Second, 500},
		"empty interval":          {3 * time.Second, 3 * time.Second, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got := drop.capacityBetween(500, tc.from, tc.to)
			assert.InDelta(t, tc.want, got, 1e-9, "expect %v, got %v", tc.want, got)
		})
	}
	assert.Equal(t, 12*time.Second, drop.duration())
	at, ok := drop.recovery()
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, at)

	steady := mustScenario(t, scenarioSteady, 0.5)
	assert.Equal(t, 5*time.Second, steady.duration())
	_, ok = steady.recovery()
	assert.False(t, ok, "expect no recovery in a steady scenario")

	_, err := newScenario("bogus", 1, defaultSwing)
	assert.Error(t, err)
}

func TestSwingScenarioAlternates(t *testing.T) {
	swing, err := newScenario(scenarioSwing, 1, 300*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, swing.duration(), "expect the last level cut at the end")
	require.Len(t, swing.phases, 34)
	assert.Equal(t, phase{300 * time.Millisecond, 1}, swing.phases[0])
	assert.Equal(t, phase{300 * time.Millisecond, 0.2}, swing.phases[1])
	assert.Equal(t, phase{100 * time.Millisecond, 0.2}, swing.phases[33])
	// 0–300 ms at 500/s, 300–600 at 100/s, 600–900 at 500/s, 900–1000 at 100/s.
	assert.InDelta(t, 150+30+150+10, swing.capacityBetween(500, 0, time.Second), 1e-9)
	_, ok := swing.recovery()
	assert.False(t, ok, "expect no one recovery time for a swing")
	assert.Equal(t, "500/s and 100/s in turn every 300ms for 10s", swing.describe(500))

	for _, bad := range []time.Duration{0, -time.Second, 11 * time.Second} {
		_, err := newScenario(scenarioSwing, 1, bad)
		assert.ErrorContains(t, err, "invalid -swing", "swing %v", bad)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, percentile(d, 0.50))
	assert.Equal(t, 99*time.Millisecond, percentile(d, 0.99))
	assert.Equal(t, 100*time.Millisecond, percentile(d, 1))
	assert.Equal(t, time.Millisecond, percentile(d, 0))
	assert.Equal(t, time.Duration(0), percentile(nil, 0.5))
	assert.Equal(t, 7*time.Millisecond, percentile([]time.Duration{7 * time.Millisecond}, 0.99))
}

func TestSummarize(t *testing.T) {
	drop := mustScenario(t, scenarioDrop, 1)
	r := result{
		mode: "m", k: 64, scen: drop, capacity: 500,
		successes: 3800, requests: 4180, throttled: 380,
		latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 300 * time.Millisecond},
		okBins:    make([]int64, 120),
	}
	for i := range 12 {
		req := int64(500)
		if i >= 2 && i < 7 {
			req = 150
		}
		if i == 0 {
			req = 2000 // the first second is not held against the peak
		}
		r.seconds = append(r.seconds, second{requests: req, throttled: 30})
	}
	r.seconds[3].throttled = 90
	r.seconds = append(r.seconds, second{requests: 40000, throttled: 40000}) // after the end: ignored
	for i := 70; i < 120; i++ {
		r.okBins[i] = 50
	}
	s := summarize(r)
	assert.InDelta(t, 3800.0/4000, s.util, 1e-9)
	assert.InDelta(t, 1.1, s.callsPerSuccess, 1e-9)
	assert.Equal(t, 2*time.Millisecond, s.p50)
	assert.Equal(t, 300*time.Millisecond, s.p99)
	assert.Equal(t, 300*time.Millisecond, s.max)
	assert.InDelta(t, 1.5, s.peak, 1e-9, "expect the peak 150/100 of the drop")
	assert.Equal(t, int64(90), s.worstThrottled)
	assert.InDelta(t, 3800.0/12, s.okPerSecond, 1e-9)
	require.True(t, s.hasRecovery)
	require.True(t, s.recovered)
	assert.Equal(t, time.Duration(0), s.recovery)
	assert.Equal(t, []float64{1, 1, 1}, s.afterRise, "expect 500 successes in each second after the rise")

	none := summarize(result{scen: drop, capacity: 500})
	assert.True(t, math.IsInf(none.callsPerSuccess, 1), "expect +Inf calls per success without a success")
	assert.False(t, none.recovered)
}

func TestFailureKind(t *testing.T) {
	throttle := errors.New("ProvisionedThroughputExceededException")
	for name, tc := range map[string]struct {
		err  error
		want failures
	}{
		"ours, budget": {fmt.Errorf("op: %w", &jitterretry.GiveUpError{Reason: jitterretry.GiveUpBudget, Err: throttle}), failures{budget: 1}},
		"SDK, quota": {fmt.Errorf("failed to get rate limit token, %w",
			ratelimit.QuotaExceededError{Available: 3, Requested: 5}), failures{budget: 1}},
		"max attempts":           {fmt.Errorf("op: %w", &retry.MaxAttemptsError{Attempt: 4, Err: throttle}), failures{maxAttempts: 1}},
		"our deadline":           {fmt.Errorf("op: %w", &jitterretry.GiveUpError{Reason: jitterretry.GiveUpDeadline, Err: throttle}), failures{deadline: 1}},
		"the context's deadline": {fmt.Errorf("op: %w", &aws.RequestCanceledError{Err: context.DeadlineExceeded}), failures{deadline: 1}},
		"other":                  {throttle, failures{other: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, failureKind(tc.err))
		})
	}
}

func TestParseModes(t *testing.T) {
	all, err := parseModes("all", tuning{})
	require.NoError(t, err)
	require.Len(t, all, len(defaultModes))
	assert.Nil(t, all[0].retryer, "expect sdk-default to keep the client's own retryer")
	for _, m := range all[1:] {
		require.NotNil(t, m.retryer, m.name)
		assert.NotNil(t, m.retryer(), m.name)
	}

	// At an initial rate of 1/s the limiter, when on, makes a second
	// attempt wait about a second: longer than a 200 ms deadline allows.
	ms, err := parseModes("ours-decorrelated+rate+failfast, sdk-adaptive, ours-full", tuning{initialRate: 1})
	require.NoError(t, err)
	require.Len(t, ms, 3)
	r, ok := ms[0].retryer().(*jitterretry.Retryer)
	require.True(t, ok)
	assert.True(t, ms[0].rate)
	assert.True(t, sendWaits(t, r), "expect +rate to turn on the send-rate limiter")
	assert.Equal(t, 4, r.MaxAttempts(), "expect the DynamoDB preset")
	_, ok = ms[1].retryer().(*retry.AdaptiveMode)
	assert.True(t, ok)
	r, ok = ms[2].retryer().(*jitterretry.Retryer)
	require.True(t, ok)
	assert.False(t, ms[2].rate)
	assert.False(t, sendWaits(t, r), "expect no send-rate limiter without +rate")

	// -max-attempts replaces the preset's 4 on ours alone.
	cfg3, err := parseFlags([]string{"-max-attempts", "3", "-modes", "sdk-standard,ours-full+rate"}, &bytes.Buffer{})
	require.NoError(t, err)
	r, ok = cfg3.modes[1].retryer().(*jitterretry.Retryer)
	require.True(t, ok)
	assert.Equal(t, 3, r.MaxAttempts(), "expect -max-attempts on ours")
	assert.Equal(t, 3, cfg3.modes[0].retryer().MaxAttempts(), "expect the SDK's standard retryer's own 3")

	for _, bad := range []string{"", "sdk", "ours-", "ours-full+failfast+rate", "ours-bogus", "ours-full,ours-full"} {
		_, err := parseModes(bad, tuning{})
		assert.Error(t, err, "expect %q rejected", bad)
	}
}

// sendWaits reports whether r's send-rate limiter refuses a second attempt
// at once for want of time before a 200 ms deadline.
func sendWaits(t *testing.T, r *jitterretry.Retryer) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for range 2 {
		release, err := r.GetAttemptToken(ctx)
		var gu *jitterretry.GiveUpError
		if errors.As(err, &gu) {
			require.Equal(t, jitterretry.GiveUpDeadline, gu.Reason, "expect a send-rate wait past the deadline, got %v", err)
			return true
		}
		require.NoError(t, err)
		require.NoError(t, release(nil))
	}
	return false
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []int{64}, cfg.k)
	assert.Len(t, cfg.modes, len(defaultModes))
	require.Len(t, cfg.scenarios, 2)
	assert.Equal(t, 10*time.Second, cfg.scenarios[0].duration())
	assert.Equal(t, 12*time.Second, cfg.scenarios[1].duration())
	assert.Equal(t, 500.0, cfg.load.capacity)
	assert.Equal(t, 2*time.Millisecond, cfg.load.service)
	assert.Equal(t, 1, cfg.load.fleet)
	assert.Zero(t, cfg.load.throttleProb)
	assert.Zero(t, cfg.load.warmup)
	assert.Equal(t, uint64(1), cfg.load.seed)

	cfg, err = parseFlags([]string{"-k", "4,1000", "-scenarios", "drop", "-scale", "0.5"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []int{4, 1000}, cfg.k)
	assert.Equal(t, 6*time.Second, cfg.scenarios[0].duration())

	for _, args := range [][]string{
		{"-k", "0"}, {"-k", "99999"}, {"-capacity", "-1"}, {"-burst", "-1"}, {"-scale", "0"},
		{"-scale", "11"}, {"-scenarios", ","}, {"-modes", "nope"}, {"-service", "-1ms"}, {"extra"},
		{"-initial-rate", "-1"}, {"-initial-rate", "NaN"}, {"-max-attempts", "-1"},
	} {
		_, err := parseFlags(args, &bytes.Buffer{})
		assert.Error(t, err, "expect %q rejected", strings.Join(args, " "))
	}
}

func TestPrintSummaryAndSeconds(t *testing.T) {
	drop := mustScenario(t, scenarioDrop, 1)
	r := result{mode: "ours-full+rate", scen: drop, capacity: 500, successes: 10, requests: 11, okBins: make([]int64, 120),
		seconds: []second{{requests: 700, throttled: 200}, {requests: 510, throttled: 10}}}
	var out bytes.Buffer
	printSummary(&out, []result{r})
	printSeconds(&out, []result{r})
	text := out.String()
	assert.Contains(t, text, "recovery")
	assert.Contains(t, text, "never")
	assert.Contains(t, text, "ours-full+rate")
	assert.Regexp(t, `capacity\s+500\s+500\s+100`, text)
	assert.Regexp(t, `ours-full\+rate\s+700\s+510\s+0`, text)
	assert.Regexp(t, `\+1s %\s+\+2s %\s+\+3s %`, text)
	assert.Regexp(t, `never\s+0\.0\s+0\.0\s+0\.0`, text, "expect no success after the rise")
}

func TestSummaryUnlimited(t *testing.T) {
	steady := mustScenario(t, scenarioSteady, 0.2) // 2 s
	r := result{mode: "ours-full", scen: steady, capacity: math.Inf(1), successes: 800, requests: 1000, throttled: 200,
		seconds: []second{{requests: 500, throttled: 100}, {requests: 500, throttled: 100}}}
	s := summarize(r)
	assert.InDelta(t, 400.0, s.okPerSecond, 1e-9)
	assert.InDelta(t, 1.25, s.callsPerSuccess, 1e-9)
	assert.False(t, s.hasRecovery)

	var out bytes.Buffer
	printSummary(&out, []result{r})
	printSeconds(&out, []result{r})
	text := out.String()
	assert.Regexp(t, `ours-full\s+-\s+400\s+1\.25\s+800\s`, text, "expect no utilisation, 400 ok/s")
	assert.Regexp(t, `capacity\s+inf\s+inf`, text)
	assert.NotContains(t, text, "recovery")

	drop := mustScenario(t, scenarioDrop, 1)
	assert.Equal(t, "unlimited for 2s, unlimited for 5s, unlimited for 5s", drop.describe(math.Inf(1)))
}
