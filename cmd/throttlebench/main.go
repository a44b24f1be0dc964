// Command throttlebench measures retryers against a throttling DynamoDB
// table end to end, on real HTTP over loopback: issue 6's benchmark.
//
// For each K and scenario, and for each mode in turn, K goroutines share one
// dynamodb.Client (the real SDK) and call PutItem in a closed loop. The
// client talks to the capacity proxy (internal/capacity), which admits C
// requests per second from a bucket holding -burst seconds of capacity and
// answers the rest with ProvisionedThroughputExceededException in
// DynamoDB's wire format; admitted requests reach a tiny loopback server that
// answers "{}" after -service. Every mode gets a fresh proxy, clients and
// retryers, so no run inherits another's bucket or learnt rate.
//
//	go run ./cmd/throttlebench                        # K=64, every mode, steady and drop
//	go run ./cmd/throttlebench -k 4 -modes sdk-default,sdk-standard,sdk-adaptive,ours-full,ours-full+rate
//	go run ./cmd/throttlebench -k 1000 -plot docs/img
//
// Scenarios: steady is 10 s at C; drop is 2 s at C, 5 s at C/5, then 5 s at
// C; -scale multiplies those durations; swing (not run by default) is 10 s
// alternating between C and C/5 every -swing (500 ms). Modes: sdk-default (the DynamoDB
// client's own retryer), sdk-standard (retry.NewStandard()), sdk-adaptive
// (retry.NewAdaptiveMode()), and ours-JITTER[+rate][+failfast]:
// jitterretry.New(jitterretry.DynamoDB) with that jitter, with the send-rate
// limiter on (+rate), and failing at once on an empty retry budget
// (+failfast) instead of backing off first.
//
// Issue 15's variations: -fleet N runs N clients, each with its own
// retryer, dynamodb.Client and K goroutines, against the one table, and
// reports how fairly they shared it; -throttle-prob P has the proxy
// throttle each request with probability P whatever the load (with
// -capacity 0, an unlimited table, only those); -warmup D runs the clients
// for D at unlimited capacity before the scenario, on the same retryers, so
// that what a limiter learnt carries over (an operation started in the
// warm-up counts when its last attempt was sent in the scenario); -late D
// starts a fleet's last client D into the scenario, fresh, and reports the
// fleet's fairness from then on, with that client's share; -deadline gives
// every operation a deadline, fixed or drawn from a range, as callers with
// per-request timeouts do.
//
//	go run ./cmd/throttlebench -fleet 16 -k 4 -scenarios steady -modes sdk-standard,ours-full,ours-full+rate
//	go run ./cmd/throttlebench -fleet 16 -k 4 -late 5s -scenarios steady -modes sdk-standard,ours-full,ours-full+rate
//	go run ./cmd/throttlebench -capacity 0 -throttle-prob 0.2 -k 8 -scenarios steady
//	go run ./cmd/throttlebench -k 64 -warmup 1s -scenarios drop -initial-rate 500
//	go run ./cmd/throttlebench -k 256 -deadline 200ms,500ms -scenarios steady,swing -modes ours-full,ours-full+rate
//
// Ours use the DynamoDB preset (4 attempts, as the DynamoDB client's own
// default, sdk-default); -max-attempts 3 gives them New's default, as
// sdk-standard has. A fleet's fairness depends on it: an operation
// throttled three times backs off up to 7 s before its fourth attempt.
//
//	go run ./cmd/throttlebench -fleet 100 -k 2 -max-attempts 3 -scenarios steady -modes sdk-standard,ours-full,ours-full+rate
//
// -plot-metrics DIR charts what our retryers report through their own
// instruments (Options.MeterProvider, as the README's "Hooks and
// observability" section lists them): the retry bucket's tokens
// (jitterretry.bucket.tokens) and the rate the send-rate limiter allows
// (jitterretry.send_rate.limit), sampled every 100 ms from an OpenTelemetry
// ManualReader during each run of the ours-* modes.
//
//	go run ./cmd/throttlebench -k 64 -scenarios drop -modes ours-full,ours-full+rate -plot-metrics docs/img
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
	"slices"
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
	// metricsDir receives the charts of ours' gauges (-plot-metrics);
	// cfg.load.gauges is set with it.
	metricsDir string
}

// maxK bounds -k times -fleet: every goroutine holds a connection.
const maxK = 5000

