package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jitterretry/jitterretry/delayers"
)

// ThrottleParams are the throttled scenario's parameters. The zero value of
// a field means its default.
type ThrottleParams struct {
	// Capacity is C, the requests per second the server accepts, refilled
	// continuously into its token bucket. Zero means 1000.
	Capacity float64
	// Burst is the server bucket's size, full at t=0. Zero means Capacity/10
	// (a tenth of a second of capacity).
	Burst float64
	// Load is the offered load, in operations per second, as a multiple of
	// Capacity. Zero means 2 (twice what the server accepts).
	Load float64
	// Warmup is how long the load runs before the measurement window opens,
	// so that the window sees the steady state: the backlog of retries
	// built up and the clients' retry buckets as drained as they get. It
	// should be several times the longest chain of backoffs: with 3 attempts
	// and decorrelated jitter from 1 s, 15 s still left its failure rate 1
	// point low at 1.1x load. Zero means 60 s.
	Warmup time.Duration
	// Duration is the measurement window: the operations that start within
	// it are measured. Arrivals continue past it, at the same rate, until
	// every measured operation has finished, so no measured retry lands on a
	// server that has gone idle. Zero means 30 s.
	Duration time.Duration
	// NetMean and NetSD define one message's delay, |Normal(NetMean, NetSD)|.
	// Zero means 10 ms and 2 ms.
	NetMean, NetSD time.Duration
}

// Defaults of ThrottleParams.
const (
	DefaultCapacity = 1000.0
	DefaultLoad     = 2.0
	DefaultDuration = 30 * time.Second
	DefaultWarmup   = 60 * time.Second
)

func (p ThrottleParams) withDefaults() (ThrottleParams, error) {
	if p.Capacity < 0 || p.Burst < 0 || p.Load < 0 || p.Duration < 0 || p.Warmup < 0 || p.NetMean < 0 || p.NetSD < 0 {
		return p, fmt.Errorf("sim: invalid throttle parameters %+v: none may be negative", p)
	}
	if p.Capacity == 0 {
		p.Capacity = DefaultCapacity
	}
	if p.Burst == 0 {
		p.Burst = p.Capacity / 10
	}
	if p.Burst < 1 {
		return p, fmt.Errorf("sim: invalid Burst %v: the server bucket must hold at least one token", p.Burst)
	}
	if p.Load == 0 {
		p.Load = DefaultLoad
	}
	if p.Duration == 0 {
		p.Duration = DefaultDuration
	}
	if p.Warmup == 0 {
		p.Warmup = DefaultWarmup
	}
	if p.NetMean == 0 {
		p.NetMean = DefaultNetMean
	}
	if p.NetSD == 0 {
		p.NetSD = DefaultNetSD
	}
	return p, nil
}

// ThrottleRun is the outcome of one run of the throttled scenario. Every
// count is of the measured operations, those started within the window
// [Warmup, Warmup+Duration).
type ThrottleRun struct {
	// Ops is the number of measured operations.
	Ops int
	// InWindow counts the successes, of any operation, that happened within
	// the window: the goodput is InWindow/Duration.
	InWindow int
	// Succeeded and Failed count operations by their outcome to the caller;
	// QuotaFailed is the part of Failed refused a retry token by the client's
	// retry bucket, MaxAttemptsFailed the part that ran out of attempts.
	Succeeded, Failed, QuotaFailed, MaxAttemptsFailed int
	// Calls is the number of requests the measured operations sent,
	// throttled or not.
	Calls int
	// End is when the last measured operation finished.
	End time.Duration
	// Latencies holds each successful operation's time from start to
	// success, retries and sleeps included.
	Latencies []time.Duration
}

// ThrottleError returns what the simulated server answers when its bucket is
// empty: DynamoDB's ProvisionedThroughputExceededException with HTTP 400,
// wrapped as the SDK's transport wraps a deserialized API error, so the
// SDK's classifiers see a retryable throttle.
func ThrottleError() error {
	resp := &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{}}
	resp.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp.Header.Set("X-Amzn-ErrorType", "ProvisionedThroughputExceededException")
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: resp},
			Err: &smithy.GenericAPIError{
				Code:    "ProvisionedThroughputExceededException",
				Message: "the simulated server's capacity is exhausted",
				Fault:   smithy.FaultClient,
			},
		},
		RequestID: "sim",
	}
}

// throttleRun is the state of one run.
type throttleRun struct {
	p        ThrottleParams
	sched    scheduler
	net      *network
	arrivals *rand.Rand
	throttle error
	tokens   float64
	refilled time.Duration
	out      ThrottleRun
	closes   time.Duration // the end of the window, Warmup+Duration
	pending  int           // measured operations not finished yet
	err      error
}

