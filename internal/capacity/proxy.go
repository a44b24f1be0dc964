package capacity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// maxBody is the largest request body the proxy reads; DynamoDB's own limit
// is 16 MB.
const maxBody = 16 << 20

// maxIdleUpstream is how many idle connections to the upstream the default
// transport keeps.
const maxIdleUpstream = 64

// Proxy is a reverse proxy that meters each table's capacity and injects
// errors before a DynamoDB-compatible server. It is an http.Handler; Start
// serves it on a loopback port. Safe for concurrent use by multiple
// goroutines.
type Proxy struct {
	rp    *httputil.ReverseProxy
	now   func() time.Time
	burst float64
	errP  float64
	lostP float64

	transport http.RoundTripper

	mu        sync.Mutex // guards everything below, and makes admission atomic
	def       Capacity
	tables    map[string]*tableBuckets
	overrides map[string]Capacity
	rng       *rand.Rand
	throttleP float64    // ThrottleRate
	throttles *rand.Rand // draws the random throttles, apart from rng so that they leave error injection's draws alone
	srv       *http.Server

	stats counters
}

// New returns a Proxy in front of the DynamoDB-compatible server at upstream
// (an http:// URL), configured by optFns. Invalid options are an error.
func New(upstream string, optFns ...func(*Options)) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("capacity: invalid upstream URL %q", upstream)
	}
	o := defaultOptions()
	for _, fn := range optFns {
		if fn != nil {
			fn(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	o.copyMaps()
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a connection per concurrent client request instead of the
		// default 2, so a busy proxy does not churn loopback ports.
		t.MaxIdleConnsPerHost = maxIdleUpstream
		o.Transport = t
	}
	p := &Proxy{
		now:       o.Now,
		transport: o.Transport,
		burst:     o.BurstSeconds,
		errP:      o.ErrorRate,
		lostP:     o.LostResponseRate,
		def:       o.Default,
		tables:    map[string]*tableBuckets{},
		overrides: o.Tables,
		rng:       rand.New(rand.NewPCG(o.Seed, 0x6a09e667f3bcc909)),
		throttleP: o.ThrottleRate,
		throttles: rand.New(rand.NewPCG(o.Seed, 0xbb67ae8584caa73b)),
	}
	if p.overrides == nil {
		p.overrides = map[string]Capacity{}
	}
	p.stats.start = o.Now()
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// Keep the Host the client signed with SigV4.
			r.Out.Host = r.In.Host
		},
		Transport:      o.Transport,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
	}
	return p, nil
}

type lostKey struct{}

var errLostResponse = errors.New("capacity: response replaced by an injected error")

// ServeHTTP meters, injects and forwards one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	_ = r.Body.Close()
	now := p.now()
	if err != nil || len(body) > maxBody {
		p.stats.count(now, reject)
		ddbwire.WriteError(w, http.StatusRequestEntityTooLarge, "SerializationException", "capacity proxy: cannot read the request body")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))

	// A metered request whose body names no table is forwarded unmetered:
	// the server answers it with its own validation error.
	req, _ := ParseRequest(r.Header.Get("X-Amz-Target"), body)
	verdict := p.admit(now, req)
	p.stats.count(now, verdict)
	switch verdict {
	case throttle, randomThrottle:
		ddbwire.WriteError(w, ddbwire.StatusFor(ddbwire.ProvisionedThroughputExceeded), ddbwire.ProvisionedThroughputExceeded,
			"The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.")
		return
	case injectError:
		ddbwire.WriteError(w, ddbwire.StatusFor(ddbwire.InternalServerError), ddbwire.InternalServerError,
			"Internal server error (injected by the capacity proxy before forwarding)")
		return
	case loseResponse:
		r = r.WithContext(context.WithValue(r.Context(), lostKey{}, true))
	}
	p.rp.ServeHTTP(w, r)
}

type verdict int

const (
	forward verdict = iota
	throttle
	randomThrottle // a throttle of ThrottleRate, whatever the capacity
	injectError
	loseResponse
	reject // the body could not be read
)

