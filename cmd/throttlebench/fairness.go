package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// fairness is how evenly the clients of a fleet shared the table: a limiter
// that starves some clients while others take the capacity can still show
// a fine utilisation.
type fairness struct {
	jain               float64 // Jain's index of the clients' successes: 1 when even, 1/N when one client got all
	minOK, maxOK       int64   // the least and the most successes of a client
	minShare, maxShare float64 // minOK and maxOK over the base
	fairShare          float64 // 1/N
}

// fairnessOf returns the fairness of clients' successes ok, with the shares
// taken of base: the capacity over the run, or every success when the
// capacity is unlimited. Without a success, or with a base of zero, the
// undefined figures are NaN.
func fairnessOf(ok []int64, base float64) fairness {
	f := fairness{jain: math.NaN(), minShare: math.NaN(), maxShare: math.NaN(), fairShare: math.NaN()}
	if len(ok) == 0 {
		return f
	}
	f.fairShare = 1 / float64(len(ok))
	var total, squares float64
	f.minOK, f.maxOK = ok[0], ok[0]
	for _, x := range ok {
		total += float64(x)
		squares += float64(x) * float64(x)
		f.minOK, f.maxOK = min(f.minOK, x), max(f.maxOK, x)
	}
	if squares > 0 {
		f.jain = total * total / (float64(len(ok)) * squares)
	}
	if base > 0 && !math.IsInf(base, 1) {
		f.minShare, f.maxShare = float64(f.minOK)/base, float64(f.maxOK)/base
	}
	return f
}

// shareBase returns what a client's share is of in r from offset from on:
// the capacity from then to the end, or the successes ok of the clients
// from then when the capacity is unlimited.
func shareBase(r result, ok []int64, from time.Duration) float64 {
	if r.unlimited() {
		var total int64
		for _, x := range ok {
			total += x
		}
		return float64(total)
	}
	return r.scen.capacityBetween(r.capacity, from, r.scen.duration())
}

// printFairness prints, for a fleet, one row per result: Jain's index and
// the smallest and largest share a client got, next to the fair share; when
// the last client joined late, a second table does the same from its join
// on and adds that client's own share, so that neither the early clients'
// head start nor the run's average hides a late client kept small.
func printFairness(w io.Writer, results []result) {
	if len(results) == 0 || len(results[0].clientOK) < 2 {
		return
	}
	of := "capacity"
	if results[0].unlimited() {
		of = "all successes"
	}
	n := len(results[0].clientOK)
	printFairnessTable(w, fmt.Sprintf("fairness over the %d clients (shares of the %s over the run):", n, of),
		results, false, func(r result) ([]int64, float64) { return r.clientOK, shareBase(r, r.clientOK, 0) })
	if joined := results[0].joined; joined > 0 {
		fmt.Fprintln(w)
		printFairnessTable(w, fmt.Sprintf("fairness over the %d clients once the last joined, at %v (shares of the %s from then; late %%: the last client's):", n, joined, of),
			results, true, func(r result) ([]int64, float64) {
				return r.clientSinceJoin, shareBase(r, r.clientSinceJoin, r.joined)
			})
	}
}

// printFairnessTable prints title and a row per result of the fairness of
// the successes and base that window picks; withLate adds the share of the
// last client.
func printFairnessTable(w io.Writer, title string, results []result, withLate bool, window func(result) ([]int64, float64)) {
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "mode\tJain\tmin share %\tmax share %\tfair share %\tmin ok\tmax ok"
	if withLate {
		header += "\tlate %\tlate ok"
	}
	fmt.Fprintln(tw, header+"\t")
	for _, r := range results {
		ok, base := window(r)
		f := fairnessOf(ok, base)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d", r.mode, fixed(f.jain, 3),
			fixed(100*f.minShare, 2), fixed(100*f.maxShare, 2), fixed(100*f.fairShare, 2), f.minOK, f.maxOK)
		if withLate && len(ok) > 0 {
			last := ok[len(ok)-1]
			fmt.Fprintf(tw, "\t%s\t%d", fixed(100*float64(last)/base, 2), last)
		}
		fmt.Fprintln(tw, "\t")
	}
	_ = tw.Flush()
}

// fixed formats v with prec decimals, or "-" when v is not a number.
func fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}
