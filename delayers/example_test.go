package delayers_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jitterretry/jitterretry/delayers"
)

// throttled is a throttling error shaped as the SDK's retry middleware sees
// it: HTTP 400 with the API error code ThrottlingException.
var throttled error = &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
	Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}},
	Err:      &smithy.GenericAPIError{Code: "ThrottlingException"},
}}

// seeded makes the examples' random draws repeatable; production code leaves
// Options.Source nil.
func seeded(o *delayers.Options) { o.Source = delayers.NewSource(2015) }

// Full jitter draws each delay uniformly from [0, w), with the window w
// doubling from Base and stopping at Cap.
func ExampleNewFull() {
	d, err := delayers.NewFull(seeded)
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 5; attempt++ {
		delay, _ := d.BackoffDelay(attempt, errors.New("connection reset"))
		fmt.Printf("attempt %d: window %v, delay %v\n", attempt, d.Base()<<(attempt-1), delay.Round(time.Millisecond))
	}
	// Output:
	// attempt 1: window 50ms, delay 45ms
	// attempt 2: window 100ms, delay 50ms
	// attempt 3: window 200ms, delay 159ms
	// attempt 4: window 400ms, delay 192ms
	// attempt 5: window 800ms, delay 290ms
}

// Growth replaces the doubling of the window by another factor, here 1.5,
// with a first window of four round trips of 20 ms. Under contention, full
// jitter grown this way makes fewer calls than with doubling and finishes no
// later (BENCHMARKS.md, section 2). The window still stops at Cap.
func ExampleNewFull_growth() {
	d, err := delayers.NewFull(seeded, func(o *delayers.Options) {
		o.Base = 80 * time.Millisecond
		o.Cap = 2 * time.Second
		o.Growth = 1.5
	})
	if err != nil {
		panic(err)
	}
	window := d.Base()
	for attempt := 1; attempt <= 9; attempt++ {
		delay, _ := d.BackoffDelay(attempt, nil)
		fmt.Printf("attempt %d: window %v, delay %v\n", attempt, window, delay.Round(time.Millisecond))
		window = min(d.Cap(), time.Duration(float64(window)*d.Growth()))
	}
	// Output:
	// attempt 1: window 80ms, delay 71ms
	// attempt 2: window 120ms, delay 60ms
	// attempt 3: window 180ms, delay 143ms
	// attempt 4: window 270ms, delay 129ms
	// attempt 5: window 405ms, delay 147ms
	// attempt 6: window 607.5ms, delay 5ms
	// attempt 7: window 911.25ms, delay 580ms
	// attempt 8: window 1.366875s, delay 1.245s
	// attempt 9: window 2s, delay 140ms
}

// Equal jitter keeps half the window and draws the other half, so no retry
// comes sooner than w/2.
func ExampleNewEqual() {
	d, err := delayers.NewEqual(seeded)
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 5; attempt++ {
		delay, _ := d.BackoffDelay(attempt, nil)
		fmt.Printf("attempt %d: window %v, delay %v\n", attempt, d.Base()<<(attempt-1), delay.Round(time.Millisecond))
	}
	// Output:
	// attempt 1: window 50ms, delay 47ms
	// attempt 2: window 100ms, delay 75ms
	// attempt 3: window 200ms, delay 180ms
	// attempt 4: window 400ms, delay 296ms
	// attempt 5: window 800ms, delay 545ms
}

// Exponential backoff without jitter returns the window itself: Base for the
// first retry, doubling up to Cap. Throttling errors start from ThrottleBase.
func ExampleNewExponential() {
	d, err := delayers.NewExponential()
	if err != nil {
		panic(err)
	}
	for _, attempt := range []int{1, 2, 3, 9, 10, 1000} {
		delay, _ := d.BackoffDelay(attempt, nil)
		throttle, _ := d.BackoffDelay(attempt, throttled)
		fmt.Printf("attempt %d: %v, throttled %v\n", attempt, delay, throttle)
	}
	// Output:
	// attempt 1: 50ms, throttled 1s
	// attempt 2: 100ms, throttled 2s
	// attempt 3: 200ms, throttled 4s
	// attempt 9: 12.8s, throttled 20s
	// attempt 10: 20s, throttled 20s
	// attempt 1000: 20s, throttled 20s
}

// Decorrelated jitter grows each delay from the one before it. BackoffDelay
// redraws the chain up to the attempt on every call, so the delayer holds no
// per-request state; every delay is within [Base, Cap]. Successive calls are
// independent draws, so they rise on average rather than one by one; use a
// Sequence for one loop's chained delays.
func ExampleNewDecorrelated() {
	d, err := delayers.NewDecorrelated(seeded, func(o *delayers.Options) {
		o.Base = 100 * time.Millisecond
		o.Cap = 5 * time.Second
	})
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 6; attempt++ {
		delay, _ := d.BackoffDelay(attempt, nil)
		fmt.Printf("attempt %d: %v\n", attempt, delay.Round(time.Millisecond))
	}
	// Output:
	// attempt 1: 278ms
	// attempt 2: 497ms
	// attempt 3: 106ms
	// attempt 4: 282ms
	// attempt 5: 209ms
	// attempt 6: 5s
}

