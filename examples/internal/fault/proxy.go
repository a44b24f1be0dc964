package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Toxic is one toxiproxy toxic, described as toxiproxy's API describes it.
type Toxic struct {
	// Name identifies the toxic within its proxy. Empty means
	// "<Type>_<Stream>", toxiproxy's default.
	Name string `json:"name,omitempty"`
	// Type is a toxiproxy toxic type: "latency", "reset_peer", "timeout",
	// "bandwidth", "slicer", "limit_data", "slow_close".
	Type string `json:"type"`
	// Stream is the direction the toxic acts on: "downstream" (server to
	// client) or "upstream" (client to server). Empty means downstream.
	Stream string `json:"stream,omitempty"`
	// Toxicity is the probability, in (0, 1], that the toxic applies to a
	// connection; each connection draws once, when it opens. Zero means 1.
	Toxicity float32 `json:"toxicity,omitempty"`
	// Attributes are the toxic's own settings, in toxiproxy's units: for a
	// latency, {"latency": 20, "jitter": 10} in milliseconds; for a
	// bandwidth, {"rate": 16} in KB/s.
	Attributes map[string]int64 `json:"attributes,omitempty"`
}

// Proxy is an in-process toxiproxy TCP proxy listening on a loopback port in
// front of one loopback upstream. Safe for concurrent use by multiple
// goroutines.
type Proxy struct {
	proxy *toxiproxy.Proxy
	url   string

	mu     sync.Mutex
	closed bool
}

var names atomic.Int64

// Start starts a proxy on a free loopback port in front of upstream, a
// loopback address given as "host:port" or as an http:// URL. It refuses any
// other upstream: faults are for loopback tests only.
func Start(upstream string) (*Proxy, error) {
	addr := upstream
	if u, err := url.Parse(upstream); err == nil && u.Scheme != "" && u.Host != "" {
		addr = u.Host
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("fault: upstream %q: %w", upstream, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("fault: upstream %q is not a loopback address", upstream)
	}
	// The API server is only the proxies' owner here: it never listens.
	// Its metrics stay off and its logger discards.
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, fmt.Sprintf("fault-%d", names.Add(1)), "127.0.0.1:0", addr)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("fault: start proxy: %w", err)
	}
	return &Proxy{proxy: p, url: "http://" + p.Listen}, nil
}

// URL returns the proxy's base URL, such as "http://127.0.0.1:41234".
func (p *Proxy) URL() string { return p.url }

// Add adds t to the proxy. It applies to the connections opened from then
// on, and to those already open.
func (p *Proxy) Add(t Toxic) error {
	body, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("fault: toxic %q: %w", t.Type, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("fault: proxy closed")
	}
	if _, err := p.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("fault: add toxic %s: %w", body, err)
	}
	return nil
}

// Apply adds every toxic of f.
func (p *Proxy) Apply(f Fault) error {
	for _, t := range f.Toxics {
		if err := p.Add(t); err != nil {
			return fmt.Errorf("fault %s: %w", f.Name, err)
		}
	}
	return nil
}

// Reset removes every toxic; data held by a toxic is passed on.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.proxy.Toxics.ResetToxics(context.Background())
	}
}

// Close removes the toxics, stops accepting connections and closes the open
// ones. Close the clients' idle connections first, so that the proxy's
// per-connection goroutines end on their own. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.proxy.Toxics.ResetToxics(context.Background())
	p.proxy.Stop()
}
