package jitterretry

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The limiter's control, in virtual time (sendrate_sim_test.go): K workers
// per client in a closed loop, a 2 ms round trip, a service that throttles
// beyond its capacity (burst 50) or at random. Virtual time reads no clock,
// so these tests run in parallel: they are most of the package's time
// (about 200 s of 280 under -race on the 2-core VM), and one at a time
// they held a second core idle. make test runs them, every test named
// TestSendRate* or TestLimiterSim*, in a pass of their own without -race
// (one goroutine: the detector finds nothing, and made them five times as
// slow); a test of the limiter with goroutines is named otherwise
// (sendqueue_test.go's TestSendQueue*, stress_test.go).

func service(capacity func(time.Duration) float64, p float64) *simService {
	return &simService{capacity: capacity, burst: 50, tokens: 50, p: p, rng: rand.New(rand.NewPCG(1, 2))}
}

// capacityStep is a change of capacity: to from at on.
type capacityStep struct {
	at time.Duration
	to float64
}

// phasedCapacity is a capacity of first until the first step, and of each
// step's from its time on; steps are in order of time.
func phasedCapacity(first float64, steps ...capacityStep) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		c := first
		for _, s := range steps {
			if t < s.at {
				break
			}
			c = s.to
		}
		return c
	}
}

// benchService is a service with capacity and the capacity proxy's ways
// (a bucket of 0.1 s of the current capacity, throttles answered 2 ms
// sooner than successes), its draws seeded by seed.
func benchService(capacity func(time.Duration) float64, seed uint64) *simService {
	svc := service(capacity, 0)
	svc.burstSeconds, svc.throttleSkips = 0.1, 2*time.Millisecond
	svc.rng = rand.New(rand.NewPCG(seed, 2))
	return svc
}

// stepCapacity is a capacity of before until at, and of after from then on.
func stepCapacity(at time.Duration, before, after float64) func(time.Duration) float64 {
	return phasedCapacity(before, capacityStep{at, after})
}

// tracedSendRate returns a limiter with options o that traces its
// decisions to t in a verbose run.
func tracedSendRate(t *testing.T, o SendRateOptions) *sendRate {
	l := newSendRate(o, nil)
	if testing.Verbose() {
		l.trace = t.Logf
	}
	return l
}

// TestLimiterSimRunsOnePollPerWorker: the simulation's own check. A wake a
// worker's poll caused scheduled a second poll for the same worker, which
// then sent twice; 8 workers with 10 ms round trips sent 3,297 requests in
// a second where they can send 1,000 at most (round trips vary ±20%).
func TestLimiterSimRunsOnePollPerWorker(t *testing.T) {
	t.Parallel()
	svc := service(constantCapacity(math.Inf(1)), 0.1)
	svc.rng = rand.New(rand.NewPCG(2, 3))
	sim := newLimiterSim(10*time.Millisecond, svc)
	c := &simClient{l: newSendRate(SendRateOptions{}, nil), workers: 8, backoff: 100 * time.Millisecond}
	sim.clients = append(sim.clients, c)
	for range 8 {
		sim.ask(c, sim.now)
	}
	sim.run(20 * time.Second)
	for sec, n := range c.sent {
		assert.LessOrEqual(t, n, 1000, "second %d: expect at most 8 workers' worth of sends", sec)
	}
}

// TestSendRateSettlesAtCapacity: one client of 64 workers against a
// capacity of 500/s settles at it, with few throttles; and so it does
// against other capacities, and with a longer round trip.
func TestSendRateSettlesAtCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		capacity float64
		rtt      time.Duration
	}{
		{500, 2 * time.Millisecond},
		{200, 2 * time.Millisecond},
		{2000, 2 * time.Millisecond},
		{500, 5 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("C=%v,rtt=%v", tc.capacity, tc.rtt), func(t *testing.T) {
			sim := newLimiterSim(tc.rtt, service(constantCapacity(tc.capacity), 0))
			l := newSendRate(SendRateOptions{}, nil)
			if testing.Verbose() {
				l.trace = t.Logf
			}
			c := sim.add(l, 64, 0)
			sim.run(10 * time.Second)
			ok, sent := sum(c.ok, 2, 10), sum(c.sent, 2, 10)
			assert.GreaterOrEqual(t, float64(ok)/8, 0.95*tc.capacity, "expect ≥95%% of the capacity once settled, got %d/s", ok/8)
			assert.LessOrEqual(t, float64(sent)/float64(ok), 1.05, "expect ≤1.05 calls per success, got %d/%d", sent, ok)
		})
	}
}

// TestSendRateIgnoresThrottlesItCannotHelp: when each request is throttled
// with some probability whatever the rate (other tenants use the table),
// cutting would not reduce the throttles: the limiter keeps at least 90% of
// the throughput of no limiter, and makes no more calls per success.
func TestSendRateIgnoresThrottlesItCannotHelp(t *testing.T) {
	t.Parallel()
	for _, p := range []float64{0.5, 0.4, 0.2, 0.05} {
		for _, k := range []int{8, 64} {
			t.Run(fmt.Sprintf("p=%v,K=%d", p, k), func(t *testing.T) {
				ignoresThrottlesItCannotHelp(t, p, k, 0, 0)
			})
			// With a backoff after each throttle, as a retryer's
			// workers have, the client sends in bursts and pauses.
			t.Run(fmt.Sprintf("p=%v,K=%d,backoff", p, k), func(t *testing.T) {
				if k < 64 && p > 0.05 {
					t.Skip("known gap: a client whose workers sit in backoffs sends too few requests to judge a halving in its test's second; the halving is taken back, but with nothing found, every episode of throttles costs a cut (TestSendRateTakesBackAHalvingItCannotJudge; BENCHMARKS.md §4)")
				}
				ignoresThrottlesItCannotHelp(t, p, k, time.Second, 0)
			})
		}
	}
	// Throttles answered at once, before the successes sent with them,
	// crowd the first answers: the episode that triggers the first cut
	// measured 64-93% throttled at 40% (the throttle benchmark, K = 64).
	t.Run("p=0.4,K=64,backoff,fast throttles", func(t *testing.T) {
		ignoresThrottlesItCannotHelp(t, 0.4, 64, time.Second, 2*time.Millisecond)
	})
}

// ignoresThrottlesItCannotHelp runs k workers against an unlimited service
// that throttles with probability p, without the limiter and with it, and
// compares. Workers back off up to backoff after a throttle; a throttle's
// round trip is shorter by throttleSkips.
func ignoresThrottlesItCannotHelp(t *testing.T, p float64, k int, backoff, throttleSkips time.Duration) {
	run := func(unlimited bool) (ok, sent int) {
		svc := service(constantCapacity(math.Inf(1)), p)
		svc.throttleSkips = throttleSkips
		sim := newLimiterSim(2*time.Millisecond+throttleSkips, svc)
		l := newSendRate(SendRateOptions{}, nil)
		if testing.Verbose() && !unlimited {
			l.trace = t.Logf
		}
		c := &simClient{l: l, workers: k, unlimited: unlimited, backoff: backoff}
		sim.clients = append(sim.clients, c)
		for range k {
			sim.ask(c, sim.now)
		}
		sim.run(10 * time.Second)
		return sum(c.ok, 0, 10), sum(c.sent, 0, 10)
	}
	baseOK, baseSent := run(true)
	ok, sent := run(false)
	t.Logf("successes: %d without the limiter, %d with it", baseOK, ok)
	assert.GreaterOrEqual(t, float64(ok), 0.9*float64(baseOK), "expect ≥90%% of the successes without limiter (%d), got %d", baseOK, ok)
	assert.LessOrEqual(t, float64(sent)/float64(ok), float64(baseSent)/float64(baseOK)*1.01,
		"expect no more calls per success than without limiter")
}

// TestSendRateTakesBackAHalvingItCannotJudge: 8 workers that back off up
// to 1 s after a throttle, under 20% random throttles on an unlimited
// service, send some 50 requests a second: a halving gets fewer than
// undoMin answers in its test's second. It stood unjudged, and the client
// fell from halving to halving: 61% of the no-limiter successes, averaged
// over 24 draws (57-62% in eight families of draws; the bench: 64-78%).
// Such a halving is now taken back unless its share fell by 2.5 deviations
// or to none: 74% (69-74% in those families).
func TestSendRateTakesBackAHalvingItCannotJudge(t *testing.T) {
	t.Parallel()
	base, limited := randomThrottleRuns{p: 0.2, workers: 8, backoff: time.Second, rtt: 4 * time.Millisecond,
		throttleSkips: 2 * time.Millisecond, family: 5, seeds: 24, d: 10 * time.Second}.successes()
	assert.GreaterOrEqual(t, float64(limited), 0.65*float64(base), "expect ≥65%% of the successes without the limiter (%d), got %d", base, limited)
}

