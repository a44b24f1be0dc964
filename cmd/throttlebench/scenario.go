package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// phase is a stretch of a scenario at a fixed capacity, given as a fraction
// of the nominal capacity C.
type phase struct {
	dur  time.Duration
	frac float64
}

// scenario is a named sequence of capacity phases.
type scenario struct {
	name   string
	phases []phase
}

const (
	scenarioSteady = "steady"
	scenarioDrop   = "drop"
	scenarioSwing  = "swing"
)

var scenarioNames = []string{scenarioSteady, scenarioDrop, scenarioSwing}

// newScenario returns the scenario called name with its durations
// multiplied by scale: steady is 10 s at C; drop is 2 s at C, 5 s at C/5,
// then 5 s at C again; swing is 10 s alternating between C and C/5 every
// swing (not scaled), starting at C, the last level cut at the end.
func newScenario(name string, scale float64, swing time.Duration) (scenario, error) {
	s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	switch name {
	case scenarioSteady:
		return scenario{name, []phase{{s(10 * time.Second), 1}}}, nil
	case scenarioDrop:
		return scenario{name, []phase{{s(2 * time.Second), 1}, {s(5 * time.Second), 0.2}, {s(5 * time.Second), 1}}}, nil
	case scenarioSwing:
		total := s(10 * time.Second)
		if swing <= 0 || swing > total {
			return scenario{}, fmt.Errorf("invalid -swing %v: must be positive and at most the scenario's %v", swing, total)
		}
		var phases []phase
		for at, high := time.Duration(0), true; at < total; at, high = at+swing, !high {
			p := phase{dur: min(swing, total-at), frac: 1}
			if !high {
				p.frac = 0.2
			}
			phases = append(phases, p)
		}
		return scenario{name, phases}, nil
	}
	return scenario{}, fmt.Errorf("invalid scenario %q: want one of %s", name, strings.Join(scenarioNames, ", "))
}

// duration returns the scenario's total length.
func (s scenario) duration() time.Duration {
	var d time.Duration
	for _, p := range s.phases {
		d += p.dur
	}
	return d
}

// capacityBetween returns the requests the server can admit between from and
// to (offsets from the scenario's start) at nominal capacity c per second:
// the integral of the capacity, ignoring the initial burst. Time past the
// last phase counts at the last phase's capacity.
func (s scenario) capacityBetween(c float64, from, to time.Duration) float64 {
	if to <= from || len(s.phases) == 0 {
		return 0
	}
	var total float64
	var start time.Duration
	for i, p := range s.phases {
		end := start + p.dur
		if i == len(s.phases)-1 && to > end {
			end = to
		}
		lo, hi := max(from, start), min(to, end)
		if hi > lo {
			total += c * p.frac * (hi - lo).Seconds()
		}
		start = end
	}
	return total
}

// recovery returns when the scenario's one rise of capacity happens, and
// false when it has none, or several (swing), which no one recovery time
// describes.
func (s scenario) recovery() (time.Duration, bool) {
	var at, start time.Duration
	rises := 0
	for i, p := range s.phases {
		if i > 0 && p.frac > s.phases[i-1].frac {
			at = start
			rises++
		}
		start += p.dur
	}
	return at, rises == 1
}

// describe returns a one-line description such as "500/s for 2s, 100/s for
// 5s", or "unlimited for 10s" when c is +Inf; a swing reads "500/s and
// 100/s in turn every 500ms for 10s".
func (s scenario) describe(c float64) string {
	if s.name == scenarioSwing && len(s.phases) > 1 {
		return fmt.Sprintf("%g/s and %g/s in turn every %v for %v", c*s.phases[0].frac, c*s.phases[1].frac, s.phases[0].dur, s.duration())
	}
	parts := make([]string, len(s.phases))
	for i, p := range s.phases {
		if math.IsInf(c, 1) {
			parts[i] = fmt.Sprintf("unlimited for %v", p.dur)
		} else {
			parts[i] = fmt.Sprintf("%g/s for %v", c*p.frac, p.dur)
		}
	}
	return strings.Join(parts, ", ")
}
