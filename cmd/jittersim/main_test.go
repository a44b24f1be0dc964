package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCSVHeaderIsIssue4s(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run([]string{"-clients", "10,20", "-runs", "2", "-strategies", "full,decorrelated", "-csv"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := "clients,strategy,calls,calls_se,time_ms,time_se,p50_ms,p99_ms"; lines[0] != want {
		t.Fatalf("expect header %q, got %q", want, lines[0])
	}
	if len(lines) != 5 {
		t.Fatalf("expect 4 rows, got %d: %q", len(lines)-1, lines)
	}
	if !strings.HasPrefix(lines[4], "20,decorrelated,") {
		t.Fatalf("expect rows ordered by N then strategy, got %q", lines[4])
	}
}

func TestDefaultStrategiesAreTheBlogsAndTheSDKs(t *testing.T) {
	cfg, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(cfg.strategies, ","), "none,exponential,full,equal,decorrelated,sdk"; got != want {
		t.Fatalf("expect strategies %s, got %s", want, got)
	}
	if cfg.runs != 100 || len(cfg.clients) != 19 || cfg.clients[0] != 10 || cfg.clients[18] != 190 {
		t.Fatalf("expect 100 runs of N=10..190, got %d runs of %v", cfg.runs, cfg.clients)
	}
}

// TestAllOldLoop: -all-old runs the OCC experiment with ALL_OLD loops,
// which write again with the version a conflict returned, and says so.
func TestAllOldLoop(t *testing.T) {
	table := func(args ...string) string {
		var out bytes.Buffer
		if err := run(append([]string{"-clients", "20", "-runs", "3", "-strategies", "contention,full", "-csv"}, args...), &out, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if reread, allOld := table(), table("-all-old"); reread == allOld {
		t.Fatalf("expect -all-old to change the runs, got the same rows\n%s", allOld)
	}
	var out bytes.Buffer
	if err := run([]string{"-clients", "10", "-runs", "2", "-strategies", "full", "-all-old"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "loop ALL_OLD") {
		t.Fatalf("expect the table to name the ALL_OLD loop, got\n%s", out.String())
	}
}

func TestPlotWritesSVGAndPNG(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"-clients", "10,20,30", "-runs", "2", "-plot", dir}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"occ_calls.svg", "occ_calls.png", "occ_time.svg", "occ_time.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Fatalf("expect a non-empty %s, got %v", f, err)
		}
	}
}

func TestThrottledScenario(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-scenario", "throttled", "-k", "5,20", "-capacity", "200", "-duration", "1s", "-warmup", "1s", "-strategies", "none,jitterretry-full"}
	if err := run(args, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"capacity 200 req/s", "jitterretry-full", "3 runs per row"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("expect %q in the table, got\n%s", want, out.String())
		}
	}
}

func TestBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"zero clients":      {"-clients", "0,10"},
		"not a number":      {"-clients", "ten"},
		"zero runs":         {"-runs", "0"},
		"unknown scenario":  {"-scenario", "bursty"},
		"unknown strategy":  {"-strategies", "full,half", "-clients", "10", "-runs", "1"},
		"unknown retryer":   {"-scenario", "throttled", "-strategies", "adaptive", "-k", "2"},
		"plot throttled":    {"-scenario", "throttled", "-plot", "x"},
		"all-old throttled": {"-scenario", "throttled", "-all-old"},
		"extra argument":    {"occ"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
				t.Fatalf("expect an error for %q", args)
			}
		})
	}
}