// randomThrottleRuns runs a client of workers that back off up to backoff
// after a throttle, without the limiter and with it, against an unlimited
// service that throttles with probability p (a throttle's round trip
// shorter by throttleSkips), once per seed of the draws rand.NewPCG(seed,
// family) for each of seeds, for d each.
type randomThrottleRuns struct {
	p                           float64
	workers                     int
	backoff, rtt, throttleSkips time.Duration
	family, seeds               uint64
	d                           time.Duration
}

// successes returns the successes of the runs without the limiter and with
// it, each summed over the seeds.
func (r randomThrottleRuns) successes() (base, limited int) {
	secs := int(r.d / time.Second)
	for seed := range r.seeds {
		for _, unlimited := range []bool{true, false} {
			svc := service(constantCapacity(math.Inf(1)), r.p)
			svc.rng = rand.New(rand.NewPCG(seed, r.family))
			svc.throttleSkips = r.throttleSkips
			sim := newLimiterSim(r.rtt, svc)
			c := &simClient{l: newSendRate(SendRateOptions{}, nil), workers: r.workers, unlimited: unlimited, backoff: r.backoff}
			sim.clients = append(sim.clients, c)
			for range c.workers {
				sim.ask(c, sim.now)
			}
			sim.run(r.d)
			if unlimited {
				base += sum(c.ok, 0, secs)
			} else {
				limited += sum(c.ok, 0, secs)
			}
		}
	}
	return base, limited
}

// TestSendRateIgnoresRandomThrottlesAtLongerRoundTrips: random throttles at
// a 10 ms round trip, over 20 s: a halving whose test cannot tell must be
// undone, not stand; when it stood (7431c5d), a client of 4 workers at 20%
// fell to 13-29 successes a second in one run of three, and one of 8
// workers that back off 100 ms at 10% to 44-60, against 320 and 477
// without the limiter. Per case, the mean over three runs differing only
// in the service's draws is at least 85% of the no-limiter one.
func TestSendRateIgnoresRandomThrottlesAtLongerRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p       float64
		workers int
		backoff time.Duration
	}{{0.2, 4, 0}, {0.1, 8, 100 * time.Millisecond}, {0.1, 16, time.Second}} {
		t.Run(fmt.Sprintf("p=%v,K=%d,backoff=%v", tc.p, tc.workers, tc.backoff), func(t *testing.T) {
			base, limited := randomThrottleRuns{p: tc.p, workers: tc.workers, backoff: tc.backoff, rtt: 10 * time.Millisecond,
				family: 3, seeds: 3, d: 20 * time.Second}.successes()
			assert.GreaterOrEqual(t, float64(limited), 0.85*float64(base), "expect ≥85%% of the successes without the limiter (%d), got %d", base, limited)
		})
	}
}

// TestSendRateFairShares: independent clients sharing one capacity, each
// with its own limiter and no way to talk to each other, end with similar
// shares: two clients, one of which arrives late, and a fleet of 16.
func TestSendRateFairShares(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		clients, workers int
		late             time.Duration // the last client starts then
	}{
		"two clients":             {clients: 2, workers: 32},
		"two, one arriving late":  {clients: 2, workers: 32, late: 5 * time.Second},
		"a fleet of 16 × 4":       {clients: 16, workers: 4},
		"a fleet of 16, one late": {clients: 16, workers: 4, late: 5 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(500), 0))
			for i := range tc.clients {
				start := time.Duration(0)
				if i == tc.clients-1 {
					start = tc.late
				}
				l := newSendRate(SendRateOptions{}, nil)
				if testing.Verbose() {
					id := i
					l.trace = func(f string, args ...any) { t.Logf(fmt.Sprintf("[%d] ", id)+f, args...) }
				}
				sim.add(l, tc.workers, start)
			}
			sim.run(30 * time.Second)
			var shares []float64
			total := 0
			for _, c := range sim.clients {
				n := sum(c.ok, 20, 30)
				shares = append(shares, float64(n))
				total += n
			}
			assert.GreaterOrEqual(t, jain(shares), 0.9, "expect fair shares over the last 10 s, got %v", shares)
			assert.GreaterOrEqual(t, float64(total)/10, 0.95*500, "expect ≥95%% of the capacity used, got %d/s", total/10)
		})
	}
}

// TestSendRateFairSharesWithALateClient: a client that joins a fleet of
// small ones sends far more than any of them at first (unlimited, its
// throttles answered at once) and meets throttles its halving moves only
// some of the way: the fleet's. It took them for throttles not its own,
// undid its cuts and, with them excused as background, kept 45-50% of the
// successes for the hold while the small clients cut: in 10 of 30 draws of
// this simulation. A cut during the hold whose share falls clearly now
// ends the hold. Ten runs, differing only in the service's draws; each is
// judged on Jain's index over the last 10 s of 30.
func TestSendRateFairSharesWithALateClient(t *testing.T) {
	t.Parallel()
	for seed := range uint64(10) {
		svc := service(constantCapacity(500), 0)
		svc.rng = rand.New(rand.NewPCG(seed, 7))
		sim := newLimiterSim(2*time.Millisecond, svc)
		for i := range 16 {
			start := time.Duration(0)
			if i == 15 {
				start = 5 * time.Second
			}
			sim.add(newSendRate(SendRateOptions{}, nil), 4, start)
		}
		sim.run(30 * time.Second)
		var shares []float64
		for _, c := range sim.clients {
			shares = append(shares, float64(sum(c.ok, 20, 30)))
		}
		assert.GreaterOrEqual(t, jain(shares), 0.85, "seed %d: expect fair shares, the late client's last, got %v", seed, shares)
	}
}

// TestSendRateFairSharesWithALateClientOfFour: four clients of 16 workers
// that back off up to 1 s after a throttle, the last joining at 5 s. A
// client's halving is filled by the others' rises within a second, so its
// share falls only part of the way; undone on such a fall and excused for
// ten seconds, one client kept 250-350/s while the others were cut to
// 45-130/s (the outside review's bench run had the late client at 4.8% of
// the capacity where a fair share is 25%). Over the ten seconds after the
// join, Jain's index fell under 0.8 in 10 of these 64 draws (7-10 in each
// of eight families of draws); an unsure finding now holds two seconds,
// and 0-6 of 64 fall under it in those families, 2 in this one.
func TestSendRateFairSharesWithALateClientOfFour(t *testing.T) {
	t.Parallel()
	var unfair []uint64
	for seed := range uint64(64) {
		sim := newLimiterSim(4*time.Millisecond, benchService(constantCapacity(500), seed))
		for i := range 4 {
			start := time.Duration(0)
			if i == 3 {
				start = 5 * time.Second
			}
			sim.add(newSendRate(SendRateOptions{}, nil), 16, start).backoff = time.Second
		}
		sim.run(15 * time.Second)
		var shares []float64
		for _, c := range sim.clients {
			shares = append(shares, float64(sum(c.ok, 5, 15)))
		}
		if jain(shares) < 0.8 {
			unfair = append(unfair, seed)
		}
	}
	assert.LessOrEqual(t, len(unfair), 6, "expect Jain's index ≥ 0.8 from the join on in all but 6 of 64 draws, under it in draws %v", unfair)
}

// TestSendRateAfterWarmUp: an unthrottled warm-up of 1000 workers raises the
// rate only as far as the service accepted; when the capacity then falls to
// 500/s, the limiter finds it within a few round trips.
func TestSendRateAfterWarmUp(t *testing.T) {
	t.Parallel()
	capacity := func(at time.Duration) float64 {
		if at < time.Second {
			return math.Inf(1)
		}
		return 500
	}
	sim := newLimiterSim(2*time.Millisecond, service(capacity, 0))
	l := newSendRate(SendRateOptions{InitialRate: 500}, nil)
	c := sim.add(l, 1000, 0)
	sim.run(time.Second)
	warm := l.currentRate()
	sent := float64(sum(c.sent, 0, 1))
	assert.LessOrEqual(t, warm, 2*sent, "expect the rate at most twice what the warm-up sent (%v/s), got %v", sent, warm)
	sim.run(3 * time.Second)
	assert.LessOrEqual(t, sum(c.thr, 1, 2), 300, "expect few throttles in the first throttled second, got %d", sum(c.thr, 1, 2))
	assert.GreaterOrEqual(t, float64(sum(c.ok, 2, 3)), 0.95*500, "expect the capacity used the second after")
}

// TestSendRateRisesFromInitialRate: a limiter started at a low InitialRate
// in front of a large capacity that never throttles grows multiplicatively
// after two seconds, as documented, and reaches the capacity within
// seconds; it grew by 1/s a window only, and needed minutes, before.
func TestSendRateRisesFromInitialRate(t *testing.T) {
	t.Parallel()
	sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(5000), 0))
	l := newSendRate(SendRateOptions{InitialRate: 20}, nil)
	c := sim.add(l, 256, 0)
	sim.run(8 * time.Second)
	assert.GreaterOrEqual(t, float64(sum(c.ok, 6, 8))/2, 0.9*5000, "expect the capacity in use by the seventh second, got %v a second", c.ok)
	assert.LessOrEqual(t, sum(c.thr, 0, 8), int(0.02*float64(sum(c.sent, 0, 8))), "expect the rise to stop at the capacity with few throttles")
}

