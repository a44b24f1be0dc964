// Package delayers computes retry backoff delays with the jitter strategies of
// the AWS Architecture Blog post "Exponential Backoff And Jitter" (2015).
//
// Every strategy is a [retry.BackoffDelayer], so it plugs into the SDK's
// retry.StandardOptions.Backoff as well as into jitterretry. With attempt the
// 1-based number of the attempt that failed (what the SDK's retry middleware
// passes), the window is
//
//	w = min(cap, base * 2^(attempt-1))
//
// so a windowed strategy's first retry waits at most base (decorrelated
// jitter's waits in [base, 3*base), at most cap), and the strategies return
//
//	Exponential:  w                                   (no jitter)
//	Full:         uniform[0, w)
//	Equal:        w/2 + uniform[0, w - w/2)
//	Decorrelated: sleep = min(cap, uniform[base, 3*prev)), prev starting at base
//
// Throttling errors use a separate, larger base (1 s by default, as the SDK).
//
// Options.Growth replaces the doubling by another factor, within [1.01, 8],
// for the three windowed strategies: w = min(cap, base * Growth^(attempt-1)).
// Full jitter with Growth 1.5 and a base of a few round trips makes fewer
// calls than doubling under contention, and finishes no later (BENCHMARKS.md,
// section 2). Decorrelated jitter has no window and rejects Growth.
//
// All arithmetic saturates: any attempt number, including 0, negative values
// and math.MaxInt, gives a delay within [0, cap] and nothing overflows.
// Delayers are safe for concurrent use by multiple goroutines and keep no
// per-request state; a [Sequence] gives the stateful per-loop form.
package delayers
