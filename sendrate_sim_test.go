package jitterretry

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"
)

// limiterSim runs clients with send-rate limiters against a service model
// in virtual time, so the limiter's behaviour under load is tested on a
// fake clock: every worker of a client sends in a closed loop (an attempt,
// its answer a round trip later, the next attempt at once), waiting for its
// turn in the client's limiter.
type limiterSim struct {
	now     time.Time
	events  eventHeap
	rtt     time.Duration
	service *simService
	clients []*simClient
}

type simClient struct {
	l         *sendRate
	workers   int
	unlimited bool          // sends without asking the limiter: the no-limiter baseline
	stop      time.Duration // workers stop asking from then on; zero: never
	// backoff, when set, is the full-jitter backoff of a throttled worker:
	// it asks again after a random time in [0, backoff), as a retryer's
	// workers do, so that the client sends in bursts and pauses.
	backoff time.Duration
	// successes, throttles and sends per second of virtual time
	ok, thr, sent []int

	// The workers waiting for their turn sleep until their delay or a
	// window, or until the limiter closes the channel it gave them (it
	// gives one only to those whose turn may come within a window), as
	// waitToSend does: a wake makes those asleep on the channel ask again
	// at once, and the polls they had scheduled stale (their generation
	// is older).
	asleep  []simSleepers     // in the order the channels were handed out
	waiting map[uint64]uint64 // the places still waiting, and the generation of their poll
}

// simSleepers are the places asleep on one channel, each with the
// generation of its poll then, in the order they fell asleep.
type simSleepers struct {
	changed <-chan struct{}
	places  []sendPlace
	gens    []uint64
}

// simService admits requests from a token bucket of capacity per second
// (burst tokens at most), after throttling each with probability p whatever
// the load.
type simService struct {
	capacity func(t time.Duration) float64 // +Inf: unlimited
	burst    float64
	// burstSeconds, when set, sizes the bucket to that many seconds of
	// the current capacity instead of burst, as the capacity proxy does.
	burstSeconds float64
	p            float64
	// throttleSkips is the part of the round trip a throttle does not
	// take: the service time of an admitted request, which a throttle,
	// answered at once, skips. Zero: answers take the same time.
	throttleSkips time.Duration
	// throttleLate is what a throttle's answer takes beyond the round
	// trip: a service that answers throttles after successes. Each such
	// throttle's time is noted in the client's limiter, as a lane notes
	// those of its timed attempts.
	throttleLate time.Duration
	rng          *rand.Rand
	tokens       float64
	last         time.Duration
}

func (s *simService) admit(at time.Duration) bool {
	if s.p > 0 && s.rng.Float64() < s.p {
		return false
	}
	c := s.capacity(at)
	if math.IsInf(c, 1) {
		return true
	}
	// Requests reach the service in a different order than they were
	// sent (their round trips vary): the bucket refills with the
	// service's own clock, which never runs back.
	burst := s.burst
	if s.burstSeconds > 0 {
		burst = s.burstSeconds * c
	}
	if at > s.last {
		s.tokens = math.Min(burst, s.tokens+(at-s.last).Seconds()*c)
		s.last = at
	}
	s.tokens = math.Min(s.tokens, burst)
	if s.tokens >= 1 {
		s.tokens--
		return true
	}
	return false
}

type simEvent struct {
	at     time.Time
	client *simClient
	place  sendPlace // a worker waiting for its turn
	gen    uint64    // of the place's polls, when the poll was scheduled
	answer bool      // an answer arrives
	asks   bool      // a worker's backoff ends: it asks for a place
	fresh  bool      // a place's first poll: not waiting yet, so no wake replaces it
	ok     bool
	rtt    time.Duration // an answer's round trip
}

type eventHeap []simEvent

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newLimiterSim(rtt time.Duration, service *simService) *limiterSim {
	return &limiterSim{now: t0, rtt: rtt, service: service}
}

// add adds a client with workers that start at offset start.
func (s *limiterSim) add(l *sendRate, workers int, start time.Duration) *simClient {
	c := &simClient{l: l, workers: workers}
	s.clients = append(s.clients, c)
	for range workers {
		s.ask(c, s.now.Add(start))
	}
	return c
}

// ask has a worker of c take a place at t.
func (s *limiterSim) ask(c *simClient, t time.Time) {
	if c.stop > 0 && t.Sub(t0) >= c.stop {
		return
	}
	if c.unlimited {
		heap.Push(&s.events, simEvent{at: t, client: c, place: sendPlace{place: math.MaxUint64}})
		return
	}
	p := placeAt(c.l, t)
	s.wake(c, t)
	heap.Push(&s.events, simEvent{at: t, client: c, place: p, fresh: true})
}

