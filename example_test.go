package jitterretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// Build the retryer once, check its options at startup, and hand it to the
// SDK: config.WithRetryer(func() aws.Retryer { return r }) or a client's
// Options.Retryer. Keep r for Do.
func ExampleNew() {
	r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyDecorrelated
	})
	if err := r.Err(); err != nil {
		panic(err) // bad options show up here, not on the first call
	}
	var _ aws.RetryerV2 = r
	fmt.Println(r.MaxAttempts(), r.Remaining())
	// Output: 4 500
}

// Invalid options never panic: New reports them through Err, in the name
// of the field the caller wrote, and every operation fails with them.
func ExampleRetryer_Err() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = 0 })
	var oe *jitterretry.OptionsError
	fmt.Println(errors.As(r.Err(), &oe), oe.Option)
	_, err := r.GetAttemptToken(context.Background())
	fmt.Println(errors.Is(err, r.Err()))
	// Output:
	// true MaxAttempts
	// true
}

// Do retries what only the application can retry. A failed version
// condition is a conflict: it costs no retry token and has a budget of its
// own, and the versions the attempt learnt steer the backoff.
func ExampleDo() {
	r := jitterretry.New()
	version, attempts := int64(7), 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		attempts++
		seen := version // read the item
		if attempts < 3 {
			version += 2 // two other writers won meanwhile
			failed := &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}
			return jitterretry.Conflict(failed, seen, version)
		}
		return nil // the conditional write went through
	})
	fmt.Println(err, attempts, r.Remaining())
	// Output: <nil> 3 500
}

// Conflict marks any error as a conflict for Do, and keeps it inside.
func ExampleConflict() {
	lost := errors.New("version 8 is not 7")
	err := jitterretry.Conflict(lost, 7, 8)
	fmt.Println(jitterretry.Classify(err), errors.Is(err, lost))
	// Output: conflict true
}

// The bucket also serves the SDK's own retryer; when it is empty the error
// says that it is the client-side budget, not AWS, that refused.
func ExampleNewTokenBucket() {
	b := jitterretry.NewTokenBucket(10, 0)
	_, err := b.GetToken(context.Background(), 14)
	var q ratelimit.QuotaExceededError
	fmt.Println(errors.Is(err, jitterretry.ErrRetryBudgetExhausted), errors.As(err, &q), q.Available, b.Remaining())
	// Output: true true 10 10
}

// Classify follows the SDK's default rules without formatting API errors.
func ExampleClassify() {
	throttled := &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}
	conflict := &smithy.GenericAPIError{Code: "ConditionalCheckFailedException"}
	fmt.Println(jitterretry.Classify(throttled), jitterretry.Classify(conflict), jitterretry.Classify(context.Canceled))
	// Output: throttle conflict not_retryable
}

// Code that acts on a failure itself (logging, a loop of its own) switches
// on its class: only a conflict calls for reading the item again, only a
// throttle for slowing the callers down, and a not-retryable error for
// fixing the request.
func ExampleErrorClass() {
	for _, err := range []error{
		&smithy.GenericAPIError{Code: "ValidationException"},
		&smithy.GenericAPIError{Code: "RequestTimeout"},
		&smithy.GenericAPIError{Code: "ThrottlingException"},
		&smithy.GenericAPIError{Code: "ConditionalCheckFailedException"},
	} {
		switch c := jitterretry.Classify(err); c {
		case jitterretry.ClassTransient:
			fmt.Println(c, "- retry as it is")
		case jitterretry.ClassThrottle:
			fmt.Println(c, "- retry, and send less")
		case jitterretry.ClassConflict:
			fmt.Println(c, "- read the item again, then retry (Do does)")
		default:
			fmt.Println(c, "- fix the request")
		}
	}
	// Output:
	// not_retryable - fix the request
	// transient - retry as it is
	// throttle - retry, and send less
	// conflict - read the item again, then retry (Do does)
}