// admit takes a token from the server's bucket, refilled at Capacity per
// second up to Burst, and reports whether there was one.
func (r *throttleRun) admit(now time.Duration) bool {
	r.tokens = min(r.p.Burst, r.tokens+(now-r.refilled).Seconds()*r.p.Capacity)
	r.refilled = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// inWindow reports whether t is within the measurement window.
func (r *throttleRun) inWindow(t time.Duration) bool { return t >= r.p.Warmup && t < r.closes }

func (r *throttleRun) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// throttleClient issues a Poisson stream of operations through its own
// retryer, as one Lambda instance with its own SDK client would; its
// operations run concurrently and share the retryer.
type throttleClient struct {
	run     *throttleRun
	retryer aws.RetryerV2
	mean    float64 // mean time between its operations, in nanoseconds
}

func (c *throttleClient) handle(now time.Duration, _ int) {
	r := c.run
	if now >= r.closes && r.pending == 0 {
		r.sched.halt()
		return
	}
	op := &operation{client: c, start: now, maxAttempts: c.retryer.MaxAttempts(), releaseRetry: nopRelease}
	if r.inWindow(now) {
		op.measured = true
		r.out.Ops++
		r.pending++
	}
	op.attempt(now)
	r.sched.at(now+time.Duration(r.arrivals.ExpFloat64()*c.mean), c, 0)
}

// Events of one operation.
const (
	opAttempt  = iota // the client starts an attempt
	opAtServer        // the request reaches the server
	opAtClient        // the response reaches the client
)

// operation is one call of the caller's, retried as the SDK's retry
// middleware retries it.
type operation struct {
	client         *throttleClient
	measured       bool // started within the measurement window
	start          time.Duration
	maxAttempts    int // read once per operation, as the middleware does
	n              int // the attempt in flight, 1-based
	ctxs           []context.Context
	releaseAttempt func(error) error
	releaseRetry   func(error) error
	err            error // the response of the attempt in flight
}

func (op *operation) handle(now time.Duration, kind int) {
	r := op.client.run
	switch kind {
	case opAttempt:
		op.attempt(now)
	case opAtServer:
		if op.measured {
			r.out.Calls++
		}
		op.err = nil
		if !r.admit(now) {
			op.err = r.throttle
		}
		r.sched.at(now+r.net.delay(), op, opAtClient)
	case opAtClient:
		op.respond(now)
	}
}

// ctx returns the context the SDK's middleware gives attempt op.n.
func (op *operation) ctx() context.Context {
	if op.n > len(op.ctxs) {
		ctxs, err := attemptContexts(op.n)
		if err != nil {
			op.client.run.fail(err)
			return context.Background()
		}
		op.ctxs = ctxs
	}
	return op.ctxs[op.n-1]
}

// attempt starts the next attempt: take the attempt token, send.
func (op *operation) attempt(now time.Duration) {
	r := op.client.run
	op.n++
	release, err := op.client.retryer.GetAttemptToken(op.ctx())
	if err != nil {
		op.finish(now, err)
		return
	}
	op.releaseAttempt = release
	r.sched.at(now+r.net.delay(), op, opAtServer)
}

// respond handles the response of the attempt in flight in the middleware's
// order: release the previous retry token and this attempt's token with its
// error; then on failure classify, check attempts, take a retry token, ask
// for the delay and sleep (in virtual time).
func (op *operation) respond(now time.Duration) {
	r, rt := op.client.run, op.client.retryer
	err := op.err
	if releaseErr := op.releaseRetry(err); releaseErr != nil && err != nil {
		op.finish(now, fmt.Errorf("failed to release retry token after request error, %w", err))
		return
	}
	if releaseErr := op.releaseAttempt(err); releaseErr != nil && err != nil {
		op.finish(now, fmt.Errorf("failed to release initial token after request error, %w", err))
		return
	}
	op.releaseRetry = nopRelease
	if err == nil {
		op.finish(now, nil)
		return
	}
	if !rt.IsErrorRetryable(err) {
		op.finish(now, err)
		return
	}
	if op.maxAttempts > 0 && op.n >= op.maxAttempts {
		if op.measured {
			r.out.MaxAttemptsFailed++
		}
		op.finish(now, err)
		return
	}
	release, tokenErr := rt.GetRetryToken(op.ctx(), err)
	if tokenErr != nil {
		if op.measured {
			r.out.QuotaFailed++
		}
		op.finish(now, tokenErr)
		return
	}
	delay, delayErr := rt.RetryDelay(op.n, err)
	if delayErr != nil {
		op.finish(now, delayErr)
		return
	}
	op.releaseRetry = release
	r.sched.at(now+delay, op, opAttempt)
}

// finish ends the operation with err, nil for success.
func (op *operation) finish(now time.Duration, err error) {
	r := op.client.run
	if err == nil && r.inWindow(now) {
		r.out.InWindow++
	}
	if !op.measured {
		return
	}
	r.pending--
	r.out.End = max(r.out.End, now)
	if err != nil {
		r.out.Failed++
	} else {
		r.out.Succeeded++
		r.out.Latencies = append(r.out.Latencies, now-op.start)

	}
	if r.pending == 0 && now >= r.closes {
		r.sched.halt()
	}
}

// RunThrottled runs the throttled scenario once with k clients, each with
// its own retryer from rt. Run index run selects the run's random streams,
// derived from seed.
func RunThrottled(p ThrottleParams, rt Retryer, k int, seed uint64, run int) (ThrottleRun, error) {
	p, err := p.withDefaults()
	if err != nil {
		return ThrottleRun{}, err
	}
	if k < 1 {
		return ThrottleRun{}, fmt.Errorf("sim: invalid number of clients %d: must be at least 1", k)
	}
	r := &throttleRun{
		p:        p,
		net:      newNetwork(p.NetMean, p.NetSD, runRand(seed, k, run, streamNetwork)),
		arrivals: runRand(seed, k, run, streamArrivals),
		throttle: ThrottleError(),
		tokens:   p.Burst,
		closes:   p.Warmup + p.Duration,
	}
	strategySeed := runSeed(seed, k, run, streamStrategy)
	mean := float64(time.Second) * float64(k) / (p.Load * p.Capacity)
	clients := make([]throttleClient, k)
	for i := range clients {
		retryer, err := rt.New(delayers.NewSource(mix(strategySeed + uint64(i))))
		if err != nil {
			return ThrottleRun{}, fmt.Errorf("sim: retryer %s: %w", rt.Name, err)
		}
		clients[i] = throttleClient{run: r, retryer: retryer, mean: mean}
		r.sched.at(time.Duration(r.arrivals.ExpFloat64()*mean), &clients[i], 0)
	}
	r.sched.run()
	if r.err != nil {
		return ThrottleRun{}, r.err
	}
	return r.out, nil
}