// A Sequence is the stateful form for one retry loop of your own: each Next
// draws from [Base, 3*previous delay), as in the blog's code, and Reset
// starts over after a success.
func ExampleDecorrelated_NewSequence() {
	d, err := delayers.NewDecorrelated(seeded, func(o *delayers.Options) { o.Cap = 2 * time.Second })
	if err != nil {
		panic(err)
	}
	loop := d.NewSequence()
	for range 6 {
		delay := loop.Next(errors.New("timeout"))
		fmt.Printf("retry %d after %v\n", loop.Attempt(), delay.Round(time.Millisecond))
	}
	loop.Reset()
	fmt.Println("after Reset, attempt", loop.Attempt())
	// Output:
	// retry 1 after 139ms
	// retry 2 after 233ms
	// retry 3 after 567ms
	// retry 4 after 841ms
	// retry 5 after 948ms
	// retry 6 after 72ms
	// after Reset, attempt 0
}

// NextFor takes the caller's own verdict on throttling: here an
// application's "busy" answer, which no AWS check calls a throttle, backs off
// on the throttle base.
func ExampleSequence_NextFor() {
	d, err := delayers.NewExponential(func(o *delayers.Options) {
		o.Base, o.ThrottleBase = 10*time.Millisecond, 500*time.Millisecond
	})
	if err != nil {
		panic(err)
	}
	loop := d.NewSequence()
	busy := true // the application's classification of its own error
	fmt.Println(loop.NextFor(busy), loop.NextFor(busy), loop.NextFor(false))
	// Output:
	// 500ms 1s 40ms
}

// Reset a loop's Sequence after a success, so that its next failure waits
// a first retry's delay again rather than one grown from failures already
// overcome.
func ExampleSequence_Reset() {
	d, err := delayers.NewExponential()
	if err != nil {
		panic(err)
	}
	loop := d.NewSequence()
	timeout := errors.New("timeout")
	fmt.Println(loop.Next(timeout), loop.Next(timeout), loop.Next(timeout))
	loop.Reset() // the write went through
	fmt.Println(loop.Attempt(), loop.Next(timeout))
	// Output:
	// 50ms 100ms 200ms
	// 0 50ms
}

// New picks the strategy by name, as a command-line flag would give it.
func ExampleNew() {
	name := "equal" // e.g. from flag.String("backoff", "full", ...)
	strategy, err := delayers.ParseStrategy(name)
	if err != nil {
		panic(err)
	}
	d, err := delayers.New(strategy, seeded, func(o *delayers.Options) { o.Cap = time.Second })
	if err != nil {
		panic(err)
	}
	delay, _ := d.BackoffDelay(3, nil)
	fmt.Println(strategy, delay.Round(time.Millisecond))

	_, err = delayers.New("fibonacci")
	fmt.Println(errors.Is(err, delayers.ErrUnknownStrategy))
	// Output:
	// equal 189ms
	// true
}

// A Delayer says what its settings came to after defaults, and Delay serves
// a caller that has classified the error already (a queue's own "slow down"
// answer, say), without walking the error chain.
func ExampleDelayer() {
	d, err := delayers.New(delayers.StrategyExponential, func(o *delayers.Options) {
		o.Cap = 10 * time.Second
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Base(), d.ThrottleBase(), d.Cap())
	fmt.Println(d.Delay(1, false), d.Delay(1, true), d.Delay(5, true))
	// Output:
	// 50ms 1s 10s
	// 50ms 1s 10s
}

// Invalid settings are reported, never silently replaced: a negative
// duration, say. (A base above the cap is not invalid: the cap applies.)
func ExampleOptionError() {
	_, err := delayers.NewFull(func(o *delayers.Options) {
		o.Cap = -time.Second
	})
	var oe *delayers.OptionError
	if errors.As(err, &oe) {
		fmt.Println(oe.Option, oe.Value)
	}
	fmt.Println(err)
	fmt.Println(errors.Is(err, delayers.ErrInvalidOption))
	// Output:
	// Cap -1s
	// delayers: invalid Cap -1s: must not be negative
	// true
}

// NewSource makes delays repeatable: two delayers with the same seed give the
// same delays, which is what tests and simulations need.
func ExampleNewSource() {
	a, _ := delayers.NewFull(func(o *delayers.Options) { o.Source = delayers.NewSource(7) })
	b, _ := delayers.NewFull(func(o *delayers.Options) { o.Source = delayers.NewSource(7) })
	for attempt := 1; attempt <= 3; attempt++ {
		x, _ := a.BackoffDelay(attempt, nil)
		y, _ := b.BackoffDelay(attempt, nil)
		fmt.Println(x == y, x)
	}
	// Output:
	// true 19.491487ms
	// true 1.678829ms
	// true 180.152136ms
}

// Any delayer plugs into the SDK's standard retryer through
// StandardOptions.Backoff. Setting MaxBackoff to the delayer's Cap keeps the
// two settings telling the same story; the delayer applies its own cap.
func Example_standardRetryer() {
	d, err := delayers.NewFull(seeded)
	if err != nil {
		panic(err)
	}
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = d
		o.MaxBackoff = d.Cap()
	})
	// A client would take it with config.WithRetryer(func() aws.Retryer {
	// return retryer }); here the retryer is asked directly.
	for attempt := 1; attempt <= 3; attempt++ {
		delay, _ := retryer.RetryDelay(attempt, throttled)
		fmt.Printf("throttled attempt %d: %v\n", attempt, delay.Round(time.Millisecond))
	}
	fmt.Println("retryable:", retryer.IsErrorRetryable(throttled))
	// Output:
	// throttled attempt 1: 892ms
	// throttled attempt 2: 997ms
	// throttled attempt 3: 3.183s
	// retryable: true
}