// A context deadline that the next backoff would pass ends the operation,
// with the throttle that caused the retry still in the error. After a
// throttle the refusal first holds its caller, as the SDK's sleep into the
// deadline would (here until the deadline less 5 ms, about 495 ms: no
// attempt was timed, so there is no margin); after a 5xx it comes at once.
func ExampleGiveUpError() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.Jitter = delayers.StrategyExponential })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if _, err := r.GetRetryToken(ctx, throttle); err != nil {
		panic(err)
	}
	_, err := r.RetryDelay(1, throttle) // 1 s throttle base > 500 ms left
	var gu *jitterretry.GiveUpError
	fmt.Println(errors.As(err, &gu), gu.Reason, errors.Is(err, context.DeadlineExceeded), errors.Is(err, throttle))
	// Output: true deadline true true
}

// A caller that must act on why the retries stopped switches on the
// Reason: out of time, the request fails; an empty budget means the service
// struggles, so shed load; spent conflicts mean the item is too hot.
func ExampleGiveUpReason() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BaseDelay, o.MaxBackoff = delayers.StrategyExponential, time.Minute, time.Minute
		o.BucketCapacity, o.FailFastOnEmptyBudget = 14, true // one retry after a timeout
	})
	timeout := &smithy.GenericAPIError{Code: "RequestTimeout"} // 14 tokens a retry
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = r.GetRetryToken(ctx, timeout)                  // as the SDK's middleware asks
	_, deadline := r.RetryDelay(1, timeout)               // a minute's backoff, 30 s left: refunded
	_, _ = r.GetRetryToken(context.Background(), timeout) // spends the 14 tokens
	_, budget := r.GetRetryToken(context.Background(), timeout)
	conflicts := jitterretry.Do(context.Background(), r, func(context.Context) error {
		return jitterretry.Conflict(errors.New("version 8 is not 7"), 7, 8)
	}, func(o *jitterretry.DoOptions) { o.MaxConflicts = 0 })
	for _, err := range []error{deadline, budget, conflicts} {
		var g *jitterretry.GiveUpError
		errors.As(err, &g)
		switch g.Reason {
		case jitterretry.GiveUpDeadline, jitterretry.GiveUpCanceled:
			fmt.Println(g.Reason, "- out of time: fail the request")
		case jitterretry.GiveUpBudget:
			fmt.Println(g.Reason, "- the service struggles: shed load")
		case jitterretry.GiveUpConflicts:
			fmt.Println(g.Reason, "- the item is too hot: report it")
		}
	}
	// Output:
	// deadline - out of time: fail the request
	// budget - the service struggles: shed load
	// conflicts - the item is too hot: report it
}

// timeoutThenInvalid runs a Do loop whose first call times out (retried as
// a transient error) and whose second fails validation (given up).
func timeoutThenInvalid(r *jitterretry.Retryer) {
	calls := 0
	_ = jitterretry.Do(context.Background(), r, func(context.Context) error {
		calls++
		if calls == 1 {
			return &smithy.GenericAPIError{Code: "RequestTimeout"}
		}
		return &smithy.GenericAPIError{Code: "ValidationException"}
	})
}

// OnRetry and OnGiveUp see every decision.
func ExampleOptions_hooks() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BaseDelay = delayers.StrategyExponential, 10*time.Millisecond
		o.OnRetry = func(e jitterretry.RetryEvent) { fmt.Println("retry", e.Attempt, e.Class, e.Delay) }
		o.OnGiveUp = func(e *jitterretry.GiveUpError) { fmt.Println("give up:", e.Reason) }
	})
	timeoutThenInvalid(r)
	// Output:
	// retry 1 transient 10ms
	// give up: not_retryable
}

