// Package jitterretry is a retryer for the AWS SDK for Go v2: an
// aws.RetryerV2 with the jitter strategies of the AWS Architecture Blog's
// "Exponential Backoff And Jitter" (2015), over the SDK's client-side retry
// token bucket. New with no options is a drop-in for retry.NewStandard()
// (SDK v1.48.0, retry behaviour 2.1), with the differences the README
// lists, each with its reason.
//
// Build a Retryer once, at startup, and hand it to the SDK
// (config.WithRetryer, which shares it, and its retry budget, among every
// client made from that config; or a client's Options.Retryer); check
// Retryer.Err then. On top of
// the SDK's retries it gives typed refusals (*GiveUpError, which wraps the
// failed attempt's error), retries that never sleep past a deadline they can
// see (a margin learnt per operation, or Options.DeadlineMargin), partitioned
// budgets (Options.PartitionKey), a per-attempt timeout (AttemptTimeout), Do
// for the retries only the application can make (conditional writes and
// transactions, with a backoff that follows the measured contention), metrics
// (Options.MeterProvider), and an optional adaptive send-rate limiter
// (Options.SendRate, off by default). The backoffs themselves are package
// delayers, which also serves retry.NewStandard.
package jitterretry