// defaultSwing is how long each level of the swing scenario lasts: half a
// second, a swing under which the limiter settled low (issue 15's review).
const defaultSwing = 500 * time.Millisecond

// maxWarmup bounds -warmup, which every run pays.
const maxWarmup = time.Minute

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
		total += cfg.load.warmup + s.duration() + cfg.pause
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
	fmt.Fprintln(stdout, describeLoad(cfg.load))
	fmt.Fprintln(stdout, legend)
	if cfg.load.fleet > 1 {
		fmt.Fprintln(stdout, fleetLegend)
	}
	for _, k := range cfg.k {
		label := runLabel(cfg.load.fleet, k)
		for _, s := range cfg.scenarios {
			fmt.Fprintf(stdout, "\n== %s, %s: %s ==\n", label, s.name, s.describe(c))
			var results []result
			for _, m := range cfg.modes {
				r, err := runOne(cfg.load, up, m, k, s)
				if err != nil {
					return err
				}
				results = append(results, r)
				fmt.Fprintf(stderr, "throttlebench: %s %s %s: %d ok, %d failed, %d requests",
					label, s.name, m.name, r.successes, r.failed.total(), r.requests)
				if cfg.load.warmup > 0 {
					fmt.Fprintf(stderr, " (and %d ok in the warm-up, not counted; %d operations started in it counted, their last attempt sent after it)", r.warmupOK, r.carried)
				}
				fmt.Fprintln(stderr)
				time.Sleep(cfg.pause)
			}
			printSummary(stdout, results)
			if cfg.load.fleet > 1 {
				fmt.Fprintln(stdout)
				printFairness(stdout, results)
			}
			fmt.Fprintln(stdout)
			printSeconds(stdout, results)
			if cfg.plotDir != "" {
				if err := plotRequests(cfg.plotDir, cfg.load.fleet, k, s, c, results); err != nil {
					return err
				}
			}
			if cfg.metricsDir != "" {
				if err := plotMetrics(cfg.metricsDir, cfg.load.fleet, k, s, c, results); err != nil {
					return err
				}
			}
		}
	}
	fmt.Fprintf(stderr, "throttlebench: finished in %.1fs on GOMAXPROCS=%d\n", time.Since(start).Seconds(), runtime.GOMAXPROCS(0))
	return nil
}

const legend = `util % = successes / (capacity × duration), - when unlimited; ok/s = successes / duration;
calls/ok = server-seen requests (throttled included) / successes;
failed = operations that returned an error (budget: the client's retry budget refused a retry; max-att: every attempt failed;
deadline: the operation's -deadline ended it, or the retryer gave up for it);
cut = operations still running at the planned end (not failures; they and their requests after it are not counted);
p50/p99/max = latency of every operation that returned;
peak ×C = most requests the server saw in one second after the first, over that second's capacity;
thr/s max = most throttled requests in one second; recovery = time after the capacity returns until the successes
of a sliding 1 s window first reach 95% of capacity; +Ns % = successes in the Nth whole second after the capacity
returns, over that second's capacity (- when the run ended first).`

const fleetLegend = `fleet: Jain = (Σx)² / (N·Σx²) over the N clients' successes x (1 is even, 1/N is one client with all);
min/max share % = the least and the most successes of one client over the capacity of the run
(over all successes when unlimited), next to the fair share 100/N; min/max ok = those successes.`

// describeLoad returns the line that opens the report: the table, the
// service, and how the clients meet them.
func describeLoad(l loadConfig) string {
	var b strings.Builder
	b.WriteString("throttlebench: ")
	if math.IsInf(l.capacity, 1) {
		b.WriteString("capacity unlimited")
	} else {
		fmt.Fprintf(&b, "capacity C=%g req/s, burst %g (%g s of capacity)", l.capacity, math.Ceil(l.capacity*l.burstSeconds), l.burstSeconds)
	}
	fmt.Fprintf(&b, ", service time %v", l.service)
	if l.throttleProb > 0 {
		fmt.Fprintf(&b, "; random throttles: each request with probability %g whatever the load (seed %d)", l.throttleProb, l.seed)
	}
	if l.deadline.set() {
		fmt.Fprintf(&b, "; every operation under a deadline of %v", l.deadline)
		if l.deadline.lo != l.deadline.hi {
			b.WriteString(" (uniform)")
		}
	}
	if l.fleet > 1 {
		fmt.Fprintf(&b, "; a fleet of %d clients per mode, each with its own retryer, dynamodb.Client and K goroutines", l.fleet)
		if l.late > 0 {
			fmt.Fprintf(&b, ", the last joining fresh %v after the scenario's start", l.late)
		}
	} else {
		b.WriteString("; one shared dynamodb.Client per mode")
	}
	if l.warmup > 0 {
		fmt.Fprintf(&b, "; a warm-up of %v at unlimited capacity without random throttles on the same clients before each run,"+
			" not counted (the server's counts start with the scenario; an operation started before it counts only when its"+
			" last attempt was sent in it, as one a limiter's queue carried over, and its latency then includes its wait in the warm-up)", l.warmup)
	}
	b.WriteString("; loopback HTTP")
	return b.String()
}

