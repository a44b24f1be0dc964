//go:build linux

package emulator

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
)

// LogEntry is what an emulator's output says about one invocation.
type LogEntry struct {
	// RequestID is the invocation's request ID.
	RequestID string
	// Started and Ended report the START and END lines.
	Started, Ended bool
	// Reported is true when a REPORT line was found; DurationMs is its
	// Duration, which the emulator caps at the function's timeout.
	Reported   bool
	DurationMs float64
	// InitDurationMs is the REPORT's Init Duration: the function's start,
	// on an execution environment's first invocation only.
	InitDurationMs float64
	// Record is the function's own log record for the invocation (a JSON
	// line with "msg":"invocation"); nil when it wrote none.
	Record *Record
	// Lines are the lines from START to REPORT, the emulator's and the
	// function's, as CloudWatch Logs shows them.
	Lines []string
}

// Record is the function's log record of one invocation (see the
// function's Handler.Log).
type Record struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	RequestID  string `json:"requestId"`
	Key        string `json:"key"`
	Outcome    string `json:"outcome"`
	Count      int64  `json:"count"`
	ErrorType  string `json:"errorType"`
	GaveUp     string `json:"gaveUp"`
	Error      string `json:"error"`
	Attempts   int64  `json:"attempts"`
	Throttled  int64  `json:"throttled"`
	Cut        int64  `json:"cut"`
	DurationMs int64  `json:"durationMs"`
	LeftMs     int64  `json:"leftMs"`
}

// Output is an emulator's output, parsed.
type Output struct {
	// Entries are the invocations, in the order they started. A request
	// ID appears more than once when Lambda's retry of a failed invocation
	// ran on the same execution environment.
	Entries []*LogEntry
	// TimedOut counts the emulator's timeouts ("Task timed out", or its
	// "Reset initiated: Timeout" log line).
	TimedOut int
	// DataRaces counts the race detector's reports from a function built
	// with -race.
	DataRaces int
	// Panics counts Go panics in the emulator or the function.
	Panics int
}

// ParseOutput parses an emulator's output. An invocation's lines run from
// its START to its REPORT: the emulator runs one invocation at a time.
func ParseOutput(out string) Output {
	var o Output
	var cur *LogEntry
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "Task timed out"), strings.Contains(line, "Reset initiated: Timeout"):
			o.TimedOut++
		case strings.Contains(line, "WARNING: DATA RACE"):
			o.DataRaces++
		case strings.HasPrefix(line, "panic: "):
			o.Panics++
		}
		if id, ok := field(line, "START RequestId: "); ok {
			cur = &LogEntry{RequestID: id, Started: true}
			o.Entries = append(o.Entries, cur)
		}
		if cur == nil {
			continue // the emulator's own lines between invocations
		}
		cur.Lines = append(cur.Lines, line)
		if id, ok := field(line, "END RequestId: "); ok && id == cur.RequestID {
			cur.Ended = true
		}
		if strings.HasPrefix(line, "{") && strings.Contains(line, `"msg":"invocation"`) {
			var r Record
			if json.Unmarshal([]byte(line), &r) == nil && r.RequestID == cur.RequestID {
				cur.Record = &r
			}
		}
		if id, ok := field(line, "REPORT RequestId: "); ok && id == cur.RequestID {
			cur.Reported = true
			cur.DurationMs = reportMs(line, "\tDuration: ")
			cur.InitDurationMs = reportMs(line, "Init Duration: ")
			cur = nil
		}
	}
	return o
}

// Find returns the nth (from 0) entry of requestID, or nil.
func (o Output) Find(requestID string, nth int) *LogEntry {
	for _, e := range o.Entries {
		if e.RequestID == requestID {
			if nth == 0 {
				return e
			}
			nth--
		}
	}
	return nil
}

// field returns the request ID after prefix at the start of line.
func field(line, prefix string) (string, bool) {
	if !strings.HasPrefix(line, prefix) {
		return "", false
	}
	id, _, _ := strings.Cut(line[len(prefix):], " ")
	id, _, _ = strings.Cut(id, "\t")
	return id, id != ""
}

// reportMs returns the milliseconds after label in a REPORT line, or 0.
func reportMs(line, label string) float64 {
	_, rest, ok := strings.Cut(line, label)
	if !ok {
		return 0
	}
	v, _, _ := strings.Cut(rest, " ms")
	ms, _ := strconv.ParseFloat(v, 64)
	return ms
}
