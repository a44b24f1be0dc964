//go:build linux

// Command emulate runs the counter function of examples/lambda under the
// AWS Lambda Runtime Interface Emulator, as the function's test does (make
// lambda runs it): it builds the function as bootstrap, starts DynamoDB
// (the embedded minidyn) behind a capacity proxy that throttles hard and
// injects 500s and toxiproxy that stalls and delays responses, starts one
// emulator per execution environment, invokes the function many times,
// some side by side, and prints one line per invocation, the emulator's
// log of a few of them as CloudWatch Logs would show them, and the totals.
// It exits 1 when an invocation timed out or returned anything but a
// result or a typed error, or when an increment was lost or applied twice.
//
//	go run ./examples/lambda/cmd/emulate [-invocations 200] [-environments 8] [-timeout 2] [-race]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jitterretry/jitterretry/examples/lambda/internal/emulator"
)

func main() { os.Exit(run()) }

// run runs the scenario and returns the exit code: 0 when the run found no
// problem, 1 when it did, 2 when it could not be made.
func run() int {
	var sc emulator.Scenario
	flag.IntVar(&sc.Invocations, "invocations", 200, "invocations, Lambda's retries of failed ones included")
	flag.IntVar(&sc.Environments, "environments", 8, "emulators (execution environments) invoked side by side")
	flag.IntVar(&sc.Keys, "keys", 4, "counters")
	flag.IntVar(&sc.Timeout, "timeout", 2, "the function's timeout, in whole seconds")
	flag.BoolVar(&sc.Race, "race", false, "build the function with the race detector")
	flag.Uint64Var(&sc.Seed, "seed", 1, "seed of the injected errors and throttles")
	logs := flag.Int("logs", 3, "print the emulator's log lines of this many invocations: a success, a give-up, a Lambda retry")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "jitterretry-lambda-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulate:", err)
		return 2
	}
	defer os.RemoveAll(dir)

	fmt.Printf("building the function and the emulator in %s, then %d invocations on %d environments...\n", dir, sc.Invocations, sc.Environments)
	sc.Dir = dir
	timeout := sc.Timeout
	sc.Progress = func(inv emulator.Invocation) { emulator.WriteInvocation(os.Stdout, inv, timeout) }
	r, err := emulator.Run(ctx, sc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulate:", err)
		return 2
	}

	if *logs > 0 {
		fmt.Println("\nthe log stream of a few invocations (the emulator's START, END and REPORT lines, the function's own record):")
		for _, inv := range pickForLogs(r.Invocations, *logs) {
			fmt.Printf("-- invocation %d (%s, try %d) on env%d:\n", inv.Seq, inv.RequestID, inv.Try, inv.Env)
			for _, line := range inv.Log.Lines {
				fmt.Println("  " + line)
			}
			fmt.Printf("   response: %s\n", strings.TrimSpace(inv.Body))
		}
	}
	fmt.Println()
	r.WriteSummary(os.Stdout)
	if problems := r.Problems(); len(problems) > 0 {
		fmt.Printf("FAIL: %d problems:\n  %s\n", len(problems), strings.Join(problems, "\n  "))
		return 1
	}
	fmt.Println("ok: every invocation returned before its timeout with a result or a typed error; no increment lost or applied twice")
	return 0
}

// pickForLogs picks up to n invocations worth reading: the first success,
// the first give-up, the first Lambda retry, then others.
func pickForLogs(invs []emulator.Invocation, n int) []emulator.Invocation {
	var picked []emulator.Invocation
	seen := map[int]bool{}
	for _, want := range []func(emulator.Invocation) bool{
		func(inv emulator.Invocation) bool { return inv.Outcome == "ok" },
		func(inv emulator.Invocation) bool { return inv.Outcome == "error" },
		func(inv emulator.Invocation) bool { return inv.Try > 1 },
		func(inv emulator.Invocation) bool { return true },
	} {
		for _, inv := range invs {
			if len(picked) == n {
				return picked
			}
			if !seen[inv.Seq] && inv.Log != nil && want(inv) {
				seen[inv.Seq] = true
				picked = append(picked, inv)
				break
			}
		}
	}
	return picked
}