// A hook receives, for each retry, the attempt that failed and its error
// (the service's own, still found with errors.As), its class, the backoff
// the SDK will sleep and whose budget paid. Here GetRetryToken and
// RetryDelay are called as the SDK's middleware calls them.
func ExampleRetryEvent() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter = delayers.StrategyExponential
		o.PartitionKey = jitterretry.PartitionFromContext
		o.OnRetry = func(e jitterretry.RetryEvent) {
			var api smithy.APIError
			fmt.Println(e.Attempt, e.Class, e.Delay, e.Partition, errors.As(e.Err, &api), api.ErrorCode(), e.Unchecked)
		}
	})
	ctx := jitterretry.WithPartition(context.Background(), "orders")
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if _, err := r.GetRetryToken(ctx, throttle); err != nil {
		panic(err)
	}
	if _, err := r.RetryDelay(2, throttle); err != nil { // the second attempt failed
		panic(err)
	}
	// Output: 2 throttle 2s orders true ThrottlingException false
}

// printedMetrics is a smithy-go metrics.MeterProvider that prints what is
// counted and recorded, to show the retryer's instruments. In production,
// give the retryer the MeterProvider its clients have (an OpenTelemetry one
// through smithyotelmetrics.Adapt: see the README's "Hooks and
// observability").
type printedMetrics struct{ metrics.NopMeter }

func (p printedMetrics) Meter(string, ...metrics.MeterOption) metrics.Meter { return p }

func (printedMetrics) Int64Counter(name string, _ ...metrics.InstrumentOption) (metrics.Int64Counter, error) {
	return printedInstrument(name), nil
}

func (printedMetrics) Float64Histogram(name string, _ ...metrics.InstrumentOption) (metrics.Float64Histogram, error) {
	return printedInstrument(name), nil
}

type printedInstrument string

func (i printedInstrument) Add(_ context.Context, n int64, opts ...metrics.RecordMetricOption) {
	i.print(fmt.Sprint("+", n), opts)
}

func (i printedInstrument) Record(_ context.Context, v float64, opts ...metrics.RecordMetricOption) {
	i.print(fmt.Sprint(v), opts)
}

func (i printedInstrument) print(value string, opts []metrics.RecordMetricOption) {
	var o metrics.RecordMetricOptions
	for _, opt := range opts {
		opt(&o)
	}
	for _, attr := range []string{"jitterretry.class", "jitterretry.reason"} {
		if v := o.Properties.Get(attr); v != nil {
			fmt.Printf("%s %s %s=%v\n", i, value, attr, v)
		}
	}
}

// MeterProvider gets the retryer's metrics: its retries by class, the
// backoffs (in seconds) and its give-ups by reason, beside the SDK's own
// client.call.* metrics when it is the client's provider too. Without one,
// nothing is recorded.
func ExampleOptions_meterProvider() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BaseDelay = delayers.StrategyExponential, 10*time.Millisecond
		o.MeterProvider = printedMetrics{}
	})
	timeoutThenInvalid(r)
	// Output:
	// jitterretry.retries +1 jitterretry.class=transient
	// jitterretry.backoff.duration 0.01 jitterretry.class=transient
	// jitterretry.give_ups +1 jitterretry.reason=not_retryable
}

// Partitions give each table (or tenant) its own bucket, so one hot table
// cannot spend every other call's budget.
func ExampleWithPartition() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity = 20
		o.PartitionKey = jitterretry.PartitionFromContext
	})
	hot := jitterretry.WithPartition(context.Background(), "orders")
	_, err := r.GetRetryToken(hot, &smithy.GenericAPIError{Code: "RequestTimeout"})
	fmt.Println(err, r.Remaining()) // the shared bucket is untouched
	// Output: <nil> 20
}

