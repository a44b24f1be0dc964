package sim

import (
	"fmt"
	"runtime"
	"sync"
)

// OCCConfig configures a sweep of the OCC experiment.
type OCCConfig struct {
	// Clients lists the numbers of clients N to simulate.
	Clients []int
	// Runs is R, the number of independent runs averaged per (N, strategy).
	Runs int
	// Seed selects every run's randomness.
	Seed uint64
	// Strategies to simulate, in output order.
	Strategies []Strategy
	// Params of the experiment; zero fields mean the blog's numbers.
	Params Params
	// Workers is how many runs execute at once. Zero means GOMAXPROCS. The
	// results do not depend on it.
	Workers int
}

// OCCRow is one (N, strategy) cell of a sweep: every figure is the mean over
// the runs, with its standard error. Times are in milliseconds.
type OCCRow struct {
	Clients  int
	Strategy string
	// Calls is the number of writes per run.
	Calls Summary
	// TimeMs is when the last client succeeded.
	TimeMs Summary
	// P50Ms and P99Ms are the per-run nearest-rank quantiles of the clients'
	// completion times, averaged over the runs.
	P50Ms, P99Ms Summary
}

// SweepOCC runs the OCC experiment for every N and strategy of cfg and
// returns one row per pair, ordered by N then by strategy. The runs of one
// row execute in parallel, each with its own random streams, so the result
// is the same for any number of workers.
func SweepOCC(cfg OCCConfig) ([]OCCRow, error) {
	if cfg.Runs < 1 {
		return nil, fmt.Errorf("sim: invalid number of runs %d: must be at least 1", cfg.Runs)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var rows []OCCRow
	for _, n := range cfg.Clients {
		for _, st := range cfg.Strategies {
			runs := make([]OCCRun, cfg.Runs)
			errs := make([]error, cfg.Runs)
			forEach(cfg.Runs, workers, func(i int) {
				runs[i], errs[i] = RunOCC(cfg.Params, st, n, cfg.Seed, i)
			})
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			rows = append(rows, summarizeOCC(n, st.Name, runs))
		}
	}
	return rows, nil
}

func summarizeOCC(n int, name string, runs []OCCRun) OCCRow {
	calls := make([]float64, len(runs))
	times := make([]float64, len(runs))
	p50 := make([]float64, len(runs))
	p99 := make([]float64, len(runs))
	for i, r := range runs {
		calls[i] = float64(r.Calls)
		times[i] = ms(r.Time)
		p50[i] = ms(percentile(r.Done, 0.50))
		p99[i] = ms(percentile(r.Done, 0.99))
	}
	return OCCRow{
		Clients: n, Strategy: name,
		Calls: summarize(calls), TimeMs: summarize(times),
		P50Ms: summarize(p50), P99Ms: summarize(p99),
	}
}

// forEach calls fn(0..n-1) on up to workers goroutines and waits for all.
func forEach(n, workers int, fn func(i int)) {
	workers = max(1, min(workers, n))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
