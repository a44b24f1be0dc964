package main

import (
	"context"
	"fmt"
	"io"
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
	capacity     float64       // nominal capacity C, requests per second
	burstSeconds float64       // the table's bucket holds this many seconds of capacity
	service      time.Duration // the upstream's time to answer an admitted request
	drain        time.Duration // how long to wait for operations to stop after the end
	trace        io.Writer     // when not nil, receives the send rate of ours each second
}

// clientTransport returns the HTTP transport of one run's client: enough idle
// connections for every goroutine to keep its own, so that no run measures
// connection churn.
func clientTransport(k int) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0, // no limit but the per-host one
		MaxIdleConnsPerHost:   max(k, 2),
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
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
	successes int64
	failed    failures
	cutOff    int64
	latencies []time.Duration
}

// runOne runs k goroutines sharing one DynamoDB client of mode m, each
// calling PutItem in a closed loop, through a fresh capacity proxy that
// follows scen, and returns what the callers and the server saw.
func runOne(cfg loadConfig, up *upstream, m mode, k int, scen scenario) (result, error) {
	pt := proxyTransport()
	defer pt.CloseIdleConnections()
	first := scen.phases[0]
	start := time.Now()
	proxy, err := capacity.New(up.url, func(o *capacity.Options) {
		c := cfg.capacity * first.frac
		o.Default = capacity.Capacity{Read: c, Write: c}
		o.BurstSeconds = cfg.burstSeconds
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

	ct := clientTransport(k)
	defer ct.CloseIdleConnections()
	var retryer aws.Retryer
	if m.retryer != nil {
		retryer = m.retryer()
	}
	// The retryer no longer exposes its limiter's rate, so -trace counts
	// the requests the client sends, which the limiter paces.
	var transport http.RoundTripper = ct
	ours, traced := retryer.(*jitterretry.Retryer)
	traced = traced && m.rate && cfg.trace != nil
	var sent atomic.Int64
	if traced {
		transport = countingTransport{next: ct, sent: &sent}
	}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "throttlebench", SecretAccessKey: "throttlebench", Source: "throttlebench"}, nil
		}),
		HTTPClient: &http.Client{Transport: transport},
		Retryer:    retryer, // nil: the client's own default
	})

	dur := scen.duration()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var phasesDone sync.WaitGroup
	phasesDone.Add(1)
	var phaseErr error
	go func() {
		defer phasesDone.Done()
		defer cancel()
		offset := time.Duration(0)
		for i, p := range scen.phases {
			if i > 0 {
				c := cfg.capacity * p.frac
				if err := proxy.SetDefaultCapacity(capacity.Capacity{Read: c, Write: c}); err != nil {
					phaseErr = err
					return
				}
			}
			offset += p.dur
			sleepUntil(ctx, start.Add(offset))
		}
	}()
	if traced {
		phasesDone.Add(1)
		go func() {
			defer phasesDone.Done()
			traceRate(ctx, cfg.trace, m.name, ours, &sent, start)
		}()
	}

	end := start.Add(dur)
	bins := make([]atomic.Int64, int((dur+binWidth-1)/binWidth))
	workers := make([]worker, k)
	var firstErr [3]atomic.Bool
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func(w *worker, id string) {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				in := &dynamodb.PutItemInput{
					TableName: aws.String(tableName),
					Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id + "-" + strconv.Itoa(n)}},
				}
				t0 := time.Now()
				_, err := client.PutItem(ctx, in)
				done := time.Now()
				if ctx.Err() != nil || done.After(end) {
					// Ended by the end of the run, whatever its outcome. The
					// planned end, not the cancellation, bounds the window: on
					// a saturated machine the timer that cancels can fire late.
					w.cutOff++
					return
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
				if b := int(done.Sub(start) / binWidth); b >= 0 && b < len(bins) {
					bins[b].Add(1)
				}
			}
		}(&workers[i], "w"+strconv.Itoa(i))
	}
	phasesDone.Wait()
	if !waitTimeout(&wg, cfg.drain) {
		return result{}, fmt.Errorf("%s: goroutines still running %v after the end", m.name, cfg.drain)
	}
	if phaseErr != nil {
		return result{}, phaseErr
	}

	// What the server saw in the scenario's seconds: requests sent after
	// the planned end, before the cancellation reached every goroutine, are
	// left out, as their operations are.
	st := proxy.Stats()
	r := result{mode: m.name, k: k, scen: scen, capacity: cfg.capacity}
	n := int((dur + time.Second - 1) / time.Second)
	for _, s := range st.PerSecond[:min(n, len(st.PerSecond))] {
		r.seconds = append(r.seconds, second{requests: s.Requests, throttled: s.Throttled})
		r.requests += s.Requests
		r.throttled += s.Throttled
	}
	for _, w := range workers {
		r.successes += w.successes
		r.failed.add(w.failed)
		r.cutOff += w.cutOff
		r.latencies = append(r.latencies, w.latencies...)
	}
	r.okBins = make([]int64, len(bins))
	for i := range bins {
		r.okBins[i] = bins[i].Load()
	}
	return r, nil
}

// kindIndex numbers the failure kind f, which counts one failure.
func kindIndex(f failures) int {
	switch {
	case f.budget > 0:
		return 0
	case f.maxAttempts > 0:
		return 1
	}
	return 2
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

// countingTransport counts the requests it sends.
type countingTransport struct {
	next http.RoundTripper
	sent *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.sent.Add(1)
	return t.next.RoundTrip(req)
}
