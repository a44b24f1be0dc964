// Package sim is a deterministic discrete-event simulator, in virtual time,
// of retrying clients under contention. It measures the jitter strategies of
// the delayers package, and whole aws.RetryerV2 implementations, without a
// wall clock: every delay a strategy returns advances a virtual clock, so a
// run of thousands of simulated seconds takes milliseconds.
//
// Two scenarios are modelled:
//
//   - The optimistic-concurrency (OCC) experiment of the 2015 AWS
//     Architecture Blog post "Exponential Backoff And Jitter" (RunOCC,
//     SweepOCC): N clients each write one row once, by a read followed by a
//     version-checked write.
//   - A throttled server (RunThrottled, SweepThrottled): a server-side token
//     bucket of C requests per second, and K clients each issuing a stream of
//     operations through its own aws.RetryerV2, driven through the same
//     methods, in the same order, as the SDK's retry middleware.
//
// Runs are reproducible: the same seed gives bit-identical results, except
// for strategies whose randomness cannot be seeded (the SDK's standard
// backoff draws from crypto/rand; see Strategy.Reproducible).
//
// This package is test and benchmark machinery: it is internal, imports no
// plotting, and the library never imports it.
package sim
