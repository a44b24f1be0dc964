package delayers

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
)

// codeThrottle classifies by a type assertion on the error itself, without
// errors.As, so it does not allocate: it separates the cost of this package
// from the cost of the SDK's default classifiers.
var codeThrottle = retry.IsErrorThrottleFunc(func(err error) aws.Ternary {
	if _, ok := err.(interface{ ErrorCode() string }); ok {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
})

// benchSources are the two Sources a delayer is used with: the default
// runtime generator and the seeded, lock-free NewSource.
var benchSources = map[string]func(*Options){
	"runtime": func(*Options) {},
	"seeded":  withSeed(1),
}

// benchErrors: the middleware's common cases. A nil error skips
// classification; a throttle runs the SDK's classifiers.
var benchErrors = map[string]error{
	"nil":      nil,
	"throttle": throttleErr(),
}

func BenchmarkBackoffDelay(b *testing.B) {
	for _, strategy := range Strategies() {
		for srcName, src := range benchSources {
			for errName, err := range benchErrors {
				d := mustNew(b, strategy, src)
				b.Run(string(strategy)+"/"+srcName+"/"+errName, func(b *testing.B) {
					b.ReportAllocs()
					var sink int64
					for i := 0; b.Loop(); i++ {
						v, _ := d.BackoffDelay(i%8+1, err)
						sink += int64(v)
					}
					_ = sink
				})
				b.Run(string(strategy)+"/"+srcName+"/"+errName+"/parallel", func(b *testing.B) {
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						var sink int64
						for i := 0; pb.Next(); i++ {
							v, _ := d.BackoffDelay(i%8+1, err)
							sink += int64(v)
						}
						_ = sink
					})
				})
			}
		}
	}
}

// BenchmarkBackoffDelayOwnClassifier measures a throttle error with a
// classifier that does not allocate: what remains is this package's cost.
func BenchmarkBackoffDelayOwnClassifier(b *testing.B) {
	err := error(&codeError{code: "ThrottlingException"})
	for _, strategy := range Strategies() {
		d := mustNew(b, strategy, func(o *Options) { o.Throttle = codeThrottle })
		b.Run(string(strategy), func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			for i := 0; b.Loop(); i++ {
				v, _ := d.BackoffDelay(i%8+1, err)
				sink += int64(v)
			}
			_ = sink
		})
	}
}

// codeError is a minimal API error for the allocation checks.
type codeError struct{ code string }

func (e *codeError) Error() string     { return e.code }
func (e *codeError) ErrorCode() string { return e.code }

// TestBackoffDelayDoesNotAllocate: with either Source, BackoffDelay and
// Sequence.Next allocate nothing of their own. The SDK's default throttle
// classifiers (errors.As with an escaping target) cost one allocation per
// non-nil error; that is theirs, so the check uses nil errors and a
// non-allocating classifier.
func TestBackoffDelayDoesNotAllocate(t *testing.T) {
	throttle := error(&codeError{code: "ThrottlingException"})
	for _, strategy := range Strategies() {
		for srcName, src := range benchSources {
			for _, growth := range []float64{0, 1.5} {
				if strategy == StrategyDecorrelated && growth != 0 {
					continue
				}
				t.Run(string(strategy)+"/"+srcName+"/growth "+strconv.FormatFloat(growth, 'g', -1, 64), func(t *testing.T) {
					testNoAllocs(t, strategy, src, func(o *Options) { o.Growth = growth }, throttle)
				})
			}
		}
	}
}

func testNoAllocs(t *testing.T, strategy Strategy, src, growth func(*Options), throttle error) {
	t.Helper()
	d := mustNew(t, strategy, src, growth, func(o *Options) { o.Throttle = codeThrottle })
	q := d.NewSequence()
	attempt := 0
	allocs := testing.AllocsPerRun(1000, func() {
		attempt++
		_, _ = d.BackoffDelay(attempt%70, nil)
		_, _ = d.BackoffDelay(attempt%70, throttle)
		q.Next(nil)
		q.Next(throttle)
	})
	assert.Zero(t, allocs, "expect 0 allocations per call, got %v", allocs)
}

// BenchmarkBackoffDelayGrowth compares the float path of a Growth other than
// 2 with the default integer doubling, for full jitter.
func BenchmarkBackoffDelayGrowth(b *testing.B) {
	for _, growth := range []float64{0, 1.5} {
		d := mustNew(b, StrategyFull, withSeed(1), func(o *Options) { o.Growth = growth })
		b.Run("growth "+strconv.FormatFloat(growth, 'g', -1, 64), func(b *testing.B) {
			b.ReportAllocs()
			var sink int64
			for i := 0; b.Loop(); i++ {
				v, _ := d.BackoffDelay(i%8+1, nil)
				sink += int64(v)
			}
			_ = sink
		})
	}
}

func BenchmarkSequenceNext(b *testing.B) {
	for _, strategy := range Strategies() {
		b.Run(string(strategy), func(b *testing.B) {
			b.ReportAllocs()
			q := mustNew(b, strategy, withSeed(1)).NewSequence()
			for i := 0; b.Loop(); i++ {
				if i%8 == 0 {
					q.Reset()
				}
				q.Next(nil)
			}
		})
	}
}
