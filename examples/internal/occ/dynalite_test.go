package occ

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// These tests run against dynalite, a separate DynamoDB-compatible server
// built on LevelDB, started by `make test` (tools/dynalite/run.sh), which
// exports its URL as AWS_ENDPOINT_URL_DYNAMODB. They skip when it is unset.
// dynalite has no transactions, ignores ReturnValuesOnConditionCheckFailure
// and never throttles: the capacity proxy throttles, and the workload falls
// back to consistent re-reads after a conflict.

func TestDynaliteNoLostUpdatesUnderThrottling(t *testing.T) {
	scenarioNoLostUpdates(t, dynalite(t), StrategyNames()[1:], false)
}

func TestDynaliteLostWriteRecognisedByReRead(t *testing.T) {
	reads := scenarioLostWriteRecognised(t, dynalite(t), false)
	assert.Greater(t, reads, 1, "expect a re-read after the condition failure, since dynalite ignores ALL_OLD")
}

func TestDynaliteCapacityDropThenRecover(t *testing.T) {
	scenarioCapacityDropThenRecover(t, dynalite(t))
}