// TestSendRateAfterAQuietHour: an hour at one request a second, then 200
// callers against a capacity of 945/s. The quiet hour must not shape the
// cut (a cut is sized on what the client sends now, and keeps at least half
// of it): the capacity is in use from the second second on.
func TestSendRateAfterAQuietHour(t *testing.T) {
	t.Parallel()
	l := newSendRate(SendRateOptions{}, nil)
	for now := t0.Add(-time.Hour); now.Before(t0); now = now.Add(time.Second) {
		p := placeAt(l, now)
		d, _ := delayAt(l, p, now)
		require.Zero(t, d, "expect no wait at one request a second")
		observeAt(l, now.Add(2*time.Millisecond), false, 2*time.Millisecond)
	}
	sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(945), 0))
	c := sim.add(l, 200, 0)
	sim.run(4 * time.Second)
	assert.GreaterOrEqual(t, l.currentRate(), 0.8*945, "expect no cut far below the capacity")
	for sec := 1; sec < 4; sec++ {
		assert.GreaterOrEqual(t, float64(sum(c.ok, sec, sec+1)), 0.9*945, "expect ≥90%% of the capacity used in second %d", sec)
	}
}

// TestSendRateAfterWarmUpUnderRandomThrottles: a warm-up on an unlimited
// service that throttles a fifth of the requests at random ends in a hold
// (the throttles are found not to follow the rate) and a chain of cuts
// whose first measured the warm-up's flood. When the capacity then falls
// to 500/s, the limiter must not climb back toward that flood's measure:
// the share throttled stays near the random fifth.
func TestSendRateAfterWarmUpUnderRandomThrottles(t *testing.T) {
	t.Parallel()
	sim := newLimiterSim(2*time.Millisecond, service(stepCapacity(time.Second, math.Inf(1), 500), 0.2))
	c := sim.add(tracedSendRate(t, SendRateOptions{}), 64, 0)
	sim.run(10 * time.Second)
	thr, sent := sum(c.thr, 2, 10), sum(c.sent, 2, 10)
	assert.LessOrEqual(t, float64(thr), 0.3*float64(sent), "expect ≤30%% of the sends throttled (20%% at random), got %d of %d", thr, sent)
	assert.GreaterOrEqual(t, float64(sum(c.ok, 2, 10))/8, 0.9*0.8*500, "expect the capacity used")
}

// TestSendRateProbesCheaplyAfterWarmUp: a warm-up on an unlimited service
// leaves a peak far above the capacity that follows. Probing it back must
// not flood the service: each probe goes at most a few times above the
// rate, and probes that keep failing come less often.
func TestSendRateProbesCheaplyAfterWarmUp(t *testing.T) {
	t.Parallel()
	capacity := func(at time.Duration) float64 {
		if at < time.Second {
			return math.Inf(1)
		}
		return 500
	}
	sim := newLimiterSim(2*time.Millisecond, service(capacity, 0))
	c := sim.add(newSendRate(SendRateOptions{}, nil), 1000, 0)
	sim.run(11 * time.Second)
	thr, sent := sum(c.thr, 3, 11), sum(c.sent, 3, 11)
	assert.LessOrEqual(t, float64(thr), 0.05*float64(sent), "expect ≤5%% of the sends throttled once settled, got %d of %d", thr, sent)
	assert.GreaterOrEqual(t, float64(sum(c.ok, 3, 11))/8, 0.95*500, "expect the capacity used")
}

// TestSendRateProbesCheaplyWithLongRoundTrips: the same warm-up, with round
// trips of 100 ms. A jump that passed its probe sends four times the rate
// for a round trip before its first throttle comes back, and its answers
// blind the detection for a round trip and a window: at a jump every 200 ms
// the limiter never cut again, and three quarters of the sends were
// throttled. Jumps now come at most once every ten round trips.
func TestSendRateProbesCheaplyWithLongRoundTrips(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		svc := service(stepCapacity(time.Second, math.Inf(1), 500), 0)
		svc.rng = rand.New(rand.NewPCG(seed, 3))
		sim := newLimiterSim(100*time.Millisecond, svc)
		c := sim.add(newSendRate(SendRateOptions{}, nil), 1000, 0)
		sim.run(11 * time.Second)
		thr, sent := sum(c.thr, 2, 11), sum(c.sent, 2, 11)
		assert.LessOrEqual(t, float64(thr), 0.25*float64(sent), "seed %d: expect ≤25%% of the sends throttled, got %d of %d", seed, thr, sent)
		assert.GreaterOrEqual(t, float64(sum(c.ok, 2, 11))/9, 0.9*500, "seed %d: expect the capacity used", seed)
	}
}

// TestSendRateMaxRateWhileUnlimited: a ceiling holds from the first request,
// before any throttle, and after an idle reset.
func TestSendRateMaxRateWhileUnlimited(t *testing.T) {
	t.Parallel()
	l := newSendRate(SendRateOptions{MaxRate: 100}, nil)
	assert.Equal(t, 100.0, l.currentRate())
	placeAt(l, time.Unix(0, 0))
	placeAt(l, time.Unix(1000, 0))
	assert.Equal(t, 100.0, l.currentRate())
}

// TestSendRateRecovers: while the capacity is down from 500/s to 100/s, at
// most 15% of the sends are throttled (the probes for its return and the
// rise's above it); when it returns, the first second after it averages at
// least 90% of it, on average over six draws (single draws dip to 89%):
// for a limiter that started unlimited, and for one that started at
// InitialRate and never saw the service unthrottled.
func TestSendRateRecovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		workers int
		initial float64
	}{{64, 0}, {1000, 500}} {
		t.Run(fmt.Sprintf("K=%d,InitialRate=%v", tc.workers, tc.initial), func(t *testing.T) {
			capacity := func(at time.Duration) float64 {
				if at >= 2*time.Second && at < 7*time.Second {
					return 100
				}
				return 500
			}
			// Where the probes fall against the return decides a tenth
			// of the first second either way: six draws, on average.
			const draws = 6
			thr, sent, first := 0, 0, 0
			for seed := range uint64(draws) {
				svc := service(capacity, 0)
				svc.rng = rand.New(rand.NewPCG(seed, 2))
				sim := newLimiterSim(2*time.Millisecond, svc)
				lim := newSendRate(SendRateOptions{InitialRate: tc.initial}, nil)
				if testing.Verbose() && seed == 0 {
					lim.trace = t.Logf
				}
				c := sim.add(lim, tc.workers, 0)
				sim.run(12 * time.Second)
				assert.LessOrEqual(t, sum(c.ok, 4, 7), int(1.1*100*3), "seed %d: expect the drop followed", seed)
				thr, sent = thr+sum(c.thr, 3, 7), sent+sum(c.sent, 3, 7)
				first += sum(c.ok, 7, 8)
			}
			assert.LessOrEqual(t, float64(thr), 0.15*float64(sent), "expect ≤15%% of the sends throttled during the drop, got %d of %d", thr, sent)
			assert.GreaterOrEqual(t, float64(first)/draws, 0.9*500, "expect ≥90%% of the capacity in the first second after it returns, got %d/s on average", first/draws)
		})
	}
}

// TestSendRateRegainsWhatItTookBeforeItsFirstCut: a client just under its
// capacity (24 workers, 50 ms round trips: some 480 requests a second on
// 500/s) is never throttled until the capacity falls to 100/s for 5 s. Its
// first cut measures the fall, and what the service took before, unlimited,
// is what a warm-up on an idle table would show too: it was forgotten, and
// the rate regained the capacity only along the line, 31% and 39% of it in
// the second and third seconds back over eight draws (an outside
// evaluation saw 23/27/44% on the bench). Jumps now try it once a second
// without a cut: 89% and 92% (the same client without the limiter: 96%).
func TestSendRateRegainsWhatItTookBeforeItsFirstCut(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(500, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500})
	const draws = 8
	back := 0
	for seed := range uint64(draws) {
		sim, c := backingOffClient(t, 50*time.Millisecond, 24, capacity, seed)
		sim.run(10 * time.Second)
		require.Zero(t, sum(c.thr, 0, 2), "seed %d: expect no throttle before the fall", seed)
		back += sum(c.ok, 8, 10)
	}
	share := float64(back) / draws / (2 * 500)
	assert.GreaterOrEqual(t, share, 0.8, "expect ≥80%% of the capacity in the second and third seconds after it returns, got %.0f%%", 100*share)
}

// runLikeTheBench runs one client of 64 workers that back off up to 1 s
// after a throttle, as cmd/throttlebench's K = 64 over its capacity proxy
// (a bucket of 0.1 s of the current capacity, throttles answered 2 ms
// sooner than successes, 4 ms round trips), for d against capacity, the
// service's draws seeded by seed; the limiter's trace is logged for seed 0
// under -v.
func runLikeTheBench(t *testing.T, capacity func(time.Duration) float64, seed uint64, d time.Duration) *simClient {
	sim, c := likeTheBench(t, capacity, seed)
	sim.run(d)
	return c
}

