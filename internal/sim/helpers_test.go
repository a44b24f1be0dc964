package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// mustStrategy returns the strategy called name or fails the test.
func mustStrategy(t *testing.T, name string) Strategy {
	t.Helper()
	st, err := LookupStrategy(name)
	require.NoError(t, err)
	return st
}

// mustRetryer returns the retryer called name or fails the test.
func mustRetryer(t *testing.T, name string) Retryer {
	t.Helper()
	rt, err := LookupRetryer(name)
	require.NoError(t, err)
	return rt
}

// rowsByStrategy indexes a sweep's rows of one N by strategy name.
func rowsByStrategy(rows []OCCRow, n int) map[string]OCCRow {
	m := map[string]OCCRow{}
	for _, r := range rows {
		if r.Clients == n {
			m[r.Strategy] = r
		}
	}
	return m
}
