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
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/schollz/progressbar/v3"

	"github.com/jitterretry/jitterretry/examples/internal/occ"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// defaultTimeout bounds each strategy's run.
const defaultTimeout = 2 * time.Minute

type options struct {
	workers, increments, items int
	capacity                   float64
	strategies                 []string
	seed                       uint64
	endpoint                   string
	lostResponses              float64
	transact                   bool
	timeout                    time.Duration
	progress                   bool
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
	fs.BoolVar(&o.progress, "progress", true, "show a progress bar per strategy on stderr")
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
	admin := b.client(b.URL, nil)

	fmt.Fprintf(stdout, "server: %s\n", b.Name)
	fmt.Fprintf(stdout, "workload: %d workers x %d increments on %d hot items, capacity %g RCU/WCU, %g%% lost responses, seed %d\n\n",
		o.workers, o.increments, o.items, o.capacity, 100*o.lostResponses, o.seed)

	var rows []occ.Row
	for i, name := range o.strategies {
		row, err := runStrategy(ctx, o, b, admin, name, o.seed+uint64(i)*1000, stderr)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		rows = append(rows, row)
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
// workload with strategy name, and checks the counters.
func runStrategy(ctx context.Context, o options, b *backend, admin *dynamodb.Client, name string, seed uint64, stderr io.Writer) (occ.Row, error) {
	table := "jitterretry-occ-" + name
	if err := occ.Setup(ctx, admin, table, o.items, int64(o.capacity), int64(o.capacity)); err != nil {
		return occ.Row{}, err
	}
	defer func() { _ = occ.Teardown(context.WithoutCancel(ctx), admin, table) }()

	proxy, err := capacity.New(b.URL, func(co *capacity.Options) {
		co.Default = capacity.Capacity{Read: o.capacity, Write: o.capacity}
		co.LostResponseRate = o.lostResponses
		co.Seed = seed
	})
	if err != nil {
		return occ.Row{}, err
	}
	proxyURL, err := proxy.Start()
	if err != nil {
		return occ.Row{}, err
	}
	defer func() { _ = proxy.Close() }()

	policy, err := occ.NewPolicy(name, occ.PolicyOptions{Seed: seed})
	if err != nil {
		return occ.Row{}, err
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
	res, runErr := occ.Run(runCtx, b.client(proxyURL, policy.SDK), policy, occ.Config{
		Table:      table,
		Workers:    o.workers,
		Increments: o.increments,
		Items:      o.items,
		Seed:       seed,
		Transact:   o.transact,
		Progress:   func() { _ = bar.Add(1) },
	})
	if res == nil {
		return occ.Row{}, runErr
	}
	if runErr != nil {
		_ = bar.Exit()
		if !errors.Is(runErr, context.DeadlineExceeded) {
			return occ.Row{}, runErr
		}
		fmt.Fprintf(stderr, "%s: stopped after %v with %d increments in flight\n", name, o.timeout, len(res.Unresolved))
	}
	check, err := occ.Verify(ctx, admin, table, res)
	if err != nil {
		return occ.Row{}, err
	}
	row := occ.NewRow(policy, res, check)
	st := proxy.Stats()
	row.Calls, row.Throttles = st.Requests, st.Throttled
	return row, nil
}
