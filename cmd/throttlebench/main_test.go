package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	up, err := startUpstream(0)
	require.NoError(t, err)
	defer func() { _ = up.Close() }()
	m, err := parseMode("ours-full", 0)
	require.NoError(t, err)
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
