//go:build linux

package emulator

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An emulator's output as it writes it: its own log lines between
// invocations, and for each invocation START, the function's lines, END
// and REPORT (the first with the function's Init Duration).
const sampleOutput = "01 Dec 2026 01:41:42,545 [WARNING] (rapid) something before\n" +
	"START RequestId: inv-001 Version: $LATEST\n" +
	`{"time":"2026-12-01T01:53:13Z","level":"INFO","msg":"invocation","requestId":"inv-001","key":"k0","outcome":"ok","count":3,"attempts":2,"throttled":1,"cut":0,"durationMs":40,"leftMs":1960}` + "\n" +
	"END RequestId: inv-001\n" +
	"REPORT RequestId: inv-001\tInit Duration: 6.30 ms\tDuration: 41.50 ms\tBilled Duration: 42 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t\n" +
	"START RequestId: inv-002 Version: $LATEST\n" +
	`{"time":"2026-12-01T01:53:14Z","level":"ERROR","msg":"invocation","requestId":"inv-002","key":"k1","outcome":"error","errorType":"CounterError","gaveUp":"deadline","error":"counter: ...","attempts":4,"throttled":3,"cut":1,"durationMs":1490,"leftMs":510}` + "\n" +
	`2026/12/01 01:53:14 {"errorMessage":"counter: ...","errorType":"CounterError"}` + "\n" +
	"END RequestId: inv-002\n" +
	"REPORT RequestId: inv-002\tDuration: 1490.20 ms\tBilled Duration: 1491 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t\n" +
	"START RequestId: inv-002 Version: $LATEST\n" +
	"01 Dec 2026 01:41:51,727 [WARNING] (rapid) Reset initiated: Timeout\n" +
	"END RequestId: inv-002\n" +
	"REPORT RequestId: inv-002\tDuration: 2000.00 ms\tBilled Duration: 2000 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t\n"

func TestParseOutput(t *testing.T) {
	o := ParseOutput(sampleOutput)
	require.Len(t, o.Entries, 3)
	assert.Equal(t, 1, o.TimedOut)

	first := o.Find("inv-001", 0)
	require.NotNil(t, first)
	assert.True(t, first.Started && first.Ended && first.Reported)
	assert.InDelta(t, 41.5, first.DurationMs, 1e-9)
	assert.InDelta(t, 6.3, first.InitDurationMs, 1e-9)
	require.NotNil(t, first.Record)
	assert.Equal(t, Record{Level: "INFO", Msg: "invocation", RequestID: "inv-001", Key: "k0", Outcome: "ok", Count: 3,
		Attempts: 2, Throttled: 1, DurationMs: 40, LeftMs: 1960}, *first.Record)
	assert.Len(t, first.Lines, 4)

	retry := o.Find("inv-002", 0)
	require.NotNil(t, retry)
	assert.InDelta(t, 1490.2, retry.DurationMs, 1e-9)
	assert.Zero(t, retry.InitDurationMs)
	require.NotNil(t, retry.Record)
	assert.Equal(t, "deadline", retry.Record.GaveUp)
	assert.Equal(t, int64(1), retry.Record.Cut)

	again := o.Find("inv-002", 1)
	require.NotNil(t, again, "expect the second try of a request ID on the same emulator apart from the first")
	assert.Nil(t, again.Record)
	assert.InDelta(t, 2000.0, again.DurationMs, 1e-9)
	assert.Nil(t, o.Find("inv-002", 2))
	assert.Nil(t, o.Find("inv-003", 0))
}
