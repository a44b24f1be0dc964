package sim

import (
	"fmt"
	"time"
)

// OCCRun is the outcome of one run of the OCC experiment.
type OCCRun struct {
	// Calls is the number of writes the server received; reads are free.
	Calls int
	// Time is when the last client received its success.
	Time time.Duration
	// Done holds each client's completion time: when it received its
	// success, measured from the common start at t=0.
	Done []time.Duration
}

// Message kinds of one client's attempt, in the order they happen.
const (
	occReadAtServer  = iota // the read reaches the server
	occReadAtClient         // the version reaches the client
	occWriteAtServer        // the write, with that version, reaches the server
	occWriteAtClient        // the write's outcome reaches the client
)

// occRun is the state of one run: one row with one version, and its clients.
type occRun struct {
	sched   scheduler
	net     *network
	version int
	calls   int
	allOld  bool // Params.AllOld: retries write with the version a failed write returned
	err     error
}

// occClient writes the row once: read, then write with the version read.
// After a failed write it sleeps its backoff's sleep, then re-reads (the
// blog's loop) or, with Params.AllOld, writes again at once with the version
// the failed write returned.
type occClient struct {
	run     *occRun
	backoff Backoff
	retries int // the blog's n: failed writes so far
	read    int // the version its next write expects: its last read's, or with AllOld its last failed write's
	current int // the row's version when its last write failed (ALL_OLD)
	start   time.Duration
	ok      bool
	done    time.Duration
}

func (c *occClient) handle(now time.Duration, kind int) {
	r := c.run
	switch kind {
	case occReadAtServer:
		c.read = r.version
		r.sched.at(now+r.net.delay(), c, occReadAtClient)
	case occReadAtClient:
		r.sched.at(now+r.net.delay(), c, occWriteAtServer)
	case occWriteAtServer:
		r.calls++
		c.ok = c.read == r.version
		c.current = r.version
		if c.ok {
			r.version++
		}
		r.sched.at(now+r.net.delay(), c, occWriteAtClient)
	case occWriteAtClient:
		if c.ok {
			c.done = now
			return
		}
		c.retries++
		var sleep time.Duration
		var err error
		if cb, ok := c.backoff.(ConflictBackoff); ok {
			// What a real client sees: when the conflict came back, how
			// long its read-and-write took, the version it read and the
			// one the failed write found.
			sleep = cb.Conflict(now, now-c.start, c.read, c.current)
		} else {
			sleep, err = c.backoff.Delay(c.retries)
		}
		if err != nil {
			if r.err == nil {
				r.err = fmt.Errorf("sim: backoff of retry %d: %w", c.retries, err)
			}
			return
		}
		c.start = now + sleep // the attempt starts after its sleep
		if r.allOld {
			// No read: the failed write returned the row (ALL_OLD), so
			// the client writes again with the version it found.
			c.read = c.current
			r.sched.at(now+sleep+r.net.delay(), c, occWriteAtServer)
			return
		}
		r.sched.at(now+r.net.delay()+sleep, c, occReadAtServer)
	}
}

// RunOCC runs the OCC experiment once with n clients, all starting at t=0,
// and returns what it measured. Run index run selects the run's random
// streams, derived from seed; the same (seed, n, run) gives the same result
// for every reproducible strategy.
func RunOCC(p Params, st Strategy, n int, seed uint64, run int) (OCCRun, error) {
	p, err := p.withDefaults()
	if err != nil {
		return OCCRun{}, err
	}
	if n < 1 {
		return OCCRun{}, fmt.Errorf("sim: invalid number of clients %d: must be at least 1", n)
	}
	newBackoff, err := st.newRun(p, runSource(seed, n, run, streamStrategy))
	if err != nil {
		return OCCRun{}, fmt.Errorf("sim: strategy %s: %w", st.Name, err)
	}
	r := &occRun{net: newNetwork(p.NetMean, p.NetSD, runRand(seed, n, run, streamNetwork)), allOld: p.AllOld}
	r.sched.q = make([]event, 0, n)
	clients := make([]occClient, n)
	for i := range clients {
		clients[i] = occClient{run: r, backoff: newBackoff()}
		r.sched.at(r.net.delay(), &clients[i], occReadAtServer)
	}
	r.sched.run()
	if r.err != nil {
		return OCCRun{}, r.err
	}
	out := OCCRun{Calls: r.calls, Done: make([]time.Duration, n)}
	for i := range clients {
		out.Done[i] = clients[i].done
		out.Time = max(out.Time, clients[i].done)
	}
	return out, nil
}