// wake makes the workers of c asleep on a channel the limiter closed ask
// again at t.
func (s *limiterSim) wake(c *simClient, t time.Time) {
	kept := c.asleep[:0]
	for _, z := range c.asleep {
		if !closed(z.changed) {
			kept = append(kept, z)
			continue
		}
		for i, p := range z.places {
			if gen, ok := c.waiting[p.place]; ok && gen == z.gens[i] {
				c.waiting[p.place] = gen + 1
				heap.Push(&s.events, simEvent{at: t, client: c, place: p, gen: gen + 1})
			}
		}
	}
	clear(c.asleep[len(kept):])
	c.asleep = kept
}

// sleep has the worker waiting at place p, its poll of generation gen
// scheduled, sleep on changed too.
func (c *simClient) sleep(changed <-chan struct{}, p sendPlace, gen uint64) {
	if changed == nil {
		return
	}
	if n := len(c.asleep); n == 0 || c.asleep[n-1].changed != changed {
		c.asleep = append(c.asleep, simSleepers{changed: changed})
	}
	z := &c.asleep[len(c.asleep)-1]
	z.places, z.gens = append(z.places, p), append(z.gens, gen)
}

// run processes events until d of virtual time has passed since t0.
func (s *limiterSim) run(d time.Duration) {
	end := t0.Add(d)
	for s.events.Len() > 0 {
		e := heap.Pop(&s.events).(simEvent)
		if e.at.After(end) {
			heap.Push(&s.events, e)
			return
		}
		s.now = e.at
		sec := int(e.at.Sub(t0) / time.Second)
		c := e.client
		if e.answer {
			if !c.unlimited {
				if !e.ok && s.service.throttleLate > 0 {
					c.l.noteThrottleTime(e.rtt)
				}
				observeAt(c.l, e.at, !e.ok, s.rtt)
				s.wake(c, e.at)
			}
			bump(&c.ok, sec, e.ok)
			bump(&c.thr, sec, !e.ok)
			if !e.ok && c.backoff > 0 {
				sleep := time.Duration(s.service.rng.Float64() * float64(c.backoff))
				heap.Push(&s.events, simEvent{at: e.at.Add(sleep), client: c, asks: true})
				continue
			}
			s.ask(c, e.at)
			continue
		}
		if e.asks {
			s.ask(c, e.at)
			continue
		}
		if !c.unlimited {
			if gen, ok := c.waiting[e.place.place]; !e.fresh && (!ok || gen != e.gen) {
				continue // a wake made this worker ask again already
			}
			// This poll is the worker's only one: out of the waiting
			// places while it asks, so that a wake it causes does not
			// schedule a second poll for the same worker.
			delete(c.waiting, e.place.place)
			wait, changed := delayAt(c.l, e.place, e.at)
			s.wake(c, e.at)
			if wait > 0 {
				if c.waiting == nil {
					c.waiting = map[uint64]uint64{}
				}
				e.at, e.gen, e.fresh = e.at.Add(min(wait, sendWindow)), e.gen+1, false
				c.waiting[e.place.place] = e.gen
				c.sleep(changed, e.place, e.gen)
				heap.Push(&s.events, e)
				continue
			}
		}
		bump(&c.sent, sec, true)
		// Round trips vary by ±20%, as on a real network: without it,
		// clients lock into phases where one always reaches the service
		// just before the other.
		rtt := time.Duration(float64(s.rtt) * (0.8 + 0.4*s.service.rng.Float64()))
		ok := s.service.admit(e.at.Sub(t0) + rtt/2)
		if !ok {
			rtt = max(rtt-s.service.throttleSkips, rtt/10) + s.service.throttleLate
		}
		heap.Push(&s.events, simEvent{at: e.at.Add(rtt), client: c, answer: true, ok: ok, rtt: rtt})
	}
}

func bump(counts *[]int, sec int, yes bool) {
	for len(*counts) <= sec {
		*counts = append(*counts, 0)
	}
	if yes {
		(*counts)[sec]++
	}
}

// sum returns the total of counts over seconds [from, to).
func sum(counts []int, from, to int) int {
	n := 0
	for i := from; i < to && i < len(counts); i++ {
		n += counts[i]
	}
	return n
}

// jain returns Jain's fairness index of xs: 1 when all are equal, 1/n when
// one has everything.
func jain(xs []float64) float64 {
	var s, sq float64
	for _, x := range xs {
		s += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * sq)
}

func constantCapacity(c float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return c }
}
