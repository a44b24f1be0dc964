// Command dynamodb runs the optimistic-locking workload of package occ under
// provisioned-capacity throttling, once per retry strategy, and proves that
// no acknowledged increment was lost or applied twice.
//
// By default it starts an embedded DynamoDB-compatible server (minidyn) on
// loopback, so it needs nothing but Go:
//
//	go run ./examples/dynamodb
//
// -endpoint (or AWS_ENDPOINT_URL_DYNAMODB) points it at another server, such
// as dynalite or DynamoDB Local. In every case a capacity proxy on loopback
// stands in front of the server and throttles each table to -capacity units
// per second, in DynamoDB's wire format.
//
// The strategies differ in how the application's loop (jitterretry.Do)
// backs off after a conflict: "contention" is Do's default, a backoff that
// follows the contention measured from the versions each conflict reports
// (read from ALL_OLD); the others (sdk-standard and the jitter strategies)
// retry a conflict blindly, as a transient error with that backoff and no
// retry token bucket, so that the rows compare the backoffs alone (see
// package occ's Policy). -blind-max-backoff caps the blind backoffs. On one
// hot item the difference shows most:
//
//	go run ./examples/dynamodb -items 1 -workers 32 -strategies full,contention
//
// -metrics prints, after each strategy, the retryer's instruments and the
// SDK's per-attempt ones (client.call.attempts, client.call.errors,
// client.call.attempt_duration), read from an OpenTelemetry in-memory
// reader; -prometheus ADDR serves them at http://ADDR/metrics while it runs.
// Either way the same meter provider goes to the DynamoDB client
// (dynamodb.Options.MeterProvider) and to the retryers
// (jitterretry.Options.MeterProvider); each strategy gets a fresh one, as it
// gets a fresh client.
//
// It prints one row per strategy and ends with "lost updates: 0" when every
// counter equals its acknowledged increments; otherwise it exits with status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/metrics"
	"github.com/schollz/progressbar/v3"

	"github.com/jitterretry/jitterretry/examples/internal/occ"
	"github.com/jitterretry/jitterretry/examples/internal/telemetry"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// defaultTimeout bounds each strategy's run.
const defaultTimeout = 2 * time.Minute

// defaultBlindMaxBackoff caps the blind strategies' backoff after a
// conflict. Left at the SDK's 20 s cap, blind backoffs made the default run
// take minutes, waiting on items that were free, for about as many calls
// (full jitter on the hot item: 1323 calls in 117 s at 20 s, 1331 to 1484
// in 19 to 20 s at 2 s). The contention backoff keeps the retryer's 20 s
// cap, which it reaches on a throttled hot item (1155 to 1226 calls at
// 20 s, 1501 when capped at 2 s).
const defaultBlindMaxBackoff = 2 * time.Second

