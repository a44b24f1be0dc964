package jitterretry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/delayers"
)

// One line in config.LoadDefaultConfig: every client built from cfg gets its
// own retryer, and so its own retry token bucket.
func ExampleNew() {
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")),
		config.WithRetryer(func() aws.Retryer {
			return jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
				o.Jitter = delayers.StrategyDecorrelated
			})
		}),
	)
	if err != nil {
		panic(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	_ = client
	r := cfg.Retryer().(*jitterretry.Retryer)
	fmt.Println(r.Err(), r.MaxAttempts(), r.Remaining())
	// Output: <nil> 4 500
}

// Invalid options never panic: New reports them through Err, and every
// operation fails with the same typed error.
func ExampleRetryer_Err() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.MaxAttempts = 0 })
	var oe *jitterretry.OptionsError
	fmt.Println(errors.As(r.Err(), &oe), oe.Option)
	// Output: true MaxAttempts
}

// Do retries what only the application can retry (here a failed condition,
// after which fn re-reads), on the same jitter and budget as the SDK-level
// retries.
func ExampleDo() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.BaseDelay = time.Millisecond })
	attempts := 0
	err := jitterretry.Do(context.Background(), r, func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return &types.ConditionalCheckFailedException{Message: aws.String("version moved")}
		}
		return nil
	}, func(o *jitterretry.DoOptions) {
		o.Classify = func(err error) jitterretry.ErrorClass {
			var c *types.ConditionalCheckFailedException
			if errors.As(err, &c) {
				return jitterretry.ClassTransient
			}
			return r.Classify(err)
		}
	})
	fmt.Println(err, attempts, r.Remaining())
	// Output: <nil> 3 486
}

// The bucket also serves the SDK's own retryer; when it is empty the error
// says that it is the client-side budget, not AWS, that refused.
func ExampleNewTokenBucket() {
	b := jitterretry.NewTokenBucket(func(o *jitterretry.TokenBucketOptions) { o.Capacity = 10 })
	_, err := b.GetToken(context.Background(), 14)
	fmt.Println(errors.Is(err, jitterretry.ErrRetryBudgetExhausted), b.Remaining())
	// Output: true 10
}

// Classify follows the SDK's default rules without formatting the error.
func ExampleClassify() {
	throttled := &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	conflict := &types.ConditionalCheckFailedException{Message: aws.String("no")}
	fmt.Println(jitterretry.Classify(throttled), jitterretry.Classify(conflict), jitterretry.Classify(context.Canceled))
	// Output: throttle not-retryable not-retryable
}

// A context deadline that the next backoff would pass ends the operation at
// once, with the throttle that caused the retry still in the error.
func ExampleGiveUpError() {
	r := jitterretry.New(func(o *jitterretry.Options) { o.Jitter = delayers.StrategyExponential })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	throttle := &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	if _, err := r.GetRetryToken(ctx, throttle); err != nil {
		panic(err)
	}
	_, err := r.RetryDelay(1, throttle) // 1 s throttle base > 500 ms left
	var gu *jitterretry.GiveUpError
	fmt.Println(errors.As(err, &gu), gu.Reason, errors.Is(err, context.DeadlineExceeded), errors.Is(err, throttle))
	// Output: true wait past deadline true true
}

// The send-rate limiter paces callers in turn at a learnt rate; a throttle
// cuts the rate for the callers already waiting too. Its At methods take
// the time, so this runs on a fake clock.
func ExampleSendRateLimiter() {
	l := jitterretry.NewSendRateLimiter(func(o *jitterretry.SendRateOptions) { o.InitialRate = 100 })
	start := time.Unix(0, 0)
	var places []jitterretry.SendReservation
	for range 3 {
		places = append(places, l.ReserveAt(start))
	}
	for _, p := range places {
		wait, _ := l.DelayAt(p, start)
		fmt.Print(wait, " ")
	}
	fmt.Println("at", l.Rate(), "/s")

	// The first request comes back throttled 2 ms later, before any
	// success: the limiter keeps a quarter of its rate and the third caller,
	// still waiting, now waits for 1.8 places at 25/s.
	now := start.Add(2 * time.Millisecond)
	l.ObserveAt(start, now, true)
	wait, _ := l.DelayAt(places[2], now)
	fmt.Println(wait, "at", l.Rate(), "/s")
	// Output:
	// 0s 10ms 20ms at 100 /s
	// 72ms at 25 /s
}

// With Options.SendRate set, every attempt waits its turn in GetAttemptToken,
// and OnSendWait sees the waits.
func ExampleOptions_sendRate() {
	var waits atomic.Int64
	r := jitterretry.New(jitterretry.DynamoDB, func(o *jitterretry.Options) {
		o.SendRate = &jitterretry.SendRateOptions{InitialRate: 50}
		o.OnSendWait = func(jitterretry.SendWaitEvent) { waits.Add(1) }
	})
	for range 3 {
		release, err := r.GetAttemptToken(context.Background()) // 0, 20 and 40 ms
		if err != nil {
			panic(err)
		}
		_ = release(nil) // the attempt succeeded
	}
	rate, _ := r.SendRateIn("")
	fmt.Println(waits.Load(), "waits at", rate, "/s")
	// Output: 2 waits at 50 /s
}