// Contention spaces the retries of one conditional-write loop by what its
// conflicts show. Here the loop writes again with the version each failed
// write returned (ALL_OLD), and every time five other writers have won
// since: it sleeps as long as its estimate of the competitors asks, then
// retries at once with the version that sleep's conflict returned, which is
// fresh, and so on, the estimate measured again at each conflict. Do uses
// it for conflicts; a loop of one's own keeps one Contention per item.
func ExampleContention() {
	c := delayers.Contention{Source: delayers.NewSource(2015)}
	at, version := time.Unix(0, 0), int64(10)
	for range 4 {
		at = at.Add(10 * time.Millisecond) // the write's round trip
		seen := version
		version += 5 // others won meanwhile; ALL_OLD returns the new version
		sleep := c.Next(at, 10*time.Millisecond, seen, version)
		fmt.Println(sleep.Round(time.Millisecond))
		at = at.Add(sleep)
	}
	// Output:
	// 125ms
	// 1ms
	// 342ms
	// 1ms
}

// Reset a Contention when its loop moves on to another item: what it
// learnt of one item's competitors says nothing of the next one's. Here the
// versions are unknown, so the sleeps are drawn from blind windows: twice
// the attempt's 10 ms, growing by 1.5 per conflict (20, 30 and 45 ms),
// then, after Reset, from 20 ms again.
func ExampleContention_Reset() {
	c := delayers.Contention{Source: delayers.NewSource(2015)}
	at := time.Unix(0, 0)
	for item := range 2 {
		fmt.Printf("item %d:", item)
		for range 3 {
			at = at.Add(10 * time.Millisecond) // the write's round trip
			sleep := c.Next(at, 10*time.Millisecond, 0, 0)
			fmt.Print(" ", sleep.Round(time.Millisecond))
			at = at.Add(sleep)
		}
		fmt.Println()
		c.Reset() // on to the next item
	}
	// Output:
	// item 0: 18ms 15ms 36ms
	// item 1: 10ms 11ms 0s
}

// ParseStrategy reads a strategy's name from configuration (a flag, an
// environment variable); Strategies lists the names it takes.
func ExampleParseStrategy() {
	s, err := delayers.ParseStrategy("decorrelated")
	fmt.Println(s, err)
	_, err = delayers.ParseStrategy("Full")
	fmt.Println(errors.Is(err, delayers.ErrUnknownStrategy))
	fmt.Println(delayers.Strategies())
	// Output:
	// decorrelated <nil>
	// true
	// [exponential full equal decorrelated]
}

// Throttle says which errors back off on ThrottleBase. By default it is the
// SDK's list of throttling errors; a service with a throttle code of its own
// adds it to that list, so that its throttles back off as the SDK's do. When
// the delayer plugs into retry.NewStandard, pass the same list as
// retry.StandardOptions.Throttles, so that the bucket charges them as
// throttles too.
func ExampleOptions_throttle() {
	tooBusy := &smithy.GenericAPIError{Code: "TooBusy"} // the service's own throttle
	throttles := append(retry.IsErrorThrottles{
		retry.ThrottleErrorCode{Codes: map[string]struct{}{"TooBusy": {}}},
	}, retry.DefaultThrottles...)

	byDefault, err := delayers.NewExponential()
	if err != nil {
		panic(err)
	}
	withTooBusy, err := delayers.NewExponential(func(o *delayers.Options) {
		o.Throttle = throttles
	})
	if err != nil {
		panic(err)
	}
	for _, c := range []struct {
		name string
		err  error
	}{{"TooBusy", tooBusy}, {"ThrottlingException", throttled}, {"connection reset", errors.New("connection reset")}} {
		a, _ := byDefault.BackoffDelay(1, c.err)
		b, _ := withTooBusy.BackoffDelay(1, c.err)
		fmt.Printf("%s: %v by default, %v with TooBusy listed\n", c.name, a, b)
	}
	// Output:
	// TooBusy: 50ms by default, 1s with TooBusy listed
	// ThrottlingException: 1s by default, 1s with TooBusy listed
	// connection reset: 50ms by default, 50ms with TooBusy listed
}
