package sim

import (
	"fmt"
	"runtime"
	"time"
)

// ThrottleConfig configures a sweep of the throttled scenario.
type ThrottleConfig struct {
	// Clients lists the fleet sizes K to simulate.
	Clients []int
	// Runs is the number of independent runs averaged per (K, retryer).
	Runs int
	// Seed selects every run's randomness.
	Seed uint64
	// Retryers to simulate, in output order.
	Retryers []Retryer
	// Params of the scenario; zero fields mean their defaults.
	Params ThrottleParams
	// Workers is how many runs execute at once. Zero means GOMAXPROCS. The
	// results do not depend on it.
	Workers int
}

// ThrottleRow is one (K, retryer) cell of a sweep: every figure is the mean
// over the runs, with its standard error.
type ThrottleRow struct {
	Clients int
	Retryer string
	// Ops is the number of operations started per run.
	Ops Summary
	// GoodputPerS is successful operations per second within the
	// measurement window. Rejections cost the server nothing here, so under
	// overload it stays at the capacity whatever the retryer: retries buy
	// success rate, at the price of amplification, not goodput.
	GoodputPerS Summary
	// Amplification is server calls per successful operation.
	Amplification Summary
	// FailedPct is the percentage of operations that failed to the caller;
	// QuotaPct the percentage refused a retry token by the client's bucket.
	FailedPct, QuotaPct Summary
	// P50Ms and P99Ms are the per-run nearest-rank quantiles of successful
	// operations' latencies, averaged over the runs.
	P50Ms, P99Ms Summary
}

// SweepThrottled runs the throttled scenario for every K and retryer of cfg
// and returns one row per pair, ordered by K then by retryer.
func SweepThrottled(cfg ThrottleConfig) ([]ThrottleRow, error) {
	if cfg.Runs < 1 {
		return nil, fmt.Errorf("sim: invalid number of runs %d: must be at least 1", cfg.Runs)
	}
	p, err := cfg.Params.withDefaults()
	if err != nil {
		return nil, err
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var rows []ThrottleRow
	for _, k := range cfg.Clients {
		for _, rt := range cfg.Retryers {
			runs := make([]ThrottleRun, cfg.Runs)
			errs := make([]error, cfg.Runs)
			forEach(cfg.Runs, workers, func(i int) {
				runs[i], errs[i] = RunThrottled(p, rt, k, cfg.Seed, i)
			})
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			rows = append(rows, summarizeThrottled(k, rt.Name, p.Duration, runs))
		}
	}
	return rows, nil
}

func summarizeThrottled(k int, name string, window time.Duration, runs []ThrottleRun) ThrottleRow {
	var ops, goodput, amp, failed, quota, p50, p99 []float64
	for _, r := range runs {
		ops = append(ops, float64(r.Ops))
		goodput = append(goodput, float64(r.InWindow)/window.Seconds())
		if r.Succeeded > 0 {
			amp = append(amp, float64(r.Calls)/float64(r.Succeeded))
		}
		if r.Ops > 0 {
			failed = append(failed, 100*float64(r.Failed)/float64(r.Ops))
			quota = append(quota, 100*float64(r.QuotaFailed)/float64(r.Ops))
		}
		p50 = append(p50, ms(percentile(r.Latencies, 0.50)))
		p99 = append(p99, ms(percentile(r.Latencies, 0.99)))
	}
	return ThrottleRow{
		Clients: k, Retryer: name,
		Ops: summarize(ops), GoodputPerS: summarize(goodput), Amplification: summarize(amp),
		FailedPct: summarize(failed), QuotaPct: summarize(quota),
		P50Ms: summarize(p50), P99Ms: summarize(p99),
	}
}