// PartitionByOperation gives each SDK operation a bucket of its own: a
// PutItem whose throttles empty its bucket leaves GetItem's whole. The SDK
// names the operation in the context it hands the retryer, as the context
// below does.
func ExamplePartitionByOperation() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity = 14 // the least: a retry after a timeout costs 14
		o.PartitionKey = jitterretry.PartitionByOperation
		o.FailFastOnEmptyBudget = true // refuse at once, as the SDK does
	})
	operation := func(name string) context.Context {
		return awsmiddle.SetOperationName(awsmiddle.SetServiceID(context.Background(), "DynamoDB"), name)
	}
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"} // 5 tokens a retry
	put, get := operation("PutItem"), operation("GetItem")
	for range 2 {
		if _, err := r.GetRetryToken(put, throttle); err != nil {
			panic(err)
		}
	}
	_, err := r.GetRetryToken(put, throttle)
	fmt.Println(errors.Is(err, jitterretry.ErrRetryBudgetExhausted)) // DynamoDB.PutItem's has 4 left
	_, err = r.GetRetryToken(get, throttle)
	fmt.Println(err, r.Remaining()) // DynamoDB.GetItem's are not; the shared bucket is untouched
	// Output:
	// true
	// <nil> 14
}

// PartitionFromContext lets each call choose its bucket: a key set with
// WithPartition (a table, a tenant) wins; without one, the SDK operation the
// context names is the key, as with PartitionByOperation; and WithPartition
// with "" asks for the shared bucket.
func ExamplePartitionFromContext() {
	op := awsmiddle.SetOperationName(awsmiddle.SetServiceID(context.Background(), "DynamoDB"), "PutItem")
	for _, ctx := range []context.Context{
		op,
		jitterretry.WithPartition(op, "orders"),
		jitterretry.WithPartition(op, ""),
		context.Background(), // outside an SDK operation, with no key
	} {
		fmt.Printf("%q\n", jitterretry.PartitionFromContext(ctx))
	}
	// Output:
	// "DynamoDB.PutItem"
	// "orders"
	// ""
	// ""
}

// PartitionKey takes any function of the context, not only the package's
// two. Here each SDK service gets its own budget, so that one retryer given
// to every client of a config (config.WithRetryer) cannot let DynamoDB's
// throttles spend the retries S3 needs.
func ExampleOptions_partitionKey() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.FailFastOnEmptyBudget = 14, true
		o.PartitionKey = awsmiddle.GetServiceID // "" outside an SDK operation
	})
	dynamo := awsmiddle.SetServiceID(context.Background(), "DynamoDB")
	s3 := awsmiddle.SetServiceID(context.Background(), "S3")
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"} // 5 tokens a retry
	var err error
	for err == nil {
		_, err = r.GetRetryToken(dynamo, throttle)
	}
	var g *jitterretry.GiveUpError
	fmt.Println(errors.As(err, &g), g.Reason, g.Partition)
	_, err = r.GetRetryToken(s3, throttle)
	fmt.Println(err)
	// Output:
	// true budget DynamoDB
	// <nil>
}

// DoOptions bound one loop and say what it retries. Build Classify on the
// default Do hands the option function: here an error of the caller's own
// is a conflict too, and the loop gives up after two of them.
func ExampleDoOptions() {
	r := jitterretry.New()
	errStale := errors.New("the item moved on since it was read")
	calls := 0
	err := jitterretry.Do(context.Background(), r, func(context.Context) error {
		calls++
		return errStale
	}, func(o *jitterretry.DoOptions) {
		o.MaxConflicts = 2
		classify := o.Classify
		o.Classify = func(err error) jitterretry.ErrorClass {
			if errors.Is(err, errStale) {
				return jitterretry.ClassConflict
			}
			return classify(err)
		}
	})
	var g *jitterretry.GiveUpError
	fmt.Println(errors.As(err, &g) && g.Reason == jitterretry.GiveUpConflicts, errors.Is(err, errStale), calls)
	// Output: true true 3
}

