//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/examples/lambda/internal/emulator"
)

// TestHandlerUnderTheEmulator runs the function for real: built as
// bootstrap (with the race detector when the test has it), under the AWS
// Lambda Runtime Interface Emulator with a 2 s timeout, against the
// embedded DynamoDB behind a capacity proxy that throttles hard and
// injects 500s, and toxiproxy that stalls responses for good or delays
// them by 1 s on some connections. Eight emulators, one per execution
// environment, run 200 invocations side by side, Lambda's retries of failed
// ones included (the emulator runs one invocation at a time, as Lambda runs
// one per environment). Every invocation must return before its timeout,
// by the emulator's REPORT line, with a result or a typed error in
// Lambda's error JSON; none may time out; and the counters must equal the
// increments that landed, every acknowledged one among them.
func TestHandlerUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var lines strings.Builder
	r, err := emulator.Run(ctx, emulator.Scenario{
		Dir:      t.TempDir(),
		Race:     raceEnabled,
		Progress: func(inv emulator.Invocation) { emulator.WriteInvocation(&lines, inv, 2) },
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("the invocations:\n" + lines.String())
		}
	})
	var summary strings.Builder
	r.WriteSummary(&summary)
	t.Log("under the emulator:\n" + summary.String())

	assert.Empty(t, r.Problems(), "expect every invocation to return before its timeout with a result or a typed error, and no increment lost or doubled")
	assert.Len(t, r.Invocations, 200)
	assert.Zero(t, r.TimedOut, "expect no \"Task timed out\"")
	assert.Empty(t, r.Lost, "expect no acknowledged increment lost")
	assert.Zero(t, r.Doubled, "expect no increment applied twice")
	assert.GreaterOrEqual(t, r.MaxConcurrent(), 2, "expect invocations side by side")

	// The faults must have bitten, or the test proves nothing.
	outcomes := map[string]int{}
	var cut, throttled int64
	for _, inv := range r.Invocations {
		outcomes[inv.Outcome+inv.ErrorType]++
		if inv.Log != nil && inv.Log.Record != nil {
			cut += inv.Log.Record.Cut
			throttled += inv.Log.Record.Throttled
		}
	}
	assert.Positive(t, outcomes["ok"], "expect some increments through the throttling")
	assert.Positive(t, outcomes["errorCounterError"], "expect the throttling to make some invocations give up")
	assert.Positive(t, throttled, "expect throttled attempts")
	assert.Positive(t, cut, "expect attempts cut by the attempt timeout (the stalls and spikes)")
	assert.Positive(t, r.Proxy.LostResponses, "expect responses lost after the write landed")
}
