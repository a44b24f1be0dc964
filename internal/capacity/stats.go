package capacity

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what a Proxy did. Every request received is counted once in
// Requests and once in exactly one of Forwarded, Throttled, InjectedErrors or
// Rejected (lost responses count as Forwarded, since the server saw them).
type Stats struct {
	// Requests is every request received.
	Requests int64
	// Forwarded is every request sent to the upstream server, metered or not,
	// including those whose response was then replaced (LostResponses) and
	// those the upstream failed to answer (UpstreamErrors).
	Forwarded int64
	// Throttled is every request answered with
	// ProvisionedThroughputExceededException.
	Throttled int64
	// InjectedErrors is every request answered with HTTP 500 without being
	// forwarded.
	InjectedErrors int64
	// LostResponses is every request forwarded whose response was replaced
	// with HTTP 500.
	LostResponses int64
	// UpstreamErrors is every forwarded request the upstream did not answer
	// (connection refused or reset); the client got HTTP 502.
	UpstreamErrors int64
	// Rejected is every request whose body could not be read.
	Rejected int64
	// PerSecond holds per-second counts; entry i covers [i s, i+1 s) after
	// the proxy was created.
	PerSecond []Second
}

// Second is the counts of one second of a Proxy's life.
type Second struct {
	// Requests is every request received in that second.
	Requests int64
	// Throttled is every request throttled in that second.
	Throttled int64
}

// maxSeconds bounds the per-second history; later requests count in the
// last entry.
const maxSeconds = 24 * 3600

type counters struct {
	requests, forwarded, throttled, injected, lost, upstream, rejected atomic.Int64

	mu        sync.Mutex
	start     time.Time
	perSecond []Second
}

// tick records a request received at now, throttled or not.
func (c *counters) tick(now time.Time, throttled bool) {
	c.requests.Add(1)
	i := int(now.Sub(c.start) / time.Second)
	i = min(max(i, 0), maxSeconds-1)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.perSecond) <= i {
		c.perSecond = append(c.perSecond, Second{})
	}
	c.perSecond[i].Requests++
	if throttled {
		c.perSecond[i].Throttled++
	}
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	perSecond := append([]Second(nil), c.perSecond...)
	c.mu.Unlock()
	return Stats{
		Requests:       c.requests.Load(),
		Forwarded:      c.forwarded.Load(),
		Throttled:      c.throttled.Load(),
		InjectedErrors: c.injected.Load(),
		LostResponses:  c.lost.Load(),
		UpstreamErrors: c.upstream.Load(),
		Rejected:       c.rejected.Load(),
		PerSecond:      perSecond,
	}
}