// runLabel names the clients of a run: "K=64", or "16 clients × K=4".
func runLabel(fleet, k int) string {
	if fleet > 1 {
		return fmt.Sprintf("%d clients × K=%d", fleet, k)
	}
	return fmt.Sprintf("K=%d", k)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("throttlebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       config
		k         = fs.String("k", "64", "comma-separated numbers K of goroutines sharing one client, per client with -fleet (issue 6: 4, 64, 1000)")
		modes     = fs.String("modes", "all", "comma-separated modes, or all: "+strings.Join(defaultModes, ","))
		scenarios = fs.String("scenarios", scenarioSteady+","+scenarioDrop, "comma-separated scenarios: steady (10 s at C), drop (2 s at C, 5 s at C/5, 5 s at C),\n"+
			"swing (10 s alternating between C and C/5 every -swing)")
		scale    = fs.Float64("scale", 1, "multiplies every scenario's durations, in (0, 10]")
		trace    = fs.Bool("trace", false, "print the requests sent and the retry budget of ours with the limiter every second to standard error (with -fleet: every client's requests, the first client's budget)")
		initial  = fs.Float64("initial-rate", 0, "the send rate, requests per second, the +rate modes start at before the first throttle; 0 is unlimited")
		attempts = fs.Int("max-attempts", 0, "MaxAttempts of the ours-* modes; 0 keeps the DynamoDB preset's 4 (the DynamoDB client's own default);\n"+
			"3 is jitterretry.New()'s default and retry.NewStandard()'s, as sdk-standard has")
		swing    = fs.Duration("swing", defaultSwing, "how long each level of the swing scenario lasts (not scaled by -scale)")
		deadline = fs.String("deadline", "", "give every operation a deadline: one duration (300ms), or two separated by a comma (200ms,500ms)\n"+
			"for one drawn uniformly between them per operation; an operation it ends counts as a deadline failure; empty sets none")
	)
	fs.Float64Var(&cfg.load.capacity, "capacity", 500, "capacity C of the table, requests per second; 0 is unlimited, to measure -throttle-prob's throttles alone (steady only)")
	fs.IntVar(&cfg.load.fleet, "fleet", 1, "number N of clients, each with its own retryer (a fresh one of the mode), dynamodb.Client and -k goroutines, sharing the table;\n"+
		"with N > 1 the report adds Jain's fairness index and the clients' least and most share of the capacity")
	fs.Float64Var(&cfg.load.throttleProb, "throttle-prob", 0, "probability in [0, 1] that the proxy throttles a request whatever the load, on top of the capacity")
	fs.Uint64Var(&cfg.load.seed, "seed", 1, "seed of the proxy's random throttles (-throttle-prob) and of the operations' deadlines (-deadline), the same for every run")
	fs.DurationVar(&cfg.load.warmup, "warmup", 0, "before each run, run the same clients and retryers for this long at unlimited capacity without random throttles;\n"+
		"the warm-up's requests are not counted, nor its operations unless their last attempt was sent after it")
	fs.DurationVar(&cfg.load.late, "late", 0, "with -fleet, start the last client this long after the scenario's start, fresh (it misses the warm-up);\n"+
		"the report adds the fleet's fairness from then on and that client's share; 0 starts every client together")
	fs.Float64Var(&cfg.load.burstSeconds, "burst", 0.1, "the table's bucket size, in seconds of capacity")
	fs.DurationVar(&cfg.load.service, "service", 2*time.Millisecond, "service time of every admitted request")
	fs.DurationVar(&cfg.load.drain, "drain", 15*time.Second, "longest wait for the goroutines to stop after a run; longer is an error")
	fs.DurationVar(&cfg.pause, "pause", 500*time.Millisecond, "pause between runs")
	fs.StringVar(&cfg.plotDir, "plot", "", "write a chart of server requests per second per mode (SVG and PNG) into this directory")
	fs.StringVar(&cfg.metricsDir, "plot-metrics", "", "give the retryer of every client of the ours-* modes an OpenTelemetry meter provider of its own (one per client:\n"+
		"on a shared one a fleet's retryers would report under the same attributes), sample its gauges jitterretry.bucket.tokens\n"+
		"and jitterretry.send_rate.limit every 100 ms, and write a chart per scenario of both over time, one line per mode\n"+
		"(SVG and PNG, *_metrics), into this directory; with -fleet the line is the mean over the clients and a band runs\n"+
		"from the least to the most (the rate over the clients whose limiter is limited); the sdk-* modes are left out,\n"+
		"and ours pay the small cost of recording their instruments")
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
	if cfg.load.deadline, err = parseDeadline(*deadline); err != nil {
		return cfg, err
	}
	if cfg.load.fleet < 1 {
		return cfg, fmt.Errorf("invalid -fleet %d: must be positive", cfg.load.fleet)
	}
	for _, n := range cfg.k {
		if n*cfg.load.fleet > maxK {
			return cfg, fmt.Errorf("invalid -k %d with -fleet %d: at most %d goroutines in all", n, cfg.load.fleet, maxK)
		}
	}
	if !(*initial >= 0) {
		return cfg, fmt.Errorf("invalid -initial-rate %v: must be zero (unlimited) or positive", *initial)
	}
	if *attempts < 0 {
		return cfg, fmt.Errorf("invalid -max-attempts %d: must be zero (the preset's) or positive", *attempts)
	}
	if cfg.modes, err = parseModes(*modes, tuning{initialRate: *initial, maxAttempts: *attempts}); err != nil {
		return cfg, err
	}
	if cfg.metricsDir != "" {
		if !slices.ContainsFunc(cfg.modes, func(m mode) bool { return m.metered != nil }) {
			return cfg, errors.New("invalid -plot-metrics without an ours-* mode: only our retryers have the gauges to chart")
		}
		cfg.load.gauges = true
	}
	switch {
	case !(cfg.load.capacity >= 0) || math.IsInf(cfg.load.capacity, 1):
		return cfg, fmt.Errorf("invalid -capacity %v: must be zero (unlimited) or positive and finite", cfg.load.capacity)
	case !(cfg.load.throttleProb >= 0 && cfg.load.throttleProb <= 1):
		return cfg, fmt.Errorf("invalid -throttle-prob %v: must be within [0, 1]", cfg.load.throttleProb)
	case cfg.load.warmup < 0 || cfg.load.warmup > maxWarmup:
		return cfg, fmt.Errorf("invalid -warmup %v: must be in [0, %v]", cfg.load.warmup, maxWarmup)
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
	case cfg.load.late < 0:
		return cfg, fmt.Errorf("invalid -late %v: must not be negative", cfg.load.late)
	case cfg.load.late > 0 && cfg.load.fleet < 2:
		return cfg, fmt.Errorf("invalid -late %v without -fleet: a late client needs a fleet to join", cfg.load.late)
	}
	for _, name := range listflag.Split(*scenarios) {
		s, err := newScenario(name, *scale, *swing)
		if err != nil {
			return cfg, err
		}
		if cfg.load.late >= s.duration() {
			return cfg, fmt.Errorf("invalid -late %v: the scenario %s ends at %v, before the last client would join", cfg.load.late, s.name, s.duration())
		}
		cfg.scenarios = append(cfg.scenarios, s)
	}
	if len(cfg.scenarios) == 0 {
		return cfg, errors.New("invalid -scenarios: empty list")
	}
	if cfg.load.capacity == 0 {
		for _, s := range cfg.scenarios {
			if len(s.phases) > 1 {
				return cfg, fmt.Errorf("invalid -scenarios %s with -capacity 0: an unlimited table has no capacity to change", s.name)
			}
		}
		cfg.load.capacity = math.Inf(1)
	}
	if *trace {
		cfg.load.trace = stderr
	}
	return cfg, nil
}