// DeadlineMargin fixes the time a retry must leave before the deadline for
// its attempt (by default it is learnt from the attempts). A throttle with
// 90 s left is not retried after a 40 s backoff when the attempt needs a
// minute: the refusal wraps the throttle and matches the deadline's error.
func ExampleOptions_deadlineMargin() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.DeadlineMargin = time.Minute
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 40 * time.Second, nil })
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if _, err := r.GetRetryToken(ctx, throttle); err != nil { // as the SDK's middleware asks
		panic(err)
	}
	_, err := r.RetryDelay(1, throttle)
	var g *jitterretry.GiveUpError
	fmt.Println(errors.As(err, &g), g.Reason, errors.Is(err, context.DeadlineExceeded), errors.Is(err, throttle))
	// Output: true deadline true true
}

// With Options.SendRate set, every attempt waits its turn in
// GetAttemptToken, at a rate learnt from throttles.
func ExampleOptions_sendRate() {
	r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 50}
	})
	start := time.Now()
	for range 3 {
		release, err := r.GetAttemptToken(context.Background()) // at 0, 20 and 40 ms
		if err != nil {
			panic(err)
		}
		_ = release(nil) // the attempt succeeded
	}
	fmt.Println(time.Since(start) >= 40*time.Millisecond)
	// Output: true
}

// AttemptTimeout is an SDK API option: add it to the Options.APIOptions of
// the clients you call (dynamodb.NewFromConfig(cfg, func(o
// *dynamodb.Options) {...})), not with config.WithAPIOptions, which reaches
// the clients that fetch credentials too (see AttemptTimeout). It adds one
// middleware, last in the Finalize step, after the signature,
// within each attempt of the SDK's retry middleware. An attempt
// that stalls (a connection that never answers) is cut at its limit, with
// an error that matches ErrAttemptTimeout, and retried as a timeout.
func ExampleAttemptTimeout() {
	// A client's stack has the SDK's signing and retry middlewares; a
	// stand-in signs here, and the handler below stands in for the
	// connection. The timeout goes last, next to the send: what comes
	// before it in an attempt (the credentials, the signature) is not
	// cut.
	stack := middleware.NewStack("PutItem", smithyhttp.NewStackRequest)
	signing := middleware.FinalizeMiddlewareFunc("Signing", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		return next.HandleFinalize(ctx, in)
	})
	if err := stack.Finalize.Add(signing, middleware.After); err != nil {
		panic(err)
	}
	var cut error
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BaseDelay = time.Millisecond
		o.OnRetry = func(e jitterretry.RetryEvent) { cut = e.Err }
	})
	if err := retry.AddRetryMiddlewares(stack, retry.AddRetryMiddlewaresOptions{Retryer: r}); err != nil {
		panic(err)
	}
	if err := jitterretry.AttemptTimeout(20 * time.Millisecond)(stack); err != nil {
		panic(err)
	}
	fmt.Println(stack.Finalize.List())

	attempts := 0
	send := middleware.HandlerFunc(func(ctx context.Context, _ any) (any, middleware.Metadata, error) {
		if attempts++; attempts == 1 {
			<-ctx.Done() // the first attempt stalls until its limit
			return nil, middleware.Metadata{}, ctx.Err()
		}
		return "ok", middleware.Metadata{}, nil
	})
	_, _, err := middleware.DecorateHandler(send, stack).Handle(context.Background(), nil)
	fmt.Println(err, attempts, errors.Is(cut, jitterretry.ErrAttemptTimeout))
	// Output:
	// [Retry Signing jitterretry.AttemptTimeout]
	// <nil> 2 true
}

// BucketRefill earns tokens back with time, so that workers that are all
// retrying cannot empty the bucket for good. The Clock stands in for time.
func ExampleOptions_bucketRefill() {
	now := time.Unix(0, 0)
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity, o.BucketRefill = 20, 2 // 2 tokens a second, up to 20
		o.Clock = func() time.Time { return now }
	})
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"} // 5 tokens a retry
	for range 4 {
		if _, err := r.GetRetryToken(context.Background(), throttle); err != nil {
			panic(err)
		}
	}
	fmt.Println(r.Remaining())
	now = now.Add(5 * time.Second)
	fmt.Println(r.Remaining())
	// Output:
	// 0
	// 10
}

