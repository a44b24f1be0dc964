package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/jitterretry/jitterretry/internal/sim"
)

var throttledCSVHeader = []string{"clients", "retryer", "ops", "goodput_per_s", "goodput_se", "amplification", "amplification_se",
	"failed_pct", "failed_se", "quota_pct", "p50_ms", "p99_ms"}

func runThrottled(cfg config, w io.Writer) error {
	var rts []sim.Retryer
	for _, name := range cfg.strategies {
		rt, err := sim.LookupRetryer(name)
		if err != nil {
			return err
		}
		rts = append(rts, rt)
	}
	rows, err := sim.SweepThrottled(sim.ThrottleConfig{Clients: cfg.k, Runs: cfg.runs, Seed: cfg.seed, Retryers: rts, Params: cfg.throttle})
	if err != nil {
		return err
	}
	if cfg.csv {
		return writeThrottledCSV(w, rows)
	}
	return writeThrottledTable(w, cfg, rts, rows)
}

func writeThrottledCSV(w io.Writer, rows []sim.ThrottleRow) error {
	return writeCSV(w, throttledCSVHeader, len(rows), func(i int) []string {
		r := rows[i]
		return []string{strconv.Itoa(r.Clients), r.Retryer, f2(r.Ops.Mean), f2(r.GoodputPerS.Mean), f2(r.GoodputPerS.SE),
			f2(r.Amplification.Mean), f2(r.Amplification.SE), f2(r.FailedPct.Mean), f2(r.FailedPct.SE), f2(r.QuotaPct.Mean),
			f2(r.P50Ms.Mean), f2(r.P99Ms.Mean)}
	})
}

func writeThrottledTable(w io.Writer, cfg config, rts []sim.Retryer, rows []sim.ThrottleRow) error {
	p := cfg.throttle
	burst := p.Burst
	if burst == 0 {
		burst = p.Capacity / 10
	}
	fmt.Fprintf(w, "Throttled server: capacity %.0f req/s (bucket of %.0f), offered %.0f ops/s (Poisson), warmup %v, window %v, message delay |N(10 ms, 2 ms)|, %d runs per row, seed %d\n",
		p.Capacity, burst, p.Load*p.Capacity, p.Warmup, p.Duration, cfg.runs, cfg.seed)
	fmt.Fprintln(w, "of the operations started in the window: goodput = successes/s in the window; amp = calls per success;")
	fmt.Fprintln(w, "failed = failed to the caller (quota: refused a retry token by the client's bucket); p50/p99 = successes' latency; ± one standard error")
	for _, rt := range rts {
		if !rt.Reproducible {
			fmt.Fprintf(w, "%s: crypto/rand, not seedable: its figures vary within their standard errors\n", rt.Name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "K\tretryer\tgoodput/s\t± se\tamp\t± se\tfailed %\t± se\tquota %\tp50 ms\tp99 ms\t")
	prev := 0
	for _, r := range rows {
		if prev != 0 && r.Clients != prev {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t\t")
		}
		prev = r.Clients
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t\n", r.Clients, r.Retryer,
			r.GoodputPerS.Mean, r.GoodputPerS.SE, r.Amplification.Mean, r.Amplification.SE,
			r.FailedPct.Mean, r.FailedPct.SE, r.QuotaPct.Mean, r.P50Ms.Mean, r.P99Ms.Mean)
	}
	return tw.Flush()
}
