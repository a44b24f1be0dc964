// Command throttlebench measures retryers against a throttling DynamoDB
// table end to end, on real HTTP over loopback: issue 6's benchmark.
//
// For each K and scenario, and for each mode in turn, K goroutines share one
// dynamodb.Client (the real SDK) and call PutItem in a closed loop. The
// client talks to the capacity proxy (internal/capacity), which admits C
// requests per second from a bucket holding -burst seconds of capacity and
// answers the rest with ProvisionedThroughputExceededException in
// DynamoDB's wire format; admitted requests reach a tiny loopback server that
// answers "{}" after -service. Every mode gets a fresh proxy, client and
// retryer, so no run inherits another's bucket or learnt rate.
//
//	go run ./cmd/throttlebench                        # K=64, every mode, steady and drop
//	go run ./cmd/throttlebench -k 4 -modes sdk-default,sdk-standard,sdk-adaptive,ours-full,ours-full+rate
//	go run ./cmd/throttlebench -k 1000 -plot docs/img
//
// Scenarios: steady is 10 s at C; drop is 2 s at C, 5 s at C/5, then 5 s at
// C; -scale multiplies those durations. Modes: sdk-default (the DynamoDB
// client's own retryer), sdk-standard (retry.NewStandard()), sdk-adaptive
// (retry.NewAdaptiveMode()), and ours-JITTER[+rate][+failfast]:
// jitterretry.New(jitterretry.DynamoDB) with that jitter, with the send-rate
// limiter on (+rate), and failing at once on an empty retry budget
// (+failfast) instead of backing off first.
//
// Each run stops by itself: operations still running when the scenario ends
// are cancelled and counted as cut off, not as failures. The elapsed time
// goes to standard error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jitterretry/jitterretry/cmd/internal/listflag"
)

// config is the parsed command line.
type config struct {
	k         []int
	modes     []mode
	scenarios []scenario
	load      loadConfig
	pause     time.Duration
	plotDir   string
}

// maxK bounds -k: every goroutine holds a connection.
const maxK = 5000

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "throttlebench:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var total time.Duration
	for _, s := range cfg.scenarios {
		total += s.duration() + cfg.pause
	}
	total *= time.Duration(len(cfg.k) * len(cfg.modes))
	fmt.Fprintf(stderr, "throttlebench: %d runs, about %v\n", len(cfg.k)*len(cfg.modes)*len(cfg.scenarios), total.Round(time.Second))

	up, err := startUpstream(cfg.load.service)
	if err != nil {
		return err
	}
	defer func() { _ = up.Close() }()

	start := time.Now()
	c := cfg.load.capacity
	fmt.Fprintf(stdout, "throttlebench: capacity C=%g req/s, burst %g (%g s of capacity), service time %v; one shared dynamodb.Client per mode; loopback HTTP\n",
		c, math.Ceil(c*cfg.load.burstSeconds), cfg.load.burstSeconds, cfg.load.service)
	fmt.Fprintln(stdout, legend)
	for _, k := range cfg.k {
		for _, s := range cfg.scenarios {
			fmt.Fprintf(stdout, "\n== K=%d, %s: %s ==\n", k, s.name, s.describe(c))
			var results []result
			for _, m := range cfg.modes {
				r, err := runOne(cfg.load, up, m, k, s)
				if err != nil {
					return err
				}
				results = append(results, r)
				fmt.Fprintf(stderr, "throttlebench: K=%d %s %s: %d ok, %d failed, %d requests\n",
					k, s.name, m.name, r.successes, r.failed.total(), r.requests)
				time.Sleep(cfg.pause)
			}
			printSummary(stdout, results)
			fmt.Fprintln(stdout)
			printSeconds(stdout, results)
			if cfg.plotDir != "" {
				if err := plotRequests(cfg.plotDir, k, s, c, results); err != nil {
					return err
				}
			}
		}
	}
	fmt.Fprintf(stderr, "throttlebench: finished in %.1fs on GOMAXPROCS=%d\n", time.Since(start).Seconds(), runtime.GOMAXPROCS(0))
	return nil
}

