//go:build linux

package emulator

import (
	"fmt"
	"strings"
)

// TypedErrors are the errorTypes the function reports on purpose: a
// *CounterError (a DynamoDB call the retryer gave up on) and a
// *NoTimeError (an invocation that began without time for one attempt).
var TypedErrors = []string{"CounterError", "NoTimeError"}

// Problems lists what went wrong in the run, one sentence each; none when
// every invocation returned before its timeout with a result or one of
// TypedErrors, no invocation timed out, and the counters equal the
// increments that landed, every acknowledged one among them. (CauseLost
// lists the typed errors that do not say why the call failed.)
func (r *Report) Problems() []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if len(r.Invocations) != r.Scenario.Invocations {
		add("%d invocations made, %d planned", len(r.Invocations), r.Scenario.Invocations)
	}
	for _, inv := range r.Invocations {
		id := fmt.Sprintf("invocation %d (%s, try %d)", inv.Seq, inv.RequestID, inv.Try)
		switch inv.Outcome {
		case "ok", "replayed":
		case "error":
			if !typed(inv.ErrorType) {
				add("%s: errorType %q, not one of %v: %s", id, inv.ErrorType, TypedErrors, inv.ErrorMessage)
			}
		case "timeout":
			add("%s: timed out: %s", id, inv.Body)
		default:
			add("%s: no usable answer: status %d, error %v, body %.200q", id, inv.Status, inv.Err, inv.Body)
		}
		switch {
		case inv.Log == nil || !inv.Log.Reported:
			add("%s: no REPORT line from the emulator", id)
		case inv.Log.DurationMs >= r.TimeoutMs() && !returnedInTime(inv):
			add("%s: REPORT Duration %.2f ms, not before the %.0f ms timeout", id, inv.Log.DurationMs, r.TimeoutMs())
		}
		if inv.Log != nil && inv.Log.Record == nil && inv.Outcome != "broken" {
			add("%s: no log record from the function", id)
		}
	}
	if r.TimedOut > 0 {
		add("the emulators' output reports %d timeouts", r.TimedOut)
	}
	if r.DataRaces > 0 {
		add("the race detector reported %d data races in the function", r.DataRaces)
	}
	if r.Panics > 0 {
		add("the emulators' output reports %d panics; the first:\n%s", r.Panics, firstPanic(r.Outputs))
	}
	if len(r.Lost) > 0 {
		add("%d acknowledged increments lost: %s", len(r.Lost), strings.Join(r.Lost, ", "))
	}
	if r.Doubled > 0 {
		add("the counters exceed the increments that landed by %d: applied twice", r.Doubled)
	}
	if r.Missing > 0 {
		add("the counters fall short of the increments that landed by %d", r.Missing)
	}
	return p
}

func typed(errorType string) bool {
	for _, t := range TypedErrors {
		if t == errorType {
			return true
		}
	}
	return false
}

// CauseLost returns the invocations that failed with a CounterError that
// does not wrap the retryer's give-up: the DynamoDB call ended with a bare
// context error (an attempt that ran into the call's deadline), so the
// error does not say why it failed, the throttle or the stall.
func (r *Report) CauseLost() []Invocation {
	var lost []Invocation
	for _, inv := range r.Invocations {
		if inv.Outcome == "error" && inv.ErrorType == "CounterError" &&
			(inv.Log == nil || inv.Log.Record == nil || inv.Log.Record.GaveUp == "") {
			lost = append(lost, inv)
		}
	}
	return lost
}

// firstPanic returns the first "panic: " line of the outputs and the lines
// after it, as far as the first goroutine's frames go, so that a failure
// says whose panic it was (the emulator's or the function's).
func firstPanic(outputs []string) string {
	for env, out := range outputs {
		lines := strings.Split(out, "\n")
		for i, line := range lines {
			if strings.HasPrefix(line, "panic: ") {
				return fmt.Sprintf("env%d: %s", env, strings.Join(lines[i:min(i+20, len(lines))], "\n"))
			}
		}
	}
	return "(not found)"
}

// returnedInTime reports whether the function's own record of inv says it
// returned with time left before Lambda's deadline: a REPORT at the
// timeout after that is the emulator's and the machine's, not the
// function's (a make test beside two others: a REPORT of 2000.00 ms after
// the function logged its return with 689 ms left). An invocation that
// timed out is still a problem of its own (Outcome "timeout", and the
// emulators' count).
func returnedInTime(inv Invocation) bool {
	return inv.Log != nil && inv.Log.Record != nil && inv.Log.Record.LeftMs > 0
}