// likeTheBench sets up runLikeTheBench's simulation, not yet run.
func likeTheBench(t *testing.T, capacity func(time.Duration) float64, seed uint64) (*limiterSim, *simClient) {
	return backingOffClient(t, 4*time.Millisecond, 64, capacity, seed)
}

// backingOffClient sets up a simulation, not yet run, of one client of
// workers that back off up to 1 s after a throttle, at round trips of rtt,
// on a benchService of capacity seeded by seed; the limiter's trace is
// logged for seed 0 under -v.
func backingOffClient(t *testing.T, rtt time.Duration, workers int, capacity func(time.Duration) float64, seed uint64) (*limiterSim, *simClient) {
	sim := newLimiterSim(rtt, benchService(capacity, seed))
	lim := newSendRate(SendRateOptions{}, nil)
	if testing.Verbose() && seed == 0 {
		lim.trace = t.Logf
	}
	c := &simClient{l: lim, workers: workers, backoff: time.Second}
	sim.clients = append(sim.clients, c)
	for range c.workers {
		sim.ask(c, sim.now)
	}
	return sim, c
}

// TestSendRateRecoversAFleetAfterATakenBackHalving: four clients of 16
// workers that back off up to 1 s after a throttle, on 500/s falling to
// 100/s for 5 s. Each client sends some 25 requests a second in the fall,
// too few to judge a halving in its second, and such a halving is taken
// back; it left out what a stand notes, that the chain's clean link
// measured the capacity before the fall, so the jumps did not aim at it:
// the first second after the capacity returned averaged 75.0% of it over
// 64 draws (78.3% when those halvings stood).
func TestSendRateRecoversAFleetAfterATakenBackHalving(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(500, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500})
	total := 0
	const draws = 64
	for seed := range uint64(draws) {
		sim := newLimiterSim(4*time.Millisecond, benchService(capacity, seed))
		for range 4 {
			sim.add(newSendRate(SendRateOptions{}, nil), 16, 0).backoff = time.Second
		}
		sim.run(8 * time.Second)
		for _, c := range sim.clients {
			total += sum(c.ok, 7, 8)
		}
	}
	assert.GreaterOrEqual(t, float64(total)/draws, 0.77*500, "expect ≥77%% of the capacity in the first second back, on average")
}

// TestSendRateJumpsBackThroughRandomThrottles: one client like the bench's, on
// 500/s falling to 100/s for 5 s, with 2% of all requests throttled at
// random on top (other tenants, say). Once the capacity returned, about one
// jump back in two drew a throttle at random and went back to the fallen
// rate, jump after jump: the first second back averaged 61.7% of the
// capacity over these 32 draws (49-66% over eight families of draws). A
// jump that fails on one throttle after many answers at its rate now goes
// back halfway, and its chain goes on: 80.6% with TestSendRateJumpsBackAfterAHold's
// change (65-83% with the jump's alone), 79.1% since the answers must span
// weakSpan at the jump's rate.
func TestSendRateJumpsBackThroughRandomThrottles(t *testing.T) {
	t.Parallel()
	got := firstSecondBackUnderRandomThrottles(t, 0.02, 32)
	assert.GreaterOrEqual(t, got, 0.7, "expect ≥70%% of the capacity in the first second back, on average, got %.1f%%", 100*got)
}

// firstSecondBackUnderRandomThrottles runs draws of runLikeTheBench's client
// on 500/s falling to 100/s for 5 s, with a share p of the requests
// throttled at random, and returns the mean share of the capacity it used
// in the first second after the capacity returned.
func firstSecondBackUnderRandomThrottles(t *testing.T, p float64, draws int) float64 {
	capacity := phasedCapacity(500, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500})
	total := 0
	for seed := range uint64(draws) {
		sim, c := likeTheBench(t, capacity, seed)
		sim.service.p = p
		sim.run(8 * time.Second)
		total += sum(c.ok, 7, 8)
	}
	return float64(total) / float64(draws) / 500
}

// TestSendRateJumpsBackAfterAHold: as TestSendRateJumpsBackThroughRandomThrottles,
// with 5% at random. Before the fall, the client undid a halving that did
// not move the throttled share and held it as background; no window of the
// hold counted as quiet (the background was not learnt on enough answers),
// so the client had noted no capacity to jump back to after the fall: the
// first second back averaged 26.0% over these 64 draws before either
// change, 37.6% with TestSendRateJumpsBackThroughRandomThrottles' (36-40%
// over eight families of draws). An undone halving now notes what the
// service took before it as the peak: 47.7% (45-52%); 45.7% since the
// weak failure needs weakSpan and the peak counts the trigger's successes.
func TestSendRateJumpsBackAfterAHold(t *testing.T) {
	t.Parallel()
	got := firstSecondBackUnderRandomThrottles(t, 0.05, 64)
	assert.GreaterOrEqual(t, got, 0.43, "expect ≥43%% of the capacity in the first second back, on average, got %.1f%%", 100*got)
}

// TestSendRateHoldsUpUnderRandomThrottlesOnACapacity: one client like the
// bench's on a steady 500/s, with 2% of all requests throttled at random
// on top. A chain of cuts begun in the start's flood cut on after its
// share fell to a few percent, where the next halving cannot tell whose
// the throttles are and stands: the client used 88.4% of the capacity over
// seconds 2-10 on average over these 64 draws, 65% in the worst. A cut
// whose share fell clearly to lowShare or less now ends its chain: 91.1%,
// 72%.
func TestSendRateHoldsUpUnderRandomThrottlesOnACapacity(t *testing.T) {
	t.Parallel()
	const draws = 64
	var perDraw []int
	total := 0
	for seed := range uint64(draws) {
		sim, c := likeTheBench(t, constantCapacity(500), seed)
		sim.service.p = 0.02
		sim.run(10 * time.Second)
		perDraw = append(perDraw, sum(c.ok, 2, 10)/8)
		total += sum(c.ok, 2, 10)
	}
	mean := float64(total) / draws / 8
	t.Logf("successes a second over seconds 2-10, per draw: %v", perDraw)
	assert.GreaterOrEqual(t, mean, 0.89*500, "expect ≥89%% of the capacity on average, got %.0f/s", mean)
	assert.GreaterOrEqual(t, slices.Min(perDraw), 350, "expect ≥70% of the capacity in every draw")
}

// TestSendRateAFallDuringAHoldEndsIt: one client like the bench's, 5% of
// all requests throttled at random on 500/s falling to 100/s for 5 s. A
// halving before the fall finds the throttles not its own, and holds them
// as background for 10 s: no rise and no jump until the background is
// learnt on 2,000 answers, 16 s at the fallen rate. The fall's chain of
// cuts, begun at 75% throttled, ended on a last link whose share fell by
// two deviations or so, not the three that ended a hold, and the client
// sent at the fallen rate for seconds after the capacity returned: in 10
// of these 64 draws under 30% of it over the second to the fifth second
// back (7 with lowShare's change). A chain that fell clearly from a
// beginning clearly above the background now ends the hold: 4.
func TestSendRateAFallDuringAHoldEndsIt(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(500, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500})
	var stuck []uint64
	for seed := range uint64(64) {
		sim, c := likeTheBench(t, capacity, seed)
		sim.service.p = 0.05
		sim.run(12 * time.Second)
		if sum(c.ok, 8, 12) < 0.3*4*500 {
			stuck = append(stuck, seed)
		}
	}
	assert.LessOrEqual(t, len(stuck), 6, "expect at most 6 of 64 draws under 30%% of the capacity over seconds 2-5 back, got %v", stuck)
}

// TestSendRateRecoversAtASmallCapacity: a table of 100 writes/s falling to
// 20/s for 5 s, with the capacity proxy's bucket of 0.1 s and workers that
// back off up to 1 s after a throttle. The cuts in the low phase are sized
// on 20-odd answers; jumps made right after each cut, before its answers
// came, failed and ended its test, so the rate stood at 1.5 times the low
// capacity, above a third of the peak, and the capacity that returned was
// regained by the line alone, unless a jump came before a cut: 56% of it
// over the two seconds after, on average over eight draws, five of them
// under 46% (74% now, three under 60%; throttlebench -capacity 100
// -scenarios drop: 2.8-3.1 s to recover before, 0.0-1.3 s now).
func TestSendRateRecoversAtASmallCapacity(t *testing.T) {
	t.Parallel()
	capacity := func(at time.Duration) float64 {
		if at >= 2*time.Second && at < 7*time.Second {
			return 20
		}
		return 100
	}
	const draws = 8
	var after []int
	total := 0
	for seed := range uint64(draws) {
		c := runLikeTheBench(t, capacity, seed, 10*time.Second)
		assert.LessOrEqual(t, sum(c.ok, 3, 7), int(1.1*20*4), "seed %d: expect the drop followed", seed)
		after = append(after, sum(c.ok, 7, 9))
		total += sum(c.ok, 7, 9)
	}
	t.Logf("successes over the two seconds after the return, per draw: %v of 200", after)
	assert.GreaterOrEqual(t, float64(total)/draws, 0.7*2*100,
		"expect ≥70%% of the capacity over the two seconds after it returns, on average; got %v of 200", after)
}

