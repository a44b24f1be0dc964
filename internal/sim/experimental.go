package sim

// ExperimentalStrategies returns strategies beyond the blog's, tried at
// N=100 in BENCHMARKS.md. They live here, not in delayers, until one is
// shown to win.
func ExperimentalStrategies() []Strategy { return nil }