// The bucket's prices are the SDK's unless set: a retry after a timeout or
// a 5xx costs RetryCost, one after a throttle ThrottlingRetryCost, and an
// operation whose first attempt succeeds earns NoRetryIncrement back. A
// retry that succeeds gets its own cost back instead.
func ExampleOptions_retryCost() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.BucketCapacity = 100
		o.RetryCost, o.ThrottlingRetryCost, o.NoRetryIncrement = 10, 2, 3
	})
	ctx := context.Background()
	_, _ = r.GetRetryToken(ctx, &smithy.GenericAPIError{Code: "RequestTimeout"})
	_, _ = r.GetRetryToken(ctx, &smithy.GenericAPIError{Code: "ThrottlingException"})
	fmt.Println(r.Remaining())
	release, err := r.GetAttemptToken(ctx) // another operation's first attempt
	if err != nil {
		panic(err)
	}
	_ = release(nil) // succeeded
	fmt.Println(r.Remaining())
	// Output:
	// 88
	// 91
}

// DynamoDB gives back the SDK's DynamoDB client defaults, which a client
// built with a custom retryer otherwise loses.
func ExampleDynamoDB() {
	r := jitterretry.New(jitterretry.DynamoDB)
	var seen jitterretry.Options
	jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) { seen = *o })
	fmt.Println(r.MaxAttempts(), seen.BaseDelay)
	// Output: 4 25ms
}

// Jitter picks the blog's strategy for every backoff of the retryer. A
// seeded Source makes the draws repeatable, as tests need; the retryer
// draws as package delayers does, so full and equal jitter give the delays
// of that package's examples, which use the same seed.
func ExampleOptions_jitter() {
	timeout := &smithy.GenericAPIError{Code: "RequestTimeout"}
	for _, strategy := range delayers.Strategies() {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Jitter = strategy
			o.Source = delayers.NewSource(2015)
		})
		fmt.Print(strategy, ":")
		for attempt := 1; attempt <= 4; attempt++ {
			delay, _ := r.RetryDelay(attempt, timeout) // as the SDK's middleware asks
			fmt.Print(" ", delay.Round(time.Millisecond))
		}
		fmt.Println()
	}
	// Output:
	// exponential: 50ms 100ms 200ms 400ms
	// full: 45ms 50ms 159ms 192ms
	// equal: 47ms 75ms 180ms 296ms
	// decorrelated: 139ms 249ms 53ms 141ms
}

// BackoffGrowth slows the growth of the window from doubling: under
// contention full jitter grown by 1.5 made fewer calls (BENCHMARKS.md,
// section 2). The exponential strategy shows the windows themselves, up to
// MaxBackoff. Decorrelated jitter grows from its previous delay and refuses
// any other growth.
func ExampleOptions_backoffGrowth() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BackoffGrowth = delayers.StrategyExponential, 1.5
		o.BaseDelay, o.MaxBackoff = 100*time.Millisecond, time.Second
	})
	var delays []time.Duration
	for attempt := 1; attempt <= 7; attempt++ {
		delay, _ := r.RetryDelay(attempt, &smithy.GenericAPIError{Code: "RequestTimeout"})
		delays = append(delays, delay)
	}
	fmt.Println(delays)
	bad := jitterretry.New(func(o *jitterretry.Options) {
		o.Jitter, o.BackoffGrowth = delayers.StrategyDecorrelated, 1.5
	})
	var oe *jitterretry.OptionsError
	fmt.Println(errors.As(bad.Err(), &oe), oe.Option)
	// Output:
	// [100ms 150ms 225ms 337.5ms 506.25ms 759.375ms 1s]
	// true BackoffGrowth
}