// TestSendRateClimbsOnAfterARegainedHalving: a halving that stood (the
// last link of the start's chain of cuts, say) is regained at 10% a window
// up to 90% of the capacity it measured, and the additive rise goes on from
// there. It went on from the halved rate instead: the rate stood at 90% of
// the capacity, with nothing throttled, until the line from the halving
// caught up, 3–4 s later (a client of 64 workers on 500/s halved from 602
// to 301/s and used 451–455/s for three seconds; on the bench, 445–470/s
// for three seconds in 3 of 15 runs of ab3dcd4, 96.5% of the capacity used).
// 24 draws like the bench's steady run: each uses 95% of the capacity or
// more in seconds 1–3 (in 200 draws, 4 fall under it, against 62 before).
func TestSendRateClimbsOnAfterARegainedHalving(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 24; seed++ {
		c := runLikeTheBench(t, constantCapacity(500), seed, 4*time.Second)
		assert.GreaterOrEqual(t, sum(c.ok, 1, 4), 3*475, "seed %d: expect ≥95%% of the capacity in seconds 1-3, got %v a second", seed, c.ok)
	}
}

// TestSendRateRegainsASmallCapacityInItsFirstSecond: the table of
// TestSendRateRecoversAtASmallCapacity, judged on the first second after
// the capacity returns, over twelve draws. Two things held the rate at the
// fallen capacity there (a third of the capacity in that second in half
// the draws; 56% of it on average):
//   - a halving made in the fall's last second, which at 20 requests a
//     second cannot gather the answers to be judged and so stands
//     unjudged, held the rate for its whole second of test, however
//     clearly its answers said the overload was over;
//   - a client whose first chain of cuts ran from its start into the fall
//     never had a cut stand before it, and so no capacity to jump back
//     to: what a clean link of that chain (many answers, few throttled)
//     measured was dropped, since only a chain's first trigger counted.
func TestSendRateRegainsASmallCapacityInItsFirstSecond(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(100, capacityStep{2 * time.Second, 20}, capacityStep{7 * time.Second, 100})
	first, mean := firstSecondAfterTheReturn(t, capacity, 12)
	t.Logf("successes in the first second after the return, per draw: %v of 100", first)
	assert.GreaterOrEqual(t, mean, 75.0,
		"expect ≥75%% of the capacity in the first second after it returns, on average; got %v of 100", first)
}

// firstSecondAfterTheReturn runs draws of runLikeTheBench on capacity, which
// returns at 7 s, and gives each draw's successes in the second after
// that, and their mean.
func firstSecondAfterTheReturn(t *testing.T, capacity func(time.Duration) float64, draws int) ([]int, float64) {
	var first []int
	total := 0
	for seed := range uint64(draws) {
		c := runLikeTheBench(t, capacity, seed, 8*time.Second)
		first = append(first, sum(c.ok, 7, 8))
		total += sum(c.ok, 7, 8)
	}
	return first, float64(total) / float64(draws)
}

// TestSendRateKeepsAChainsFirstCleanMeasure: under random throttles a
// chain of cuts chases throttles it cannot help, and a later link, clean
// by its share, measures what the chain cut the client to (62/s after its
// first link's 274/s, in a traced draw). Kept instead of the first, it
// left no capacity to jump back to once the halvings stood, and the
// client stayed at a fraction of its demand (helper-129). 10% at random,
// 8 workers backing off up to 1 s, 64 draws of 20 s: 65.5% of the
// no-limiter successes with the first, 55.3% with the last, 59.0% before
// a chain kept any but its first trigger's.
func TestSendRateKeepsAChainsFirstCleanMeasure(t *testing.T) {
	t.Parallel()
	const draws = 64
	var with, without int
	for seed := range uint64(draws) {
		for _, unlimited := range []bool{true, false} {
			svc := service(constantCapacity(math.Inf(1)), 0.1)
			svc.rng = rand.New(rand.NewPCG(seed, 7))
			sim := newLimiterSim(2*time.Millisecond, svc)
			c := sim.add(newSendRate(SendRateOptions{}, nil), 8, 0)
			c.unlimited, c.backoff = unlimited, time.Second
			sim.run(20 * time.Second)
			if unlimited {
				without += sum(c.ok, 0, 20)
			} else {
				with += sum(c.ok, 0, 20)
			}
		}
	}
	t.Logf("successes with the limiter: %d, without: %d (%.3f)", with, without, float64(with)/float64(without))
	assert.GreaterOrEqual(t, float64(with)/float64(without), 0.64, "expect the chain's first clean measure kept, and jumped back to")
}

// TestSendRateRecoversPastThePeakItKnew: the peak a chain of jumps aims at
// is a capacity measured before the fall, often under the capacity that
// returns (a first cut sized in a flood measured 446 of 500 on the bench;
// a table scaled up while it throttled). A chain that stopped at it
// left the rest to the line, 1/s a window: of a capacity of 450 falling
// to 100 and returning at 500, 437 a second used in the first second
// after the return, averaged over eight draws, two of them under 420.
// The chain's last jump now aims 10% past the peak.
func TestSendRateRecoversPastThePeakItKnew(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(450, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500})
	first, mean := firstSecondAfterTheReturn(t, capacity, 8)
	assert.GreaterOrEqual(t, mean, 0.9*500,
		"expect ≥90%% of the returned capacity in the first second after it, on average; got %v of 500", first)
}

// TestSendRateRepeatedFallsDoNotRatchet: a table of 500/s falling to 100/s
// for 3 s in every 8. A jump past the peak that holds (the service's burst
// lets 10% over its capacity through for a second) raised the peak to its
// rate through the quiet windows, so each fall's chain aimed 10% higher
// than the last: 556, 620, 682, 716, 750, 787/s, each overshoot cut back
// (an outside review, helper-118), and the high phases lost 3.4% of their
// successes against the build without the jump past the peak. Three
// draws; the peak stays within 20% of the capacity at the end of every
// high phase from the fifth on.
func TestSendRateRepeatedFallsDoNotRatchet(t *testing.T) {
	t.Parallel()
	capacity := func(at time.Duration) float64 {
		if s := at % (8 * time.Second); s >= 2*time.Second && s < 5*time.Second {
			return 100
		}
		return 500
	}
	for seed := range uint64(3) {
		sim, c := likeTheBench(t, capacity, seed)
		var peaks []float64
		for k := range 8 {
			sim.run(time.Duration(8*k+10) * time.Second) // the end of a high phase
			peaks = append(peaks, math.Round(c.l.peakLocked(sim.now)))
		}
		for k, p := range peaks[4:] {
			assert.LessOrEqual(t, p, 1.2*500, "seed %d: expect no climb from fall to fall, got the peak at phase %d of %v", seed, k+5, peaks)
		}
		ok := 0
		for k := range 8 {
			ok += sum(c.ok, 8*k+5, 8*k+10)
		}
		assert.GreaterOrEqual(t, ok, 18500, "seed %d: expect the high phases' capacity used (20,000 at most)", seed)
	}
}

// TestSendRateAChainEndsWhenItsNextLinkDoesNotCome: a chain of jumps back
// up that reaches its aim while the client sends less than its rate (demand
// fell: 6 workers at 20 ms round trips) waits for its next link. It waited
// for good: when demand came back 30 s later, the chain went on from where
// it was, toward an aim that had not aged (a jump past the peak, 469 ->
// 514/s, at a rate well above a third of the aged peak; helper-118). A
// chain whose next link does not come within the gap between jumps and a
// window is over.
func TestSendRateAChainEndsWhenItsNextLinkDoesNotCome(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(450, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 500}, capacityStep{37 * time.Second, 450})
	for seed := range uint64(4) {
		sim := newLimiterSim(20*time.Millisecond, benchService(capacity, seed))
		lim := newSendRate(SendRateOptions{}, nil)
		var jumps []string
		lim.trace = func(format string, args ...any) {
			if line := fmt.Sprintf(format, args...); strings.Contains(line, "jump") && sim.now.Sub(t0) >= 37*time.Second {
				jumps = append(jumps, line)
			}
		}
		crowd := &simClient{l: lim, workers: 64, backoff: time.Second, stop: 6500 * time.Millisecond}
		few := &simClient{l: lim, workers: 6}
		sim.clients = append(sim.clients, crowd, few)
		for range crowd.workers {
			sim.ask(crowd, sim.now)
		}
		for range few.workers {
			sim.ask(few, sim.now)
		}
		sim.run(37 * time.Second)
		require.GreaterOrEqual(t, jumpRatio*lim.currentRate(), lim.peakLocked(sim.now), "seed %d: the setting: no fall to jump back from", seed)
		back := sim.add(lim, 64, 0)
		back.backoff = time.Second
		sim.run(39 * time.Second)
		assert.Empty(t, jumps, "seed %d: expect no jump when demand returns", seed)
	}
}