type options struct {
	workers, increments, items int
	capacity                   float64
	strategies                 []string
	seed                       uint64
	endpoint                   string
	lostResponses              float64
	transact                   bool
	timeout                    time.Duration
	blindMaxBackoff            time.Duration
	progress                   bool
	metrics                    bool
	prometheus                 string

	// For tests: listening is called with the -prometheus server's address
	// once it listens, strategyDone after each strategy's run while the
	// server still serves that strategy's metrics.
	listening    func(addr string)
	strategyDone func(name string)
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb:", err)
		os.Exit(2)
	}
	ok, err := run(context.Background(), o, os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamodb:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// isTerminal reports whether w is a terminal: a progress bar redrawn into a
// file or a pipe is one long line of its redraws (a new user's log).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("dynamodb", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.workers, "workers", 16, "concurrent workers (W)")
	fs.IntVar(&o.increments, "increments", 25, "increments per worker (M)")
	fs.IntVar(&o.items, "items", 4, "hot items the workers contend for")
	fs.Float64Var(&o.capacity, "capacity", 100, "read and write capacity of the table, units per second, enforced by the capacity proxy")
	strategies := fs.String("strategies", strings.Join(occ.StrategyNames(), ","), "comma-separated strategies to run, in order")
	fs.Uint64Var(&o.seed, "seed", 1, "seed for item choice, jitter and error injection")
	fs.StringVar(&o.endpoint, "endpoint", os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		"DynamoDB endpoint; default AWS_ENDPOINT_URL_DYNAMODB, or when empty an embedded server on loopback")
	fs.Float64Var(&o.lostResponses, "lost-responses", 0.02, "fraction of data-plane requests whose response the proxy replaces with HTTP 500 after the server applied them")
	fs.BoolVar(&o.transact, "transact", false, "increment with TransactWriteItems instead of UpdateItem (dynalite has no transactions)")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "time limit of each strategy's run")
	fs.DurationVar(&o.blindMaxBackoff, "blind-max-backoff", defaultBlindMaxBackoff, "cap of the blind strategies' backoff after a conflict (every strategy but contention)")
	fs.BoolVar(&o.progress, "progress", isTerminal(stderr), "show a progress bar per strategy on stderr; default on when stderr is a terminal")
	fs.BoolVar(&o.metrics, "metrics", false, "print the retryer's and the SDK's metrics after each strategy")
	fs.StringVar(&o.prometheus, "prometheus", "", "serve the metrics at http://`ADDR`/metrics while running (such as 127.0.0.1:9464)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.workers < 1 || o.increments < 1 || o.items < 1 {
		return o, errors.New("-workers, -increments and -items must be at least 1")
	}
	if !(o.capacity > 0) {
		return o, errors.New("-capacity must be positive")
	}
	if o.timeout <= 0 {
		return o, errors.New("-timeout must be positive")
	}
	if o.blindMaxBackoff <= 0 {
		return o, errors.New("-blind-max-backoff must be positive")
	}
	if !(o.lostResponses >= 0 && o.lostResponses <= 1) {
		return o, errors.New("-lost-responses must be within [0, 1]")
	}
	known := map[string]bool{}
	for _, s := range occ.StrategyNames() {
		known[s] = true
	}
	for _, s := range strings.Split(*strategies, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !known[s] {
			return o, fmt.Errorf("unknown strategy %q, want some of %s", s, strings.Join(occ.StrategyNames(), ","))
		}
		o.strategies = append(o.strategies, s)
	}
	if len(o.strategies) == 0 {
		return o, errors.New("-strategies names no strategy")
	}
	return o, nil
}

// run runs every strategy and prints the report; ok is false when a check
// failed.
func run(ctx context.Context, o options, stdout, stderr io.Writer) (ok bool, err error) {
	b, err := newBackend(ctx, o.endpoint)
	if err != nil {
		return false, err
	}
	defer b.Close()
	admin := b.client(b.URL, nil, nil)

	fmt.Fprintf(stdout, "server: %s\n", b.Name)
	fmt.Fprintf(stdout, "workload: %d workers x %d increments on %d hot items, capacity %g RCU/WCU, %g%% lost responses, blind backoff cap %v, seed %d\n",
		o.workers, o.increments, o.items, o.capacity, 100*o.lostResponses, o.blindMaxBackoff, o.seed)
	var prom *telemetry.Server
	if o.prometheus != "" {
		if prom, err = telemetry.Listen(o.prometheus); err != nil {
			return false, fmt.Errorf("-prometheus: %w", err)
		}
		defer func() { _ = prom.Close() }()
		fmt.Fprintf(stdout, "metrics: http://%s/metrics\n", prom.Addr())
		if o.listening != nil {
			o.listening(prom.Addr())
		}
	}
	fmt.Fprintln(stdout)

	var rows []occ.Row
	for i, name := range o.strategies {
		// Each strategy records into a fresh provider, as it runs with a
		// fresh client and retryer. A provider stays up until the run ends:
		// a scrape may come after its strategy has finished. The counters
		// and histograms stay; the gauges go with the retryer that
		// observes them, once it is garbage.
		var meters *telemetry.Metrics
		if o.metrics || prom != nil {
			if meters, err = telemetry.New(telemetry.Options{Prometheus: prom != nil}); err != nil {
				return false, err
			}
			defer func() { _ = meters.Shutdown(context.WithoutCancel(ctx)) }()
			if prom != nil {
				prom.Show(meters)
			}
		}
		row, policy, err := runStrategy(ctx, o, b, admin, name, o.seed+uint64(i)*1000, meters, stderr)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		rows = append(rows, row)
		if o.metrics {
			if err := printMetrics(ctx, stdout, name, meters); err != nil {
				return false, err
			}
		}
		if o.strategyDone != nil {
			o.strategyDone(name)
		}
		// Until here the strategy's metrics are read: its retryers, and
		// with them their gauges, stay.
		runtime.KeepAlive(policy)
	}
	if err := occ.WriteTable(stdout, rows); err != nil {
		return false, err
	}
	var lost, double int64
	ok = true
	for _, r := range rows {
		lost += r.Check.Lost
		double += r.Check.Double
		ok = ok && r.Check.OK()
	}
	fmt.Fprintln(stdout)
	if !ok {
		fmt.Fprintf(stdout, "CHECK FAILED: %d lost updates, %d double-applied increments\n", lost, double)
		return false, nil
	}
	fmt.Fprintln(stdout, "lost updates: 0")
	return true, nil
}

