package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/jitterretry/jitterretry/internal/sim"
)

// occCSVHeader is the -csv header of the OCC experiment, as issue 4 fixes it.
var occCSVHeader = []string{"clients", "strategy", "calls", "calls_se", "time_ms", "time_se", "p50_ms", "p99_ms"}

func runOCC(cfg config, w io.Writer) error {
	var sts []sim.Strategy
	for _, name := range cfg.strategies {
		st, err := sim.LookupStrategy(name)
		if err != nil {
			return err
		}
		sts = append(sts, st)
	}
	rows, err := sim.SweepOCC(sim.OCCConfig{Clients: cfg.clients, Runs: cfg.runs, Seed: cfg.seed, Strategies: sts, Params: sim.Params{AllOld: cfg.allOld}})
	if err != nil {
		return err
	}
	if cfg.plotDir != "" {
		if err := plotOCC(cfg.plotDir, rows, cfg.runs); err != nil {
			return err
		}
	}
	if cfg.csv {
		return writeOCCCSV(w, rows)
	}
	return writeOCCTable(w, cfg, sts, rows)
}

func writeOCCCSV(w io.Writer, rows []sim.OCCRow) error {
	return writeCSV(w, occCSVHeader, len(rows), func(i int) []string {
		r := rows[i]
		return []string{strconv.Itoa(r.Clients), r.Strategy,
			f2(r.Calls.Mean), f2(r.Calls.SE), f2(r.TimeMs.Mean), f2(r.TimeMs.SE), f2(r.P50Ms.Mean), f2(r.P99Ms.Mean)}
	})
}

// writeCSV writes header and n records, record(i) giving the i-th.
func writeCSV(w io.Writer, header []string, n int, record func(i int) []string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	for i := range n {
		if err := cw.Write(record(i)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// f2 formats a figure for CSV with two decimals.
func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func writeOCCTable(w io.Writer, cfg config, sts []sim.Strategy, rows []sim.OCCRow) error {
	loop := "re-read after a conflict"
	if cfg.allOld {
		loop = "ALL_OLD: write again with the version the conflict returned, no re-read"
	}
	fmt.Fprintf(w, "OCC experiment: base 5 ms, cap 2000 ms, message delay |N(10 ms, 2 ms)|, %d runs per row, seed %d, loop %s\n", cfg.runs, cfg.seed, loop)
	fmt.Fprintln(w, "calls = writes per run; time = last client's success; p50/p99 = clients' completion times; ± one standard error")
	for _, st := range sts {
		if !st.Reproducible {
			fmt.Fprintf(w, "%s: crypto/rand, not seedable: its figures vary within their standard errors\n", st.Name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tstrategy\tcalls\t± se\ttime ms\t± se\tp50 ms\t± se\tp99 ms\t± se\t")
	prev := 0
	for _, r := range rows {
		if prev != 0 && r.Clients != prev {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t\t")
		}
		prev = r.Clients
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", r.Clients, r.Strategy,
			r.Calls.Mean, r.Calls.SE, r.TimeMs.Mean, r.TimeMs.SE, r.P50Ms.Mean, r.P50Ms.SE, r.P99Ms.Mean, r.P99Ms.SE)
	}
	return tw.Flush()
}