// TestSendRateAFailedJumpPastThePeakLeavesThePeak: a jump past the peak
// that fails measured nothing above the peak. It set the peak to the
// geometric mean of its two rates, as a failed link of a chain does, and
// made it fresh: a peak of 500 aged to 315 became 524 (helper-118).
func TestSendRateAFailedJumpPastThePeakLeavesThePeak(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Minute)
	l := newSendRate(SendRateOptions{}, nil)
	l.setRateLocked(500)
	l.peak, l.peakAt, l.known = 500, now.Add(-20*time.Second), 500
	thr, ok := excessLLR(0)
	l.jump = jumpTest{
		at: now.Add(-30 * time.Millisecond), countFrom: now.Add(-28 * time.Millisecond), committed: now.Add(-20 * time.Millisecond),
		from: 500, to: 550, aim: 550, probe: jumpProbe, chained: true, past: true, llrThr: thr, llrOK: ok,
	}
	aged := l.peakLocked(now)
	l.judgeJumpLocked(now, true)
	require.Equal(t, 500.0, l.currentRate(), "expect the jump failed at its first throttle, back to its rate")
	assert.InDelta(t, aged, l.peakLocked(now), 1e-9, "expect the peak as it was")
	assert.Zero(t, l.chain.aim, "expect the chain over")
}

// TestSendRateAJumpFailsWeaklyOnlyAfterItsRateWasTaken: a jump of 773 to
// 3091/s whose single throttle came 8 ms after the first answer to a
// request sent at 3091/s is a burst running dry, not a throttle at random:
// it goes back all the way. A weak failure counted 20 answers from the
// probe on, 12 ms at such rates, and went back halfway, to 1.5 times a
// capacity that had not returned (helper-134). One whose single throttle
// came weakSpan after that first answer goes back halfway.
func TestSendRateAJumpFailsWeaklyOnlyAfterItsRateWasTaken(t *testing.T) {
	t.Parallel()
	const rtt = 4 * time.Millisecond
	for _, tc := range []struct {
		name string
		span time.Duration // from the first answer at the jump's rate to its throttle
		back float64
	}{
		{"burst", 8 * time.Millisecond, 773},
		{"taken", weakSpan, math.Sqrt(773 * 3091)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			committed := t0.Add(time.Minute)
			l := newSendRate(SendRateOptions{}, nil)
			l.rtt = rtt
			l.peak, l.peakAt = 5000, committed.Add(-2*time.Second)
			l.setRateLocked(3091)
			thr, ok := excessLLR(0.01)
			l.jump = jumpTest{
				at: committed.Add(-rtt), countFrom: committed.Add(-rtt / 2), committed: committed,
				from: 773, to: 3091, aim: 5000, probe: jumpProbe, llrThr: thr, llrOK: ok,
			}
			l.judgeJumpLocked(committed.Add(rtt/2), false) // the probe's
			const answers = 25
			for i := range answers {
				l.judgeJumpLocked(committed.Add(rtt+tc.span*time.Duration(i)/answers), false)
			}
			require.True(t, l.jump.active(), "the setting: the jump not yet judged")
			l.judgeJumpLocked(committed.Add(rtt+tc.span), true)
			assert.False(t, l.jump.active(), "expect the jump failed at its throttle")
			assert.InDelta(t, tc.back, l.currentRate(), 1e-9)
		})
	}
}

// TestSendRateAnUndoneHalvingNotesWhatTheServiceTook: an undone halving
// notes as the peak what its trigger's successes say the service took,
// over the share the background throttles, not the capacity the cut sized
// from what was sent: on 500/s with 5% at random, that noted more than
// 500/s after one undo in nine, 649/s at most (helper-134).
func TestSendRateAnUndoneHalvingNotesWhatTheServiceTook(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Minute)
	cut := now.Add(-time.Second)
	l := newSendRate(SendRateOptions{}, nil)
	l.background, l.bSamples = 0.05, backgroundAnswers
	l.setRateLocked(300)
	l.test = cutTest{
		at: cut, countFrom: cut.Add(4 * time.Millisecond), from: 600, rate: 300, prevRate: 600, links: 2,
		decisive: true, capacity: 650,
		trigger: answers{start: cut.Add(-200 * time.Millisecond), ok: 90, thr: 10},
		after:   answers{ok: 285, thr: 15},
	}
	l.undoLocked(now, 0, dropZ)
	require.Equal(t, 600.0, l.currentRate(), "the setting: the halving undone")
	assert.InDelta(t, 90/0.2/0.95, l.peakLocked(now), 1e-6, "expect the peak what the trigger's 90 successes in 200 ms took at a background of 5%%")
}

// TestSendRateKnowsARaisedCapacityWithoutACut: 450/s falling to 100/s and
// returning at 2000/s (a table scaled up while it throttled), for a client
// whose demand, some 1,250/s, stays below it: no cut comes. The cap a held
// jump past the peak put on the peak (see peakCap) lasted until a cut, so
// for 13 s of unthrottled sending the peak stayed at the old 450, and
// after the next fall the client jumped back only that far: 440-471 a
// second in the first second after the return against some 1,160 served
// before the fall (helper-119). Three draws.
func TestSendRateKnowsARaisedCapacityWithoutACut(t *testing.T) {
	t.Parallel()
	capacity := phasedCapacity(450, capacityStep{2 * time.Second, 100}, capacityStep{7 * time.Second, 2000},
		capacityStep{20 * time.Second, 100}, capacityStep{25 * time.Second, 2000})
	for seed := range uint64(3) {
		sim := newLimiterSim(4*time.Millisecond, benchService(capacity, seed))
		l := newSendRate(SendRateOptions{}, nil)
		c := sim.add(l, 5, 0)
		sim.run(20 * time.Second)
		served := float64(sum(c.ok, 15, 20)) / 5
		assert.GreaterOrEqual(t, l.peakLocked(sim.now), 0.8*served, "seed %d: expect the peak to follow what was served, %.0f/s, for 13 s without a cut", seed, served)
		sim.run(27 * time.Second)
		assert.GreaterOrEqual(t, float64(sum(c.ok, 25, 26)), 0.7*served, "seed %d: expect the demand served again in the first second after the return", seed)
	}
}

// TestSendRateAHalvingThatEndedEveryThrottleStands: a client at 257/s with
// 8 of 257 answers throttled halves, and the 131 answers of the halving's
// second are all successes, as they would be if the throttles were its
// own. Shares count as at least 2% from 0 in the variance, so the fall is
// 1.8 deviations, under helpedZ: the halving was undone, back to 257, and
// 2% became a background excused for a hold (helper-119, from a trace of
// two clients sharing a capacity). The same on the 20-99 answers of a
// halving too slow to judge: 7 of 48 throttled at 47/s, then none of 24 at
// 23/s (1.8 deviations) was taken back to 47/s on a capacity of 40/s, in
// all 61 take-backs of 16 simulated draws of 8 workers (helper-132).
func TestSendRateAHalvingThatEndedEveryThrottleStands(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rate    float64 // before the halving
		trigger int     // the answers the halving was sized from
		thr     int     // throttled among them
		cleared int     // the answers after it, none throttled
	}{
		"judged":            {rate: 257, trigger: 257, thr: 8, cleared: 131},
		"too slow to judge": {rate: 47, trigger: 48, thr: 7, cleared: 24},
	} {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(20 * time.Second)
			l := newSendRate(SendRateOptions{}, nil)
			halved := tc.rate / 2
			l.setRateLocked(halved)
			trigger := answers{start: now.Add(-1100 * time.Millisecond), ok: tc.trigger - tc.thr, thr: tc.thr}
			accepted := float64(tc.trigger - tc.thr)
			l.test = cutTest{
				at: now.Add(-time.Second), countFrom: now.Add(-998 * time.Millisecond), from: tc.rate, rate: halved, prevRate: tc.rate, sent: tc.rate,
				links: 2, decisive: true, capacity: accepted, firstCapacity: accepted, trigger: trigger, first: trigger,
				after: answers{start: now.Add(-998 * time.Millisecond), ok: tc.cleared},
			}
			l.judgeLocked(now)
			assert.Equal(t, halved, l.currentRate(), "expect the halving to stand")
			assert.Zero(t, l.background, "expect no background excused")
		})
	}
}

