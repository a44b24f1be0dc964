package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-workers", "3", "-strategies", "full, decorrelated", "-endpoint", ""}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3, o.workers)
	assert.Equal(t, []string{"full", "decorrelated"}, o.strategies)

	for name, args := range map[string][]string{
		"unknown strategy": {"-strategies", "linear"},
		"no strategy":      {"-strategies", ","},
		"zero workers":     {"-workers", "0"},
		"zero capacity":    {"-capacity", "0"},
		"rate above one":   {"-lost-responses", "1.5"},
		"stray argument":   {"extra"},
		"zero timeout":     {"-timeout", "0s"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseFlags(args, io.Discard)
			require.Error(t, err)
		})
	}
}

func TestRunPrintsTheTableAndTheVerdict(t *testing.T) {
	var out bytes.Buffer
	ok, err := run(context.Background(), options{
		workers: 4, increments: 3, items: 2, capacity: 1000, lostResponses: 0.1,
		strategies: []string{"sdk-standard", "decorrelated"}, seed: 1, timeout: defaultTimeout,
	}, &out, io.Discard)
	require.NoError(t, err)
	assert.True(t, ok, out.String())
	text := out.String()
	assert.Contains(t, text, "server: embedded minidyn at http://127.0.0.1:")
	assert.Contains(t, text, "sdk-standard")
	assert.Contains(t, text, "decorrelated")
	assert.Equal(t, 2, strings.Count(text, "ok (2/2 items)"))
	assert.True(t, strings.HasSuffix(text, "lost updates: 0\n"), "expect the verdict last, got %q", text)
}
