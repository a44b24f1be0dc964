package jitterretry

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResetSparesTheRefusalsOfALoopThatStarted: the last Do loop to end
// empties the refusal log, unless another started meanwhile and logged a
// refusal its own report depends on.
func TestResetSparesTheRefusalsOfALoopThatStarted(t *testing.T) {
	var h hooks
	h.loops.Add(1)                   // loop A runs
	require.Zero(t, h.loops.Add(-1)) // and ends, the last...
	h.loops.Add(1)                   // ...as loop B starts
	refused := errors.New("refused inside B's fn")
	h.refusals.add(refused, &h.loops)
	h.refusals.reset(&h.loops) // A empties the log, late
	logged := h.refusals.snapshot()
	list := logged.list()
	require.Len(t, list, 1)
	assert.Equal(t, refused, list[0].err)

	require.Zero(t, h.loops.Add(-1)) // B ends, the last
	h.refusals.reset(&h.loops)
	h.refusals.add(errors.New("refused as B ended"), &h.loops) // no loop runs: not logged
	logged = h.refusals.snapshot()
	assert.Empty(t, logged.list())
}
