// Command jittersim reproduces the 2015 AWS Architecture Blog experiment
// "Exponential Backoff And Jitter" in virtual time, with the jitterretry
// delayers, the SDK's standard backoff and whole retryers side by side.
//
// With no flags it sweeps N = 10, 20, ..., 190 clients of the blog's
// optimistic-concurrency experiment, 100 runs each, and prints a table:
//
//	go run ./cmd/jittersim
//	go run ./cmd/jittersim -clients 10,50,100 -runs 100 -seed 1 -csv
//	go run ./cmd/jittersim -plot docs/img
//
// -all-old runs the experiment's loop as DynamoDB loops that write with
// ReturnValuesOnConditionCheckFailure=ALL_OLD run it: after a failed write a
// client sleeps and writes again with the version the failed write
// returned, without reading the row again:
//
//	go run ./cmd/jittersim -all-old -strategies contention,full,full-1.5x,sdk
//
// -scenario throttled runs K clients, each with its own retryer, against a
// server of -capacity requests per second:
//
//	go run ./cmd/jittersim -scenario throttled -k 10,100,1000 -capacity 1000 -load 2
//
// Figures are deterministic for a seed, except the rows marked as drawing
// crypto-random numbers (the SDK's own backoff), which vary within their
// standard errors. The elapsed time goes to standard error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jitterretry/jitterretry/cmd/internal/listflag"
	"github.com/jitterretry/jitterretry/internal/sim"
)

// config is the parsed command line.
type config struct {
	scenario   string
	clients    []int
	k          []int
	runs       int
	runsSet    bool
	seed       uint64
	strategies []string
	csv        bool
	plotDir    string
	allOld     bool
	throttle   sim.ThrottleParams
}

const (
	scenarioOCC       = "occ"
	scenarioThrottled = "throttled"
	// defaultThrottledRuns is -runs for the throttled scenario when not
	// given: each run already holds Load*Capacity*Duration operations.
	defaultThrottledRuns = 3
)

var defaultOCCStrategies = []string{
	sim.StrategyNone, sim.StrategyExponential, sim.StrategyFull,
	sim.StrategyEqual, sim.StrategyDecorrelated, sim.StrategySDK,
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "jittersim:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	switch cfg.scenario {
	case scenarioOCC:
		err = runOCC(cfg, stdout)
	case scenarioThrottled:
		err = runThrottled(cfg, stdout)
	}
	if err == nil {
		fmt.Fprintf(stderr, "jittersim: %s finished in %.1fs on GOMAXPROCS=%d\n",
			cfg.scenario, time.Since(start).Seconds(), runtime.GOMAXPROCS(0))
	}
	return err
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("jittersim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        config
		clients    = fs.String("clients", "10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,160,170,180,190", "comma-separated numbers of clients N of the OCC experiment")
		k          = fs.String("k", "10,100,1000", "comma-separated fleet sizes K of the throttled scenario, each client with its own retryer")
		strategies = fs.String("strategies", "", "comma-separated strategies (occ: default "+strings.Join(defaultOCCStrategies, ",")+
			"; also "+strings.Join(otherStrategyNames(), ",")+") or retryers (throttled: default "+strings.Join(sim.DefaultRetryerNames(), ",")+
			"; also "+strings.Join(otherRetryerNames(), ",")+")")
		duration = fs.Duration("duration", sim.DefaultDuration, "throttled: measurement window; operations starting in it are measured")
		warmup   = fs.Duration("warmup", sim.DefaultWarmup, "throttled: load before the window opens, to reach the steady state")
	)
	fs.StringVar(&cfg.scenario, "scenario", scenarioOCC, "occ (the blog's experiment) or throttled (a server-side token bucket)")
	fs.IntVar(&cfg.runs, "runs", 100, fmt.Sprintf("independent runs R averaged per row (throttled: %d when not given)", defaultThrottledRuns))
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of every run's randomness")
	fs.BoolVar(&cfg.csv, "csv", false, "print CSV instead of a table")
	fs.BoolVar(&cfg.allOld, "all-old", false, "occ: retry as an ALL_OLD loop does, writing again with the version the failed write returned, without re-reading")
	fs.StringVar(&cfg.plotDir, "plot", "", "occ: write calls and time against N as SVG and PNG charts into this directory")
	fs.Float64Var(&cfg.throttle.Capacity, "capacity", sim.DefaultCapacity, "throttled: server capacity C, requests per second")
	fs.Float64Var(&cfg.throttle.Burst, "burst", 0, "throttled: server bucket size; 0 means capacity/10")
	fs.Float64Var(&cfg.throttle.Load, "load", sim.DefaultLoad, "throttled: offered operations per second, as a multiple of capacity")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { cfg.runsSet = cfg.runsSet || f.Name == "runs" })
	cfg.throttle.Duration, cfg.throttle.Warmup = *duration, *warmup

	var err error
	if cfg.clients, err = listflag.PositiveInts("clients", *clients); err != nil {
		return cfg, err
	}
	if cfg.k, err = listflag.PositiveInts("k", *k); err != nil {
		return cfg, err
	}
	if cfg.runs < 1 {
		return cfg, fmt.Errorf("invalid -runs %d: must be at least 1", cfg.runs)
	}
	switch cfg.scenario {
	case scenarioOCC:
		cfg.strategies = defaultOCCStrategies
	case scenarioThrottled:
		cfg.strategies = sim.DefaultRetryerNames()
		if !cfg.runsSet {
			cfg.runs = defaultThrottledRuns
		}
		if cfg.plotDir != "" {
			return cfg, errors.New("-plot draws the occ scenario only")
		}
		if cfg.allOld {
			return cfg, errors.New("-all-old applies to the occ scenario only")
		}
	default:
		return cfg, fmt.Errorf("invalid -scenario %q: want %s or %s", cfg.scenario, scenarioOCC, scenarioThrottled)
	}
	if *strategies != "" {
		cfg.strategies = listflag.Split(*strategies)
	}
	return cfg, nil
}

// otherStrategyNames returns the OCC strategies that are not run by
// default: contention and the experimental ones.
func otherStrategyNames() []string {
	def := map[string]bool{}
	for _, n := range defaultOCCStrategies {
		def[n] = true
	}
	var names []string
	for _, n := range sim.StrategyNames() {
		if !def[n] {
			names = append(names, n)
		}
	}
	return names
}

func otherRetryerNames() []string {
	def := map[string]bool{}
	for _, n := range sim.DefaultRetryerNames() {
		def[n] = true
	}
	var names []string
	for _, n := range sim.RetryerNames() {
		if !def[n] {
			names = append(names, n)
		}
	}
	return names
}
