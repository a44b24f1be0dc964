package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/jitterretry/jitterretry"
	"github.com/jitterretry/jitterretry/internal/capacity"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// tableName is the one table every run writes to.
const tableName = "throttlebench"

// upstream is a loopback server in DynamoDB's wire format that answers every
// PutItem with "{}" after a fixed service time: the capacity proxy in front of
// it does the throttling, so no database is needed.
type upstream struct {
	url string
	srv *http.Server
}

func startUpstream(service time.Duration) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream: cannot listen on loopback: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") {
			ddbwire.WriteError(w, http.StatusBadRequest, "UnknownOperationException", "throttlebench: only PutItem is served")
			return
		}
		time.Sleep(service)
		ddbwire.WriteJSON(w, http.StatusOK, []byte("{}"))
	})}
	go func() { _ = srv.Serve(ln) }()
	return &upstream{url: "http://" + ln.Addr().String(), srv: srv}, nil
}

func (u *upstream) Close() error { return u.srv.Close() }

// loadConfig is what every run of a benchmark shares.
type loadConfig struct {
	capacity     float64       // nominal capacity C, requests per second; +Inf is unlimited
	burstSeconds float64       // the table's bucket holds this many seconds of capacity
	service      time.Duration // the upstream's time to answer an admitted request
	fleet        int           // clients per run, each with its own retryer and dynamodb.Client
	throttleProb float64       // the probability that the proxy throttles a request whatever the load
	seed         uint64        // seeds the proxy's random throttles
	warmup       time.Duration // how long the clients run at unlimited capacity before the scenario
	late         time.Duration // with a fleet, when the last client starts, from the scenario's start; 0: with the others
	deadline     deadlineRange // every operation's deadline; the zero value sets none
	drain        time.Duration // how long to wait for operations to stop after the end
	trace        io.Writer     // when not nil, receives the send rate of ours each second
	gauges       bool          // give ours' retryers meter providers and sample their gauges (-plot-metrics)
}

// proxyTransport is the capacity proxy's transport to the upstream: the
// admitted requests are at most the capacity times the service time in
// flight, plus the burst.
func proxyTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// worker is one goroutine's tally, merged after the run.
type worker struct {
	client    int // the index of the worker's client in the fleet
	successes int64
	failed    failures
	cutOff    int64
	warmupOK  int64 // successes of the warm-up, not counted
	carried   int64 // operations started in the warm-up whose last attempt was sent in the scenario, counted
	sinceJoin int64 // successes completed once the fleet's last client had joined
	latencies []time.Duration
}

