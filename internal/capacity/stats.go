package capacity

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what a Proxy did since it was created or since its last
// ResetStats. Every request received is counted once in Requests and once
// in exactly one of Forwarded, Throttled, InjectedErrors or Rejected (lost
// responses count as Forwarded, since the server saw them).
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
	// RandomThrottled is the part of Throttled due to ThrottleRate rather
	// than to the capacity.
	RandomThrottled int64
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
	requests, forwarded, throttled, random, injected, lost, upstream, rejected atomic.Int64

	mu        sync.Mutex
	start     time.Time
	perSecond []Second
}

// count records a request received at now and what the proxy did with it,
// all at once, unless it was received before the counts started: a request
// whose admission raced a ResetStats is then left out whole, so that the
// counts after the reset hold only requests that met the settings made
// before it.
func (c *counters) count(now time.Time, v verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Before(c.start) {
		return
	}
	c.requests.Add(1)
	throttled := v == throttle || v == randomThrottle
	switch {
	case throttled:
		c.throttled.Add(1)
		if v == randomThrottle {
			c.random.Add(1)
		}
	case v == injectError:
		c.injected.Add(1)
	case v == reject:
		c.rejected.Add(1)
	default: // forwarded, lost responses included
		c.forwarded.Add(1)
	}
	i := min(int(now.Sub(c.start)/time.Second), maxSeconds-1)
	for len(c.perSecond) <= i {
		c.perSecond = append(c.perSecond, Second{})
	}
	c.perSecond[i].Requests++
	if throttled {
		c.perSecond[i].Throttled++
	}
}

// reset zeroes every count and starts the per-second counts at now.
func (c *counters) reset(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range []*atomic.Int64{&c.requests, &c.forwarded, &c.throttled, &c.random, &c.injected, &c.lost, &c.upstream, &c.rejected} {
		n.Store(0)
	}
	c.start = now
	c.perSecond = nil
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	perSecond := append([]Second(nil), c.perSecond...)
	c.mu.Unlock()
	return Stats{
		Requests:        c.requests.Load(),
		Forwarded:       c.forwarded.Load(),
		Throttled:       c.throttled.Load(),
		RandomThrottled: c.random.Load(),
		InjectedErrors:  c.injected.Load(),
		LostResponses:   c.lost.Load(),
		UpstreamErrors:  c.upstream.Load(),
		Rejected:        c.rejected.Load(),
		PerSecond:       perSecond,
	}
}