// Backoff hands every delay to a retry.BackoffDelayer of one's own, such as
// a delayer of package delayers with its own settings: here equal jitter
// capped at 2 s, which replaces Jitter, the base delays, MaxBackoff and
// BackoffGrowth, and tells a throttle by the error it is given.
func ExampleOptions_backoff() {
	equal, err := delayers.NewEqual(func(o *delayers.Options) {
		o.Cap, o.Source = 2*time.Second, delayers.NewSource(2015)
	})
	if err != nil {
		panic(err)
	}
	r := jitterretry.New(func(o *jitterretry.Options) { o.Backoff = equal })
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	for attempt := 1; attempt <= 3; attempt++ {
		delay, _ := r.RetryDelay(attempt, throttle) // windows of 1 s, 2 s, 2 s
		fmt.Println(delay.Round(time.Millisecond))
	}
	// Output:
	// 946ms
	// 1.498s
	// 1.796s
}

// UnlimitedAttempts lifts the attempt limit, so the retry budget and the
// context end the retries instead; the SDK's middleware reads the limit
// as 0, its own "no limit". Here every attempt times out: each retry costs
// 14 tokens of a bucket of 70, and the sixth is refused with the SDK's
// quota error.
func ExampleUnlimitedAttempts() {
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.MaxAttempts = jitterretry.UnlimitedAttempts
		o.BucketCapacity = 70
	})
	timeout := &smithy.GenericAPIError{Code: "RequestTimeout"}
	for retries := 0; retries < 100; retries++ {
		_, err := r.GetRetryToken(context.Background(), timeout) // as the SDK's middleware asks
		if err != nil {
			var quota ratelimit.QuotaExceededError
			fmt.Println(r.MaxAttempts(), retries, errors.As(err, &quota), errors.Is(err, timeout))
			break
		}
	}
	// Output: 0 5 true true
}

// RateLimiter replaces the retry token bucket: ratelimit.None turns the
// budget off, so only the attempt limit and the context end the retries
// (the SDK's "no budget"). A RateLimiter that cannot say what it holds
// leaves Remaining at 0.
func ExampleOptions_rateLimiter() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.RateLimiter = ratelimit.None })
	timeout := &smithy.GenericAPIError{Code: "RequestTimeout"}
	refused := 0
	for range 1000 {
		release, err := r.GetRetryToken(context.Background(), timeout)
		if err != nil {
			refused++
			continue
		}
		_ = release(nil) // the retry succeeded
	}
	fmt.Println(refused, r.Remaining())
	// Output: 0 0
}

// responseError is the error an SDK client returns for an HTTP answer with
// status, err being the service's error in its body.
func responseError(status int, err error) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      err,
	}}
}

// DisableDeadlineGiveUp leaves a retry that cannot finish before the
// context's deadline to the SDK's sleep, which then ends in the deadline,
// as retry.NewStandard() does; by default the retryer refuses it at once
// with a *GiveUpError that keeps the attempt's error.
func ExampleOptions_disableDeadlineGiveUp() {
	unavailable := responseError(503, errors.New("service unavailable")) // retried, as by the SDK
	for _, off := range []bool{false, true} {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Jitter = delayers.StrategyExponential // a backoff of exactly BaseDelay
			o.BaseDelay = 15 * time.Second
			o.DisableDeadlineGiveUp = off
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := r.GetRetryToken(ctx, unavailable) // as the SDK's middleware asks
		var delay time.Duration
		if err == nil {
			delay, err = r.RetryDelay(1, unavailable)
		}
		cancel()
		var gu *jitterretry.GiveUpError
		if errors.As(err, &gu) {
			fmt.Println(gu.Reason, errors.Is(err, unavailable))
			continue
		}
		fmt.Println(delay, err)
	}
	// Output:
	// deadline true
	// 15s <nil>
}