// runOne runs a fleet of cfg.fleet clients of mode m, each with its own
// retryer and dynamodb.Client and k goroutines calling PutItem in a closed
// loop, through a fresh capacity proxy that follows scen after the warm-up,
// and returns what the callers and the server saw in the scenario.
func runOne(cfg loadConfig, up *upstream, m mode, k int, scen scenario) (result, error) {
	pt := proxyTransport()
	defer pt.CloseIdleConnections()
	// The scenario starts after the warm-up, until which the proxy neither
	// limits nor throttles.
	start := time.Now().Add(cfg.warmup)
	proxy, err := capacity.New(up.url, func(o *capacity.Options) {
		o.Default = tableCapacity(cfg.capacity * scen.phases[0].frac)
		o.ThrottleRate = cfg.throttleProb
		if cfg.warmup > 0 {
			o.Default = tableCapacity(capacity.Unlimited)
			o.ThrottleRate = 0
		}
		o.BurstSeconds = cfg.burstSeconds
		o.Seed = cfg.seed
		o.Transport = pt
	})
	if err != nil {
		return result{}, err
	}
	endpoint, err := proxy.Start()
	if err != nil {
		return result{}, err
	}
	defer func() { _ = proxy.Close() }()

	// The retryer no longer exposes its limiter's rate, so -trace counts
	// the requests the clients send, which the limiters pace.
	var sent *atomic.Int64
	if m.rate && cfg.trace != nil {
		sent = new(atomic.Int64)
	}
	clients := make([]client, max(cfg.fleet, 1))
	var gauges *gaugeReaders // nil: no provider, no sampling
	if cfg.gauges && m.metered != nil {
		gauges = newGaugeReaders(len(clients))
		defer gauges.shutdown()
	}
	for i := range clients {
		clients[i] = newClient(endpoint, m, k, sent, cfg.warmup > 0, gauges.provider(i))
		defer clients[i].transport.CloseIdleConnections()
	}

	dur := scen.duration()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// begun is set, at begunAt, once the proxy follows
	// the scenario: an operation counts if it starts after that, or, when
	// it started in the warm-up, if its last attempt was sent after that
	// (a limiter's queue carries operations over), so that no operation
	// whose answer came from the warm-up's unlimited table counts, even
	// when the switch comes late on a busy machine.
	var begun atomic.Bool
	var begunAt atomic.Pointer[time.Time]
	begun.Store(cfg.warmup == 0)
	var phasesDone sync.WaitGroup
	phasesDone.Add(1)
	var phaseErr error
	go func() {
		defer phasesDone.Done()
		defer cancel()
		phaseErr = followPhases(ctx, proxy, cfg, scen, start, func() {
			now := time.Now()
			begunAt.Store(&now)
			begun.Store(true)
		})
	}()
	if ours, ok := clients[0].retryer.(*jitterretry.Retryer); ok && sent != nil {
		phasesDone.Add(1)
		go func() {
			defer phasesDone.Done()
			traceRate(ctx, cfg.trace, m.name, ours, sent, start)
		}()
	}

	end := start.Add(dur)
	var samples []gaugeSample
	var sampleErr error
	if gauges != nil {
		phasesDone.Add(1)
		go func() {
			defer phasesDone.Done()
			samples, sampleErr = gauges.record(ctx, start, end)
		}()
	}
	bins := make([]atomic.Int64, int((dur+binWidth-1)/binWidth))
	workers := make([]worker, len(clients)*k)
	var firstErr [4]atomic.Bool
	joined := start.Add(cfg.late)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i].client = i / k
		wg.Add(1)
		go func(w *worker, ddb *dynamodb.Client, id string) {
			defer wg.Done()
			var lastSend atomic.Pointer[time.Time]
			opCtx := ctx
			if cfg.warmup > 0 {
				opCtx = withSendStamp(ctx, &lastSend)
			}
			// Each goroutine draws its deadlines from its own source,
			// seeded from -seed and its index, so that runs repeat.
			rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
			if cfg.late > 0 && w.client == len(clients)-1 {
				// The late client misses the warm-up too: it arrives
				// fresh, as a new host or Lambda instance does.
				sleepUntil(ctx, joined)
			}
			for n := 0; ctx.Err() == nil; n++ {
				in := &dynamodb.PutItemInput{
					TableName: aws.String(tableName),
					Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id + "-" + strconv.Itoa(n)}},
				}
				counted := begun.Load()
				lastSend.Store(nil)
				callCtx, cancelCall := opCtx, context.CancelFunc(func() {})
				if cfg.deadline.set() {
					callCtx, cancelCall = context.WithTimeout(opCtx, cfg.deadline.pick(rng))
				}
				t0 := time.Now()
				_, err := ddb.PutItem(callCtx, in)
				done := time.Now()
				cancelCall()
				if ctx.Err() != nil || done.After(end) {
					// Ended by the end of the run, whatever its outcome. The
					// planned end, not the cancellation, bounds the window: on
					// a saturated machine the timer that cancels can fire late.
					w.cutOff++
					return
				}
				if sent, at := lastSend.Load(), begunAt.Load(); !counted && sent != nil && at != nil && sent.After(*at) {
					counted = true
					w.carried++
				}
				if !counted {
					if err == nil {
						w.warmupOK++
					}
					continue
				}
				w.latencies = append(w.latencies, done.Sub(t0))
				if err != nil {
					kind := failureKind(err)
					w.failed.add(kind)
					if cfg.trace != nil && firstErr[kindIndex(kind)].CompareAndSwap(false, true) {
						fmt.Fprintf(cfg.trace, "trace %s: first failure of its kind: %v\n", m.name, err)
					}
					continue
				}
				w.successes++
				if !done.Before(joined) {
					w.sinceJoin++
				}
				if b := int(done.Sub(start) / binWidth); b >= 0 && b < len(bins) {
					bins[b].Add(1)
				}
			}
		}(&workers[i], clients[i/k].ddb, "w"+strconv.Itoa(i))
	}
	phasesDone.Wait()
	if !waitTimeout(&wg, cfg.drain) {
		return result{}, fmt.Errorf("%s: goroutines still running %v after the end", m.name, cfg.drain)
	}
	if phaseErr != nil {
		return result{}, phaseErr
	}
	if sampleErr != nil {
		return result{}, fmt.Errorf("%s: sampling the retryers' gauges: %w", m.name, sampleErr)
	}

	// What the server saw in the scenario's seconds: requests sent after
	// the planned end, before the cancellation reached every goroutine, are
	// left out, as their operations are.
	st := proxy.Stats()
	r := result{mode: m.name, k: k, scen: scen, capacity: cfg.capacity, clientOK: make([]int64, len(clients)), gauges: samples}
	if cfg.late > 0 {
		r.joined, r.clientSinceJoin = cfg.late, make([]int64, len(clients))
	}
	n := int((dur + time.Second - 1) / time.Second)
	for _, s := range st.PerSecond[:min(n, len(st.PerSecond))] {
		r.seconds = append(r.seconds, second{requests: s.Requests, throttled: s.Throttled})
		r.requests += s.Requests
		r.throttled += s.Throttled
	}
	for _, w := range workers {
		r.successes += w.successes
		r.clientOK[w.client] += w.successes
		if r.clientSinceJoin != nil {
			r.clientSinceJoin[w.client] += w.sinceJoin
		}
		r.failed.add(w.failed)
		r.cutOff += w.cutOff
		r.warmupOK += w.warmupOK
		r.carried += w.carried
		r.latencies = append(r.latencies, w.latencies...)
	}
	r.okBins = make([]int64, len(bins))
	for i := range bins {
		r.okBins[i] = bins[i].Load()
	}
	return r, nil
}