// TestSendRateDoesNotStallOverALargeCapacity: 2000/s falling to 400/s for
// 3 s and back, the bench's client. The jump past the peak (2071 -> 2278/s)
// held on the proxy's burst, whose emptying then set off a cut sized on 62
// answers: kept at 85% of the 2316/s sent, 98% of the capacity, and the
// line crept on to 2052/s, where 2.5% of each window's answers were
// throttled: too many for a window to count as quiet (and let the rate
// rise, or fall), too few for the detection to alarm. It stayed there,
// 52 throttles a second, for as long as the capacity held (helper-120):
// in 19 draws of 64, 0.87% of all answers over 10-25 s throttled. Without
// the 85% floor after a held jump past the peak, 6 draws of 64 still stall
// (helper-121: the line climbs back into the same band, or a cut on many
// answers lands there), 0.44% throttled; without the jump past the peak
// (c733393), none, 0.20%. The band is older than the jump and open (see
// BENCHMARKS.md section 4, "A jump past the peak"); this holds the share
// where the fix left it, over the first 16 draws (5 of them stalled
// before the fix, none after; the simulation is too slow under -race for
// all 64).
func TestSendRateDoesNotStallOverALargeCapacity(t *testing.T) {
	t.Parallel()
	const capacity = 2000
	phases := phasedCapacity(capacity, capacityStep{2 * time.Second, capacity / 5}, capacityStep{5 * time.Second, capacity})
	thr, answered := 0, 0
	for seed := range uint64(16) {
		c := runLikeTheBench(t, phases, seed, 25*time.Second)
		thr += sum(c.thr, 10, 25)
		answered += sum(c.thr, 10, 25) + sum(c.ok, 10, 25)
	}
	assert.LessOrEqual(t, float64(thr), 0.006*float64(answered), "expect at most 0.6%% of the answers over 10-25 s throttled, over 16 draws; got %d of %d", thr, answered)
}

// TestSendRateFollowsASwingingCapacity: a capacity that swings between
// 500/s and 100/s every second (or half second), as the throttle benchmark's
// swing scenario, with its proxy's bucket of 0.1 s of the current capacity
// and workers that back off up to 1 s after a throttle. Every stand made in
// a high phase was cut by the next low phase before it counted as the
// peak, so the peak was only what the windows accepted at the rate, and the
// limiter settled near the low level: 51% of the mean capacity with one of
// four seeds at 1 s, 47-48% with three at 0.5 s (an outside evaluation
// measured 47% with throttlebench).
func TestSendRateFollowsASwingingCapacity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		half    time.Duration
		min     float64 // of the mean capacity, each seed
		meanMin float64 // over the seeds
	}{{time.Second, 0.85, 0.9}, {500 * time.Millisecond, 0.5, 0.7}} {
		t.Run(fmt.Sprintf("every %v", tc.half), func(t *testing.T) {
			capacity := func(at time.Duration) float64 {
				if (at/tc.half)%2 == 0 {
					return 500
				}
				return 100
			}
			const seeds = 4
			var shares []float64
			for seed := range uint64(seeds) {
				c := runLikeTheBench(t, capacity, seed, 10*time.Second)
				shares = append(shares, float64(sum(c.ok, 0, 10))/(10*300))
			}
			t.Logf("share of the mean capacity per seed: %.2f", shares)
			var mean float64
			for _, s := range shares {
				assert.GreaterOrEqual(t, s, tc.min, "expect every seed to use at least %.0f%% of the mean capacity: %.2f", 100*tc.min, shares)
				mean += s / seeds
			}
			assert.GreaterOrEqual(t, mean, tc.meanMin, "expect at least %.0f%% of the mean capacity over the seeds: %.2f", 100*tc.meanMin, shares)
		})
	}
}

// TestSendRateAfterABurstFromUnlimitedKnowsAFiniteCapacity: a cut from
// unlimited sized on a burst of throttles (few answers, nothing throttled
// after it) stands, and regains the rate before it (see regrowTo); that
// rate was unlimited, and the capacity the limiter took as known became
// +Inf (an outside trace of throttlebench), so that its rises were no
// longer a line but twice whatever a window accepted.
func TestSendRateAfterABurstFromUnlimitedKnowsAFiniteCapacity(t *testing.T) {
	t.Parallel()
	l := newSendRate(SendRateOptions{}, nil)
	if testing.Verbose() {
		l.trace = t.Logf
	}
	now := t0
	answer := func(throttled bool) {
		now = now.Add(time.Millisecond)
		reserveAt(l, now)
		observeAt(l, now, throttled, time.Millisecond)
	}
	for range 200 {
		answer(false)
	}
	for range 10 {
		answer(true) // a burst: the CUSUM alarms
	}
	for l.cutCount() == 0 {
		answer(false) // until the episode holds enough answers to cut on
		require.Less(t, now.Sub(t0), time.Second, "expect a cut")
	}
	require.False(t, math.IsInf(l.currentRate(), 1), "expect a finite rate after the cut")
	for range 200 {
		answer(false) // nothing throttled after the cut: it stands
	}
	l.mu.Lock()
	known, standing := l.known, !l.test.active()
	l.mu.Unlock()
	require.True(t, standing, "expect the cut judged")
	assert.False(t, math.IsInf(known, 1), "expect a finite capacity known after the stand")
	assert.Positive(t, known, "expect the capacity the cut measured known")
}

// TestSendRateFindsARaisedCapacity: a table whose capacity is raised (by
// autoscaling, say) above any the limiter measured is used within seconds,
// not only by the additive rise (1/s a window at 100/s: some 40 s to 500);
// and the climb costs few throttles.
func TestSendRateFindsARaisedCapacity(t *testing.T) {
	t.Parallel()
	sim := newLimiterSim(2*time.Millisecond, service(stepCapacity(5*time.Second, 100, 500), 0))
	c := sim.add(tracedSendRate(t, SendRateOptions{}), 64, 0)
	sim.run(15 * time.Second)
	ok := sum(c.ok, 10, 15)
	assert.GreaterOrEqual(t, float64(ok)/5, 0.9*500, "expect ≥90%% of the raised capacity used 5-10 s after it rose, got %d/s", ok/5)
	thr, sent := sum(c.thr, 5, 15), sum(c.sent, 5, 15)
	assert.LessOrEqual(t, float64(thr), 0.05*float64(sent), "expect ≤5%% of the sends throttled after the rise, got %d of %d", thr, sent)
}

// TestSendRateRecoversUnderRandomThrottles: a fall deeper than a jump's
// fourfold step is regained by a chain of jumps; a throttle at random (1%
// of the requests here) must not end the chain, whose steps each carry
// hundreds of answers. 24 runs, differing only in the service's draws: the
// four seconds after the capacity returns average at least 85% of it. (The
// chain's first jump still fails on one throttle: in a draw where no jump
// is lucky the capacity comes back seconds late, which moved the mean of
// twelve draws by 3% when a change elsewhere shifted the draws; over 96
// paired draws that change moved it by 1%.)
func TestSendRateRecoversUnderRandomThrottles(t *testing.T) {
	t.Parallel()
	capacity := func(at time.Duration) float64 {
		if at >= 2*time.Second && at < 6*time.Second {
			return 150
		}
		return 1000
	}
	const draws = 24
	total := 0
	for seed := range uint64(draws) {
		svc := service(capacity, 0.01)
		svc.rng = rand.New(rand.NewPCG(seed, 2))
		sim := newLimiterSim(2*time.Millisecond, svc)
		c := sim.add(newSendRate(SendRateOptions{}, nil), 64, 0)
		sim.run(10 * time.Second)
		total += sum(c.ok, 6, 10)
	}
	perSecond := float64(total) / draws / 4
	assert.GreaterOrEqual(t, perSecond, 0.85*1000, "expect ≥85%% of the capacity in the 4 s after it returns, got %.0f/s", perSecond)
}

// TestSendRateForgetsWhenIdle: an idle minute brings the limiter back to its
// initial rate, and a lane with such a limiter can be forgotten.
func TestSendRateForgetsWhenIdle(t *testing.T) {
	t.Parallel()
	sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(200), 0))
	l := newSendRate(SendRateOptions{}, nil)
	c := sim.add(l, 16, 0)
	c.stop = 3 * time.Second
	sim.run(3 * time.Second)
	require.False(t, math.IsInf(l.currentRate(), 1), "expect a limit after throttles")
	require.False(t, forgettableAt(l, sim.now))
	later := sim.now.Add(2 * time.Minute)
	assert.True(t, forgettableAt(l, later), "expect nothing left to remember after an idle spell")
	placeAt(l, later)
	assert.True(t, math.IsInf(l.currentRate(), 1), "expect the initial (unlimited) rate after an idle spell")
}

// TestSendRateWaitsForThrottlesAnsweredLate: a service that answers
// throttles in 200 ms and successes in 2 ms (an outside review's), 64
// workers on 500/s. The round trip the lane reports is learnt mostly from
// successes, so a cut's test counted from 2 ms after the cut, the answers
// to requests sent before it came later, throttled, and were taken for
// the cut's failure: the next cuts followed, and the rate ran a sawtooth
// (the review: 393 successes a second against 510 with throttles answered
// at once, between 300 and 540 a second). The cut's test now waits for
// the throttles' own time (noteThrottleTime). Seconds 1-10, after the
// start's flood: before, 3,852 successes and 875 throttles (280-410 a
// second for four seconds, then a quarter of the answers throttled, the
// cuts' tests having failed); now 4,491 and 82.
func TestSendRateWaitsForThrottlesAnsweredLate(t *testing.T) {
	t.Parallel()
	svc := service(constantCapacity(500), 0)
	svc.throttleLate = 200 * time.Millisecond
	sim := newLimiterSim(2*time.Millisecond, svc)
	l := newSendRate(SendRateOptions{}, nil)
	c := sim.add(l, 64, 0)
	sim.run(10 * time.Second)
	ok, thr := sum(c.ok, 1, 10), sum(c.thr, 1, 10)
	assert.GreaterOrEqual(t, ok, 9*475, "expect at least 95%% of the capacity over seconds 1-10, got %d (%v a second)", ok, c.ok)
	assert.LessOrEqual(t, thr, ok/20, "expect at most one answer in 20 throttled, got %d throttles (%v a second)", thr, c.thr)
}

