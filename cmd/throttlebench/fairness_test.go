package main

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFairnessOf(t *testing.T) {
	nan := math.NaN()
	for name, tc := range map[string]struct {
		ok   []int64
		base float64
		want fairness
	}{
		"even": {[]int64{100, 100, 100, 100}, 800,
			fairness{jain: 1, minOK: 100, maxOK: 100, minShare: 0.125, maxShare: 0.125, fairShare: 0.25}},
		"one client has all": {[]int64{0, 400, 0, 0}, 400,
			fairness{jain: 0.25, minOK: 0, maxOK: 400, minShare: 0, maxShare: 1, fairShare: 0.25}},
		// (3+1)² / (2 × (9+1)) = 0.8.
		"three to one": {[]int64{3, 1}, 8,
			fairness{jain: 0.8, minOK: 1, maxOK: 3, minShare: 0.125, maxShare: 0.375, fairShare: 0.5}},
		// (1+2+3+4)² / (4 × 30) = 100/120.
		"one to four": {[]int64{4, 1, 3, 2}, 20,
			fairness{jain: 100.0 / 120, minOK: 1, maxOK: 4, minShare: 0.05, maxShare: 0.2, fairShare: 0.25}},
		"one client": {[]int64{7}, 10,
			fairness{jain: 1, minOK: 7, maxOK: 7, minShare: 0.7, maxShare: 0.7, fairShare: 1}},
		"no success": {[]int64{0, 0}, 10,
			fairness{jain: nan, minShare: 0, maxShare: 0, fairShare: 0.5}},
		"no base": {[]int64{1, 1}, 0,
			fairness{jain: 1, minOK: 1, maxOK: 1, minShare: nan, maxShare: nan, fairShare: 0.5}},
		"infinite base": {[]int64{1, 1}, math.Inf(1),
			fairness{jain: 1, minOK: 1, maxOK: 1, minShare: nan, maxShare: nan, fairShare: 0.5}},
		"no client": {nil, 10,
			fairness{jain: nan, minShare: nan, maxShare: nan, fairShare: nan}},
	} {
		t.Run(name, func(t *testing.T) {
			got := fairnessOf(tc.ok, tc.base)
			assert.Equal(t, tc.want.minOK, got.minOK)
			assert.Equal(t, tc.want.maxOK, got.maxOK)
			for _, f := range []struct {
				name      string
				want, got float64
			}{
				{"jain", tc.want.jain, got.jain},
				{"min share", tc.want.minShare, got.minShare},
				{"max share", tc.want.maxShare, got.maxShare},
				{"fair share", tc.want.fairShare, got.fairShare},
			} {
				if math.IsNaN(f.want) {
					assert.True(t, math.IsNaN(f.got), "%s: expect NaN, got %v", f.name, f.got)
					continue
				}
				assert.InDelta(t, f.want, f.got, 1e-12, f.name)
			}
		})
	}
}

func TestShareBase(t *testing.T) {
	steady := mustScenario(t, scenarioSteady, 0.5) // 5 s
	ok := []int64{1500, 500}
	assert.InDelta(t, 2500.0, shareBase(result{scen: steady, capacity: 500}, ok, 0), 1e-9,
		"expect the capacity over the run")
	assert.InDelta(t, 1000.0, shareBase(result{scen: steady, capacity: 500}, ok, 3*time.Second), 1e-9,
		"expect the capacity from the offset on")
	assert.InDelta(t, 2000.0, shareBase(result{scen: steady, capacity: math.Inf(1)}, ok, 0), 1e-9,
		"expect every success when unlimited")
	assert.InDelta(t, 2000.0, shareBase(result{scen: steady, capacity: math.Inf(1)}, ok, 3*time.Second), 1e-9,
		"expect the successes given when unlimited, whatever the offset")
}

func TestPrintFairness(t *testing.T) {
	steady := mustScenario(t, scenarioSteady, 0.1) // 1 s
	r := result{mode: "ours-full+rate", scen: steady, capacity: 400, successes: 400, clientOK: []int64{150, 50, 100, 100}}
	var out bytes.Buffer
	printFairness(&out, []result{r})
	text := out.String()
	assert.Contains(t, text, "fairness over the 4 clients (shares of the capacity over the run)")
	// (400)² / (4 × (22500+2500+10000+10000)) = 160000/180000.
	assert.Regexp(t, `ours-full\+rate\s+0\.889\s+12\.50\s+37\.50\s+25\.00\s+50\s+150`, text)

	assert.NotContains(t, text, "once the last joined", "expect no late table when every client started together")

	out.Reset()
	printFairness(&out, []result{{mode: "one", scen: steady, capacity: 400, clientOK: []int64{400}}})
	assert.Empty(t, out.String(), "expect no fairness table for a single client")
}

func TestPrintFairnessAfterALateJoin(t *testing.T) {
	steady := mustScenario(t, scenarioSteady, 0.2) // 2 s
	r := result{mode: "ours-full+rate", scen: steady, capacity: 400, successes: 800,
		clientOK: []int64{300, 300, 200}, joined: 1500 * time.Millisecond, clientSinceJoin: []int64{80, 80, 40}}
	var out bytes.Buffer
	printFairness(&out, []result{r})
	text := out.String()
	// Over the run: 800² / (3 × 220000); from the join on (200 of
	// capacity): 200² / (3 × 14400).
	assert.Regexp(t, `ours-full\+rate\s+0\.970\s+25\.00\s+37\.50\s+33\.33\s+200\s+300\s*\n`, text)
	assert.Contains(t, text, "once the last joined, at 1.5s (shares of the capacity from then; late %: the last client's)")
	assert.Regexp(t, `ours-full\+rate\s+0\.926\s+20\.00\s+40\.00\s+33\.33\s+40\s+80\s+20\.00\s+40\s*\n`, text)
}
