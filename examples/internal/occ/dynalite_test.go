package occ

import (
	"testing"

	"github.com/jitterretry/jitterretry/internal/capacity"

	"github.com/stretchr/testify/assert"
)

// These tests run against dynalite, a separate DynamoDB-compatible server
// built on LevelDB, started by `make test` (tools/dynalite/run.sh), which
// exports its URL as AWS_ENDPOINT_URL_DYNAMODB. They skip when it is unset.
// dynalite has no transactions, ignores ReturnValuesOnConditionCheckFailure
// and never throttles: the capacity proxy throttles, and the workload falls
// back to consistent re-reads after a conflict.

func TestDynaliteNoLostUpdatesUnderThrottling(t *testing.T) {
	// A bucket of 3 tokens: the workers' first requests, sent together, are
	// throttled however slow dynalite is (on a busy machine it once kept
	// under the 60 a second of a 1 s bucket for a whole run, and the test's
	// "the proxy throttled" failed).
	scenarioNoLostUpdates(t, dynalite(t), StrategyNames()[1:], false, func(o *capacity.Options) { o.BurstSeconds = 0.05 })
}

func TestDynaliteLostWriteRecognisedByReRead(t *testing.T) {
	reads := scenarioLostWriteRecognised(t, dynalite(t), false)
	assert.Greater(t, reads, 1, "expect a re-read after the condition failure, since dynalite ignores ALL_OLD")
}

func TestDynaliteCapacityDropThenRecover(t *testing.T) {
	scenarioCapacityDropThenRecover(t, dynalite(t))
}