// TestSendRateForgetsARateATrickleNeverUsed: a client cut on a 200/s
// table, then a trickle of one call every 20 s (a Lambda function's
// occasional invocation): the calls use none of the rate, and after a
// minute of that the limiter starts over, as after a minute with no calls
// at all. Kept while any call came within a minute, the cut rate paced
// the next burst at about 200/s however long the trickle ran, on a table
// that meanwhile had saved burst capacity or was scaled up (an outside
// review: 3,000 writes took 6.5 s against 0.35 s without the limiter).
// A trickle whose calls are throttled keeps the rate: the table still
// says it is too fast.
func TestSendRateForgetsARateATrickleNeverUsed(t *testing.T) {
	t.Parallel()
	for _, throttled := range []bool{false, true} {
		t.Run(fmt.Sprintf("trickle throttled %v", throttled), func(t *testing.T) {
			sim := newLimiterSim(2*time.Millisecond, service(constantCapacity(200), 0))
			l := newSendRate(SendRateOptions{}, nil)
			c := sim.add(l, 16, 0)
			c.stop = 3 * time.Second
			sim.run(3 * time.Second)
			cut := l.currentRate()
			require.False(t, math.IsInf(cut, 1), "expect a limit after throttles")
			at := sim.now
			for range 6 { // two minutes
				at = at.Add(20 * time.Second)
				placeAt(l, at)
				observeAt(l, at.Add(2*time.Millisecond), throttled, 2*time.Millisecond)
			}
			at = at.Add(time.Second)
			placeAt(l, at)
			if throttled {
				assert.False(t, math.IsInf(l.currentRate(), 1), "expect a throttled trickle to keep a limit")
			} else {
				assert.True(t, math.IsInf(l.currentRate(), 1), "expect the initial (unlimited) rate after a minute of calls that used none of the cut rate %.0f/s, got %.0f/s", cut, l.currentRate())
			}
		})
	}
}

// TestSendRateKeepsARateItsSteadyDemandDoesNotBind: a client whose demand
// (16 workers at 20 ms round trips, some 800/s) sits below its learnt rate
// on a 1,000/s table sends just under 90% of it, too little to raise it.
// Counted unused at that, the rate was forgotten every minute; with an
// InitialRate of 100 the client then fell to 109-339 a second for three
// seconds each minute (helper-206). It keeps its rate now, with either
// start.
func TestSendRateKeepsARateItsSteadyDemandDoesNotBind(t *testing.T) {
	t.Parallel()
	for _, initial := range []float64{100, 0} {
		t.Run(fmt.Sprintf("InitialRate %v", initial), func(t *testing.T) {
			sim := newLimiterSim(20*time.Millisecond, service(constantCapacity(1000), 0))
			l := newSendRate(SendRateOptions{InitialRate: initial}, nil)
			c := sim.add(l, 16, 0)
			sim.run(200 * time.Second)
			for s := 20; s < 200; s++ {
				assert.GreaterOrEqual(t, c.sent[s], 600, "expect second %d near the demand, got %d", s, c.sent[s])
			}
		})
	}
}

// TestSendRateKeepsItsRateThroughALongDemandDrop: as
// TestSendRateKeepsItsRateThroughADemandDrop, but demand falls to 80% of
// the capacity for 70 s: the rate is kept (it was forgotten after a
// minute, and the surge met an unlimited limiter: helper-206).
func TestSendRateKeepsItsRateThroughALongDemandDrop(t *testing.T) {
	t.Parallel()
	sim := newLimiterSim(20*time.Millisecond, service(constantCapacity(500), 0))
	l := newSendRate(SendRateOptions{}, nil)
	sim.add(l, 56, 0).stop = 5 * time.Second
	sim.add(l, 8, 0) // 400/s, 80% of the capacity
	sim.run(5 * time.Second)
	settled := l.currentRate()
	require.False(t, math.IsInf(settled, 1), "expect a limit after the start's throttles")
	sim.run(75 * time.Second)
	assert.False(t, math.IsInf(l.currentRate(), 1), "expect the rate kept through 70 s of demand at 80%%: %.0f before", settled)
}

// TestSendRateKeepsItsRateThroughADemandDrop: a client of 64 workers at
// round trips of 20 ms on 500/s settles on the capacity; then all but a few
// stop for 15 s, sending a tenth to a half of it, and as many return at once.
// While demand is low the rate neither grows (nothing tests a rate above
// what is sent) nor is forgotten (the client is not idle): the surge meets
// the capacity learnt, not a flood.
func TestSendRateKeepsItsRateThroughADemandDrop(t *testing.T) {
	t.Parallel()
	for _, keep := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("%d of 64 keep sending", keep), func(t *testing.T) {
			sim := newLimiterSim(20*time.Millisecond, service(constantCapacity(500), 0))
			l := tracedSendRate(t, SendRateOptions{})
			sim.add(l, 64-keep, 0).stop = 5 * time.Second
			sim.add(l, keep, 0)
			sim.run(5 * time.Second)
			settled := l.currentRate()
			require.InDelta(t, 500, settled, 0.1*500, "expect the rate settled near the capacity before the drop")
			sim.run(20 * time.Second)
			assert.InDelta(t, settled, l.currentRate(), 0.05*settled, "expect the rate kept through the drop")
			surge := sim.add(l, 64-keep, 0)
			sim.run(22 * time.Second)
			var ok, thr int
			for _, c := range sim.clients {
				ok, thr = ok+sum(c.ok, 20, 22), thr+sum(c.thr, 20, 22)
			}
			assert.GreaterOrEqual(t, ok, 2*450, "expect ≥90%% of the capacity over the two seconds after the surge, got %d", ok)
			assert.LessOrEqual(t, float64(thr)/float64(ok+thr), 0.05, "expect ≤5%% throttled after the surge, got %d of %d", thr, ok+thr)
			assert.NotZero(t, sum(surge.ok, 20, 22))
		})
	}
}

func TestSendRateZeroValueIsUnlimited(t *testing.T) {
	t.Parallel()
	var l sendRate
	assert.True(t, math.IsInf(l.currentRate(), 1))
	assert.Equal(t, time.Duration(0), reserve(&l, t0))
	assert.True(t, forgettableAt(&l, t0))
}

func TestSendRateOptionsValidated(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]SendRateOptions{
		"negative initial":      {InitialRate: -1},
		"NaN min":               {MinRate: math.NaN()},
		"max below min":         {MinRate: 10, MaxRate: 5},
		"max below default min": {MaxRate: 0.5},
		// A floor of a request every 10^324 s: every attempt, the first
		// included, waited 2,562,047 hours (an outside review).
		"tiny min":                         {MinRate: 5e-324, InitialRate: 5e-324},
		"min below a request every 1000 s": {MinRate: 0.0009},
	} {
		t.Run(name, func(t *testing.T) {
			var oe *OptionsError
			assert.ErrorAs(t, o.validate(), &oe)
		})
	}
	assert.NoError(t, SendRateOptions{MinRate: 0.1, MaxRate: 0.5}.validate(), "expect a slow ceiling valid above a slower floor")
	assert.NoError(t, SendRateOptions{MinRate: minMinRate, InitialRate: 5e-324}.validate(), "expect the slowest floor valid, and a tiny InitialRate clamped to it")
}

// TestTheLimiterReadsTheMonotonicClockByDefault: with Options.Clock left to
// time.Now (or set to it), the limiter reads the monotonic clock alone,
// half the cost (see sendRate.clock); a clock of the caller's, wrapping
// time.Now or not, is read as given.
func TestTheLimiterReadsTheMonotonicClockByDefault(t *testing.T) {
	mine := func() time.Time { return time.Now() }
	for name, tc := range map[string]struct {
		clock func() time.Time
		own   bool
	}{
		"default":    {nil, false},
		"time.Now":   {time.Now, false},
		"a caller's": {mine, true},
	} {
		t.Run(name, func(t *testing.T) {
			r := New(func(o *Options) {
				if tc.clock != nil {
					o.Clock = tc.clock
				}
				o.SendRate = &SendRateOptions{}
			})
			require.NoError(t, r.Err())
			assert.Equal(t, tc.own, r.lanes.main.sender.clock != nil)
		})
	}
}
