package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/delayers"
)

// spyBackoff records what each of its client's conflicts reports, and
// sleeps 1 ms.
type spyBackoff struct {
	client  int
	reports *[]spyReport
}

type spyReport struct {
	client, seen, current int
	took                  time.Duration
}

func (spyBackoff) Delay(int) (time.Duration, error) { return time.Millisecond, nil }

func (b spyBackoff) Conflict(_, took time.Duration, seen, current int) time.Duration {
	*b.reports = append(*b.reports, spyReport{client: b.client, seen: seen, current: current, took: took})
	return time.Millisecond
}

// spyStrategy gives each client of a run a spyBackoff of its own.
func spyStrategy(reports *[]spyReport) Strategy {
	return Strategy{Name: "spy", Reproducible: true, newRun: func(Params, delayers.Source) (func() Backoff, error) {
		client := 0
		return func() Backoff {
			client++
			return spyBackoff{client: client, reports: reports}
		}, nil
	}}
}

// TestRunOCCAllOldWritesWithTheReturnedVersion: with AllOld a client's
// retry writes with the version its failed write returned, without a read,
// so it takes one round trip; the blog's loop re-reads, and its retries
// take two.
func TestRunOCCAllOldWritesWithTheReturnedVersion(t *testing.T) {
	for _, allOld := range []bool{false, true} {
		var reports []spyReport
		r, err := RunOCC(Params{AllOld: allOld}, spyStrategy(&reports), 20, 1, 0)
		require.NoError(t, err)
		require.Len(t, r.Done, 20)
		assert.Equal(t, len(reports)+20, r.Calls, "allOld %v: expect one write per conflict and one success per client", allOld)
		last := map[int]spyReport{}
		stale, retries := 0, 0
		for _, rep := range reports {
			prev, retry := last[rep.client]
			last[rep.client] = rep
			if !retry {
				continue
			}
			retries++
			if rep.seen == prev.current {
				stale++
			}
			// Four messages of |N(10 ms, 2 ms)| for a read and a write,
			// two for a write alone.
			if allOld {
				assert.Less(t, rep.took, 35*time.Millisecond, "expect an ALL_OLD retry to be one round trip")
			} else {
				assert.Greater(t, rep.took, 25*time.Millisecond, "expect a re-reading retry to be two round trips")
			}
		}
		require.Positive(t, retries)
		if allOld {
			assert.Equal(t, retries, stale, "expect every ALL_OLD retry to write with the version its conflict returned")
		} else {
			assert.Less(t, stale, retries, "expect re-reading retries to see the wins since their conflict")
		}
	}
}

// TestContentionBeatsFullJitterInBothLoops: Contention learns the load in
// both kinds of loop and makes fewer calls than full jitter, re-reading or
// ALL_OLD (about 0.45 to 0.6 times as many at 100 runs; a wide margin here).
func TestContentionBeatsFullJitterInBothLoops(t *testing.T) {
	for _, allOld := range []bool{false, true} {
		rows, err := SweepOCC(OCCConfig{Clients: []int{40, 100}, Runs: 10, Seed: 1, Params: Params{AllOld: allOld},
			Strategies: []Strategy{mustStrategy(t, StrategyContention), mustStrategy(t, StrategyFull)}})
		require.NoError(t, err)
		for _, n := range []int{40, 100} {
			m := rowsByStrategy(rows, n)
			c, f := m[StrategyContention], m[StrategyFull]
			assert.Less(t, c.Calls.Mean, 0.8*f.Calls.Mean, "allOld %v, N=%d: expect contention to make fewer calls than full jitter", allOld, n)
			assert.Less(t, c.TimeMs.Mean, 1.2*f.TimeMs.Mean, "allOld %v, N=%d: expect contention about as fast as full jitter or faster", allOld, n)
		}
	}
}