// followPhases gives the proxy the capacity of each phase of scen when its
// time comes, counting from start, the scenario's start. After a warm-up it
// first, at start, turns on the first phase's capacity and the random
// throttles, starts the proxy's counts again so that they leave the warm-up
// out, and calls begin.
func followPhases(ctx context.Context, proxy *capacity.Proxy, cfg loadConfig, scen scenario, start time.Time, begin func()) error {
	if cfg.warmup > 0 {
		sleepUntil(ctx, start)
		if err := proxy.SetDefaultCapacity(tableCapacity(cfg.capacity * scen.phases[0].frac)); err != nil {
			return err
		}
		if err := proxy.SetThrottleRate(cfg.throttleProb); err != nil {
			return err
		}
		proxy.ResetStats()
		begin()
	}
	var offset time.Duration
	for i, p := range scen.phases {
		if i > 0 {
			if err := proxy.SetDefaultCapacity(tableCapacity(cfg.capacity * p.frac)); err != nil {
				return err
			}
		}
		offset += p.dur
		sleepUntil(ctx, start.Add(offset))
	}
	return nil
}

// tableCapacity is a capacity of c units a second for reads and writes.
func tableCapacity(c float64) capacity.Capacity { return capacity.Capacity{Read: c, Write: c} }

// kindIndex numbers the failure kind f, which counts one failure.
func kindIndex(f failures) int {
	switch {
	case f.budget > 0:
		return 0
	case f.maxAttempts > 0:
		return 1
	case f.deadline > 0:
		return 2
	}
	return 3
}

// sleepUntil sleeps until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// waitTimeout waits for wg for at most d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// traceRate prints, every second until ctx ends, the requests the client
// of r sent in that second (sent counts them) and r's retry budget.
func traceRate(ctx context.Context, w io.Writer, name string, r *jitterretry.Retryer, sent *atomic.Int64, start time.Time) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n := sent.Load()
			fmt.Fprintf(w, "trace %s t=%.0fs sent %d/s, budget %d\n", name, now.Sub(start).Seconds(), n-last, r.Remaining())
			last = n
		}
	}
}
