package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// binWidth is the resolution of the client-side success timeline, used to
// time the recovery.
const binWidth = 100 * time.Millisecond

// second is what the server (the capacity proxy) saw in one second of a run.
type second struct {
	requests  int64 // every request received, throttled ones included
	throttled int64
}

// failures counts operations that returned an error to their caller, by kind.
type failures struct {
	budget      int64 // the client's retry budget (token bucket) refused a retry
	maxAttempts int64 // every attempt failed
	deadline    int64 // the operation's deadline (-deadline) ended it, or a retryer gave up for it
	other       int64
}

func (f failures) total() int64 { return f.budget + f.maxAttempts + f.deadline + f.other }

func (f *failures) add(o failures) {
	f.budget += o.budget
	f.maxAttempts += o.maxAttempts
	f.deadline += o.deadline
	f.other += o.other
}

// result is the raw outcome of one mode in one scenario.
type result struct {
	mode      string
	k         int
	scen      scenario
	capacity  float64 // nominal capacity C, requests per second; +Inf is unlimited
	successes int64
	clientOK  []int64 // successes of each client of the fleet
	failed    failures
	cutOff    int64           // operations still running when the scenario ended
	warmupOK  int64           // successes of the warm-up, not counted in the rest
	carried   int64           // operations started in the warm-up and counted: their last attempt was sent in the scenario
	latencies []time.Duration // every operation that returned, success or failure
	okBins    []int64         // successes completed in each binWidth from the start
	requests  int64           // server-seen requests, throttled ones included
	throttled int64
	seconds   []second
	gauges    []gaugeSample // ours' retryers' gauges every gaugeInterval, with -plot-metrics; nil otherwise

	// joined is when the fleet's last client started, from the scenario's
	// start (-late); 0 when every client started together.
	joined time.Duration
	// clientSinceJoin is the successes of each client completed from
	// joined on; nil when joined is 0.
	clientSinceJoin []int64
}

// unlimited reports whether the table had no capacity limit.
func (r result) unlimited() bool { return math.IsInf(r.capacity, 1) }

// summary is the report of one result.
type summary struct {
	util            float64 // successes / capacity over the run; 0 when unlimited
	okPerSecond     float64 // successes / duration
	callsPerSuccess float64 // server-seen requests / successes; +Inf without a success
	p50, p99, max   time.Duration
	peak            float64 // highest requests/capacity of any second after the first
	worstThrottled  int64   // most throttled requests in any second
	recovery        time.Duration
	hasRecovery     bool      // the scenario raises capacity
	recovered       bool      // the run reached recoveryTarget after the rise
	afterRise       []float64 // successes / capacity in each of the first whole seconds after the rise
}

func summarize(r result) summary {
	dur := r.scen.duration()
	s := summary{
		util:            ratio(float64(r.successes), r.scen.capacityBetween(r.capacity, 0, dur)),
		callsPerSuccess: ratio(float64(r.requests), float64(r.successes)),
		okPerSecond:     float64(r.successes) / dur.Seconds(),
	}
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	s.p50, s.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if len(lat) > 0 {
		s.max = lat[len(lat)-1]
	}
	for i, sec := range r.seconds {
		from := time.Duration(i) * time.Second
		if from >= dur {
			break // requests in flight when the run ended
		}
		s.worstThrottled = max(s.worstThrottled, sec.throttled)
		if i == 0 {
			continue
		}
		if c := r.scen.capacityBetween(r.capacity, from, min(from+time.Second, dur)); c > 0 {
			s.peak = max(s.peak, float64(sec.requests)/c)
		}
	}
	if at, ok := r.scen.recovery(); ok && !r.unlimited() {
		s.hasRecovery = true
		capacity := func(from, to time.Duration) float64 { return r.scen.capacityBetween(r.capacity, from, to) }
		s.recovery, s.recovered = recoveryTime(r.okBins, at, dur, capacity)
		s.afterRise = secondsAfter(r.okBins, at, dur, recoverySeconds, capacity)
	}
	return s
}

// percentile returns the nearest-rank p-quantile of sorted, or 0 when empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

// printSummary prints one row per result: the figures of issue 6's tables.
func printSummary(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasRecovery := len(results) > 0 && summarize(results[0]).hasRecovery
	header := "mode\tutil %\tok/s\tcalls/ok\tok\tfailed\tbudget\tmax-att\tdeadline\tother\tcut\tp50 ms\tp99 ms\tmax ms\tpeak ×C\tthr/s max"
	if hasRecovery {
		header += "\trecovery"
		for i := range recoverySeconds {
			header += fmt.Sprintf("\t+%ds %%", i+1)
		}
	}
	fmt.Fprintln(tw, header+"\t")
	for _, r := range results {
		s := summarize(r)
		util, peak := fixed(100*s.util, 1), fixed(s.peak, 2)
		if r.unlimited() {
			util, peak = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d",
			r.mode, util, s.okPerSecond, s.callsPerSuccess, r.successes, r.failed.total(), r.failed.budget, r.failed.maxAttempts, r.failed.deadline, r.failed.other,
			r.cutOff, ms(s.p50), ms(s.p99), ms(s.max), peak, s.worstThrottled)
		if hasRecovery {
			rec := "never"
			if s.recovered {
				rec = fmt.Sprintf("%.1f s", s.recovery.Seconds())
			}
			fmt.Fprintf(tw, "\t%s", rec)
			for i := range recoverySeconds {
				cell := "-" // the run ended before this second did
				if i < len(s.afterRise) {
					cell = fixed(100*s.afterRise[i], 1)
				}
				fmt.Fprintf(tw, "\t%s", cell)
			}
		}
		fmt.Fprintln(tw, "\t")
	}
	_ = tw.Flush()
}

// printSeconds prints what the server saw each second, one row per result:
// every request received (throttled ones included), then the throttled
// ones; the first row is the capacity of each second.
func printSeconds(w io.Writer, results []result) {
	if len(results) == 0 {
		return
	}
	dur := results[0].scen.duration()
	n := int(math.Ceil(dur.Seconds()))
	for _, table := range []struct {
		title string
		value func(second) int64
	}{
		{"server requests per second (throttled included)", func(s second) int64 { return s.requests }},
		{"throttled requests per second", func(s second) int64 { return s.throttled }},
	} {
		fmt.Fprintln(w, table.title+":")
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "second\t")
		for i := range n {
			fmt.Fprintf(tw, "%d\t", i)
		}
		fmt.Fprint(tw, "\ncapacity\t")
		for i := range n {
			from := time.Duration(i) * time.Second
			cell := "inf"
			if !results[0].unlimited() {
				cell = fmt.Sprintf("%.0f", results[0].scen.capacityBetween(results[0].capacity, from, min(from+time.Second, dur)))
			}
			fmt.Fprintf(tw, "%s\t", cell)
		}
		fmt.Fprintln(tw)
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t", r.mode)
			for i := range n {
				var sec second
				if i < len(r.seconds) {
					sec = r.seconds[i]
				}
				fmt.Fprintf(tw, "%d\t", table.value(sec))
			}
			fmt.Fprintln(tw)
		}
		_ = tw.Flush()
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
}