// admit first throttles a metered request at random with probability
// ThrottleRate, then takes the request's units from every table it touches,
// all or none, then decides error injection with one random draw per
// admitted metered request.
func (p *Proxy) admit(now time.Time, req Request) verdict {
	if req.Kind == Unmetered || len(req.Costs) == 0 {
		return forward
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// No draw at 0, so that a proxy without random throttles behaves
	// exactly as before they existed.
	if p.throttleP > 0 && p.throttles.Float64() < p.throttleP {
		return randomThrottle
	}
	for _, c := range req.Costs {
		if p.bucketsLocked(c.Table).bucket(req.Kind).TokensAt(now) < float64(c.Units) {
			return throttle
		}
	}
	for _, c := range req.Costs {
		// Cannot fail: the tokens were just checked under p.mu.
		p.tables[c.Table].bucket(req.Kind).AllowN(now, c.Units)
	}
	if p.errP == 0 && p.lostP == 0 {
		return forward
	}
	switch x := p.rng.Float64(); {
	case x < p.errP:
		return injectError
	case x < p.errP+p.lostP:
		return loseResponse
	}
	return forward
}

func (p *Proxy) bucketsLocked(table string) *tableBuckets {
	b, ok := p.tables[table]
	if !ok {
		c, own := p.overrides[table]
		if !own {
			c = p.def
		}
		b = newTableBuckets(c, p.burst, own)
		p.tables[table] = b
	}
	return b
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	if lost, _ := resp.Request.Context().Value(lostKey{}).(bool); lost {
		return errLostResponse
	}
	return nil
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errLostResponse) {
		p.stats.lost.Add(1)
		ddbwire.WriteError(w, ddbwire.StatusFor(ddbwire.InternalServerError), ddbwire.InternalServerError,
			"Internal server error (injected by the capacity proxy after forwarding: the request reached the server)")
		return
	}
	p.stats.upstream.Add(1)
	http.Error(w, "capacity proxy: upstream failed: "+err.Error(), http.StatusBadGateway)
}

// SetCapacity gives table its own capacity from now on, keeping the tokens it
// has saved (clamped to the new bucket size). Invalid values are an error.
func (p *Proxy) SetCapacity(table string, c Capacity) error {
	if err := c.validate(fmt.Sprintf("table %q", table)); err != nil {
		return err
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.overrides[table] = c
	if b, ok := p.tables[table]; ok {
		b.set(now, c, p.burst)
		b.own = true
	}
	return nil
}

// SetDefaultCapacity changes, from now on, the capacity of every table that
// has no capacity of its own. Invalid values are an error.
func (p *Proxy) SetDefaultCapacity(c Capacity) error {
	if err := c.validate("default"); err != nil {
		return err
	}
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.def = c
	for _, b := range p.tables {
		if !b.own {
			b.set(now, c, p.burst)
		}
	}
	return nil
}

// SetThrottleRate changes, from now on, the probability that a metered
// request is throttled whatever the capacity (see Options.ThrottleRate).
// A value outside [0, 1] is an error.
func (p *Proxy) SetThrottleRate(rate float64) error {
	if !validRate(rate) {
		return fmt.Errorf("capacity: invalid ThrottleRate %v: must be within [0, 1]", rate)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttleP = rate
	return nil
}

// Capacity returns the capacity table has now.
func (p *Proxy) Capacity(table string) Capacity {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.overrides[table]; ok {
		return c
	}
	return p.def
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats { return p.stats.snapshot() }

// ResetStats zeroes the counters and starts the per-second counts again at
// now, so that a report can leave out a warm-up. A request received before
// is not counted, even when the proxy answers it after; its lost response
// or upstream error, which come later, may be.
func (p *Proxy) ResetStats() { p.stats.reset(p.now()) }

// Start serves the proxy on a free loopback port and returns its base URL,
// such as "http://127.0.0.1:41234". Call Close to stop it.
func (p *Proxy) Start() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("capacity: cannot listen on loopback: %w", err)
	}
	p.mu.Lock()
	if p.srv != nil {
		p.mu.Unlock()
		_ = ln.Close()
		return "", errors.New("capacity: proxy already started")
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	srv := p.srv
	p.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Close stops a proxy started with Start, closing its connections. It is a
// no-op for a proxy that was not started.
func (p *Proxy) Close() error {
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	if t, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return err
}