const legend = `util % = successes / (capacity × duration); calls/ok = server-seen requests (throttled included) / successes;
failed = operations that returned an error (budget: the client's retry budget refused a retry; max-att: every attempt failed);
cut = operations still running at the planned end (not failures; they and their requests after it are not counted);
p50/p99/max = latency of every operation that returned;
peak ×C = most requests the server saw in one second after the first, over that second's capacity;
thr/s max = most throttled requests in one second; recovery = time after the capacity returns until the successes
of a sliding 1 s window first reach 95% of capacity.`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("throttlebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       config
		k         = fs.String("k", "64", "comma-separated numbers K of goroutines sharing one client (issue 6: 4, 64, 1000)")
		modes     = fs.String("modes", "all", "comma-separated modes, or all: "+strings.Join(defaultModes, ","))
		scenarios = fs.String("scenarios", strings.Join(scenarioNames, ","), "comma-separated scenarios: steady (10 s at C), drop (2 s at C, 5 s at C/5, 5 s at C)")
		scale     = fs.Float64("scale", 1, "multiplies every scenario's durations, in (0, 10]")
		trace     = fs.Bool("trace", false, "print the requests sent and the retry budget of ours with the limiter every second to standard error")
		initial   = fs.Float64("initial-rate", 0, "the send rate, requests per second, the +rate modes start at before the first throttle; 0 is unlimited")
	)
	fs.Float64Var(&cfg.load.capacity, "capacity", 500, "capacity C of the table, requests per second")
	fs.Float64Var(&cfg.load.burstSeconds, "burst", 0.1, "the table's bucket size, in seconds of capacity")
	fs.DurationVar(&cfg.load.service, "service", 2*time.Millisecond, "service time of every admitted request")
	fs.DurationVar(&cfg.load.drain, "drain", 15*time.Second, "longest wait for the goroutines to stop after a run; longer is an error")
	fs.DurationVar(&cfg.pause, "pause", 500*time.Millisecond, "pause between runs")
	fs.StringVar(&cfg.plotDir, "plot", "", "write a chart of server requests per second per mode (SVG and PNG) into this directory")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.k, err = listflag.PositiveInts("k", *k); err != nil {
		return cfg, err
	}
	for _, n := range cfg.k {
		if n > maxK {
			return cfg, fmt.Errorf("invalid -k %d: at most %d", n, maxK)
		}
	}
	if !(*initial >= 0) {
		return cfg, fmt.Errorf("invalid -initial-rate %v: must be zero (unlimited) or positive", *initial)
	}
	if cfg.modes, err = parseModes(*modes, *initial); err != nil {
		return cfg, err
	}
	switch {
	case !(cfg.load.capacity > 0) || math.IsInf(cfg.load.capacity, 1):
		return cfg, fmt.Errorf("invalid -capacity %v: must be positive and finite", cfg.load.capacity)
	case !(cfg.load.burstSeconds > 0) || cfg.load.burstSeconds > 60:
		return cfg, fmt.Errorf("invalid -burst %v: must be in (0, 60] seconds", cfg.load.burstSeconds)
	case cfg.load.service < 0 || cfg.load.service > time.Second:
		return cfg, fmt.Errorf("invalid -service %v: must be in [0, 1s]", cfg.load.service)
	case !(*scale > 0) || *scale > 10:
		return cfg, fmt.Errorf("invalid -scale %v: must be in (0, 10]", *scale)
	case cfg.load.drain <= 0:
		return cfg, fmt.Errorf("invalid -drain %v: must be positive", cfg.load.drain)
	case cfg.pause < 0:
		return cfg, fmt.Errorf("invalid -pause %v: must not be negative", cfg.pause)
	}
	for _, name := range listflag.Split(*scenarios) {
		s, err := newScenario(name, *scale)
		if err != nil {
			return cfg, err
		}
		cfg.scenarios = append(cfg.scenarios, s)
	}
	if len(cfg.scenarios) == 0 {
		return cfg, errors.New("invalid -scenarios: empty list")
	}
	if *trace {
		cfg.load.trace = stderr
	}
	return cfg, nil
}