// runStrategy prepares a fresh table and a fresh capacity proxy, runs the
// workload with strategy name, and checks the counters. The client and the
// retryers record their metrics into meters, unless it is nil. It returns
// the policy it ran, whose retryers observe the gauges.
func runStrategy(ctx context.Context, o options, b *backend, admin *dynamodb.Client, name string, seed uint64,
	meters *telemetry.Metrics, stderr io.Writer) (occ.Row, *occ.Policy, error) {
	table := "jitterretry-occ-" + name
	if err := occ.Setup(ctx, admin, table, o.items, int64(o.capacity), int64(o.capacity)); err != nil {
		return occ.Row{}, nil, err
	}
	defer func() { _ = occ.Teardown(context.WithoutCancel(ctx), admin, table) }()

	proxy, err := capacity.New(b.URL, func(co *capacity.Options) {
		co.Default = capacity.Capacity{Read: o.capacity, Write: o.capacity}
		co.LostResponseRate = o.lostResponses
		co.Seed = seed
	})
	if err != nil {
		return occ.Row{}, nil, err
	}
	proxyURL, err := proxy.Start()
	if err != nil {
		return occ.Row{}, nil, err
	}
	defer func() { _ = proxy.Close() }()

	var provider metrics.MeterProvider // nil: record nothing
	if meters != nil {
		provider = meters.Provider
	}

	policy, err := occ.NewPolicy(name, occ.PolicyOptions{Seed: seed, BlindMaxBackoff: o.blindMaxBackoff, MeterProvider: provider})
	if err != nil {
		return occ.Row{}, nil, err
	}
	bar := progressbar.NewOptions(o.workers*o.increments,
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetVisibility(o.progress),
		progressbar.OptionSetDescription(fmt.Sprintf("%-13s", name)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
	)
	runCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res, runErr := occ.Run(runCtx, b.client(proxyURL, policy.SDK, provider), policy, occ.Config{
		Table:      table,
		Workers:    o.workers,
		Increments: o.increments,
		Items:      o.items,
		Seed:       seed,
		Transact:   o.transact,
		Progress:   func() { _ = bar.Add(1) },
	})
	if res == nil {
		return occ.Row{}, nil, runErr
	}
	if runErr != nil {
		_ = bar.Exit()
		if !errors.Is(runErr, context.DeadlineExceeded) {
			return occ.Row{}, nil, runErr
		}
		fmt.Fprintf(stderr, "%s: stopped after %v with %d increments in flight\n", name, o.timeout, len(res.Unresolved))
	}
	check, err := occ.Verify(ctx, admin, table, res)
	if err != nil {
		return occ.Row{}, nil, err
	}
	row := occ.NewRow(policy, res, check)
	st := proxy.Stats()
	row.Calls, row.Throttles = st.Requests, st.Throttled
	return row, policy, nil
}

// printMetrics writes the strategy's metrics as a table.
func printMetrics(ctx context.Context, w io.Writer, name string, m *telemetry.Metrics) error {
	rm, err := m.Collect(ctx)
	if err != nil {
		return fmt.Errorf("collect metrics: %w", err)
	}
	fmt.Fprintf(w, "metrics of %s:\n", name)
	if err := telemetry.WriteTable(w, telemetry.Rows(rm)); err != nil {
		return err
	}
	_, err = fmt.Fprintln(w)
	return err
}