// Retryables and Throttles are consulted before the built-in rules, which
// always apply after them: a check that answers says what the error is,
// one that returns aws.UnknownTernary leaves it to the rules. Here a
// proxy's own "Busy" code is retried as a throttle, and a 503 from one
// operation whose retries are known to be useless is not retried.
func ExampleOptions_retryables() {
	busy := func(err error) aws.Ternary {
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "Busy" {
			return aws.TrueTernary
		}
		return aws.UnknownTernary
	}
	noReplay := func(err error) aws.Ternary {
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "ReplayRefused" {
			return aws.FalseTernary
		}
		return aws.UnknownTernary
	}
	r := jitterretry.New(func(o *jitterretry.Options) {
		o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(busy), retry.IsErrorRetryableFunc(noReplay)}
		o.Throttles = []retry.IsErrorThrottle{retry.IsErrorThrottleFunc(busy)}
	})
	fmt.Println(r.IsErrorRetryable(&smithy.GenericAPIError{Code: "Busy"}),
		r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ReplayRefused"}),
		r.IsErrorRetryable(&smithy.GenericAPIError{Code: "ThrottlingException"}))
	// Output: true false true
}

// Throttles says which errors are throttles, which back off from
// ThrottleBaseDelay (1 s) rather than BaseDelay (50 ms) and cost
// ThrottlingRetryCost (5 tokens) rather than RetryCost (14). Here a proxy's
// 503 "TooBusy" is one. A throttle check only prices and paces: whether an
// error is retried at all is for Retryables and the built-in rules (a 503
// is retried either way).
func ExampleOptions_throttles() {
	tooBusy := responseError(503, &smithy.GenericAPIError{Code: "TooBusy"})
	isTooBusy := retry.IsErrorThrottleFunc(func(err error) aws.Ternary {
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "TooBusy" {
			return aws.TrueTernary
		}
		return aws.UnknownTernary // left to the built-in rules
	})
	for _, throttles := range [][]retry.IsErrorThrottle{nil, {isTooBusy}} {
		r := jitterretry.New(func(o *jitterretry.Options) {
			o.Jitter = delayers.StrategyExponential // a backoff of exactly the base
			o.Throttles = throttles
		})
		_, _ = r.GetRetryToken(context.Background(), tooBusy) // as the SDK's middleware asks
		delay, _ := r.RetryDelay(1, tooBusy)
		fmt.Println(r.IsErrorRetryable(tooBusy), delay, 500-r.Remaining())
	}
	// Output:
	// true 50ms 14
	// true 1s 5
}

// A TokenBucket plugs into the SDK's own retryer as its RateLimiter, where
// it adds a refill over time: here 2 tokens a second into a bucket of 500.
func ExampleNewTokenBucket_standardRetryer() {
	b := jitterretry.NewTokenBucket(500, 2)
	s := retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = b })
	release, err := s.GetRetryToken(context.Background(), &smithy.GenericAPIError{Code: "InternalFailure"})
	fmt.Println(err, b.Remaining())
	fmt.Println(release(nil), b.Remaining()) // the retry succeeded: its 14 tokens come back
	// Output:
	// <nil> 486
	// <nil> 500
}

// One *TokenBucket given as RateLimiter to two retryers gives them one
// budget: a retry of either spends it, a refund of either fills it, and
// both report what is left. Each keeps its own backoff, costs and hooks.
func ExampleTokenBucket() {
	shared := jitterretry.NewTokenBucket(20, 0)
	use := func(o *jitterretry.Options) { o.RateLimiter, o.FailFastOnEmptyBudget = shared, true }
	orders, billing := jitterretry.New(use), jitterretry.New(use)
	timeout := &smithy.GenericAPIError{Code: "RequestTimeout"} // 14 tokens a retry
	release, err := orders.GetRetryToken(context.Background(), timeout)
	if err != nil {
		panic(err)
	}
	fmt.Println(orders.Remaining(), billing.Remaining())
	_, err = billing.GetRetryToken(context.Background(), timeout)
	fmt.Println(errors.Is(err, jitterretry.ErrRetryBudgetExhausted))
	_ = release(nil) // orders' retry succeeded: its tokens come back
	fmt.Println(billing.Remaining())
	// Output:
	// 6 6
	// true
	// 20
}
