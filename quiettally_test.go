package jitterretry

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// movableClock is a clock safe for concurrent use that reads t0 plus what
// it was moved by.
type movableClock struct{ offset atomic.Int64 }

func (c *movableClock) now() time.Time         { return t0.Add(time.Duration(c.offset.Load())) }
func (c *movableClock) moveTo(d time.Duration) { c.offset.Store(int64(d)) }

// windowOf returns l's current window with what its quiet tally counted
// and the lock has not yet taken in.
func windowOf(l *sendRate) answers {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.win
	w.sent += float64(l.quiet.sent.Load())
	w.ok += int(l.quiet.ok.Load())
	return w
}

// TestQuietTallyCountsEverySendAndAnswer: goroutines sending and answered
// at once through an unthrottled limiter, within one window, are counted
// in it once each, without the lock or with it.
func TestQuietTallyCountsEverySendAndAnswer(t *testing.T) {
	var clock movableClock
	l := newSendRate(SendRateOptions{}, clock.now)
	observeAt(l, t0, false, time.Millisecond) // the first reading opens the tally
	require.True(t, l.quiet.sendsOpen() && l.quiet.oksOpen(), "expect an unthrottled limiter to count sends and answers without its lock")
	const goroutines, each = 4, 5_000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, wait, _, _ := l.reserve(nil, false)
				if wait != 0 {
					t.Errorf("expect an unlimited limiter to send at once, got a wait of %v", wait)
					return
				}
				l.observe(false, time.Millisecond)
			}
		}()
	}
	wg.Wait()
	clock.moveTo(sendWindow / 2)
	require.False(t, l.holdsBack()) // a reading under the lock takes the counts in
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, float64(goroutines*each), l.win.sent, "sends in the window")
	assert.Equal(t, goroutines*each+1, l.win.ok, "answers in the window")
}

// TestQuietTallyKeepsWhatASuccessUnderTheLockSets: a success the tally
// counts sets, once taken in, what one under the lock sets: the time last
// seen, from which an idle minute starts the limiter over (taken for the
// time the tally opened, up to a window early: helper-225), and the round
// trip, which sizes and times a jump's probe (left at the last locked
// answer's, a jump counted its probe from an answer sent before it).
func TestQuietTallyKeepsWhatASuccessUnderTheLockSets(t *testing.T) {
	var clock movableClock
	l := newSendRate(SendRateOptions{}, clock.now)
	observeAt(l, t0, false, time.Millisecond)
	clock.moveTo(sendWindow / 2)
	l.observe(false, 2*time.Millisecond)
	clock.moveTo(sendWindow * 9 / 10)
	l.observe(false, 300*time.Millisecond)
	require.Equal(t, int64(2), l.quiet.ok.Load(), "expect both successes counted by the tally")
	clock.moveTo(sendWindow * 95 / 100)
	l.holdsBack() // a reading under the lock takes them in
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, t0.Add(sendWindow*9/10), l.lastSeen, "expect the last success's time")
	assert.Equal(t, 300*time.Millisecond, l.rtt, "expect the last success's round trip")
	l.mu.Unlock()

	// A success that reports no round trip yet (no attempt timed) sets
	// the least, as under the lock (helper-226).
	l.observe(false, 0)
	clock.moveTo(sendWindow * 96 / 100)
	l.holdsBack()
	l.mu.Lock()
	assert.Equal(t, minRTT, l.rtt, "expect the least round trip for a success that reported none")
}

// TestQuietTallyPutsNoTimeLastSeenAheadOfTheLimiters: a count read ahead
// of the limiter's next reading under the lock (a clock that jitters
// back) is seen at that reading, not in the limiter's future, where it
// would put off an idle start-over by as much (helper-226).
func TestQuietTallyPutsNoTimeLastSeenAheadOfTheLimiters(t *testing.T) {
	var clock movableClock
	l := newSendRate(SendRateOptions{}, clock.now)
	clock.moveTo(sendWindow)
	observeAt(l, t0.Add(sendWindow), false, time.Millisecond) // the tally opens until 2 windows
	clock.moveTo(sendWindow * 3 / 2)
	l.observe(false, time.Millisecond)
	require.Equal(t, int64(1), l.quiet.ok.Load(), "expect the success counted by the tally")
	clock.moveTo(sendWindow * 6 / 5) // back, within the hold: the lock reads its own time on
	l.holdsBack()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.False(t, l.lastSeen.After(l.syncedAt), "expect no time last seen after the limiter's own, got %v after %v", l.lastSeen.Sub(t0), l.syncedAt.Sub(t0))
}

// TestQuietTallyLeavesToTheLockWhatTheControlActsOn: a send or a success
// that the control would act on, or that comes when it would act on the
// clock, goes through the lock; each case fails if the tally counted it.
func TestQuietTallyLeavesToTheLockWhatTheControlActsOn(t *testing.T) {
	newLimiter := func(o SendRateOptions) (*sendRate, *movableClock) {
		clock := &movableClock{}
		l := newSendRate(o, clock.now)
		observeAt(l, t0, false, time.Millisecond)
		return l, clock
	}
	t.Run("a success in an episode of throttles", func(t *testing.T) {
		l, _ := newLimiter(SendRateOptions{})
		for range 3 {
			l.observe(true, time.Millisecond)
		}
		require.Positive(t, l.cusum, "expect throttles to start an episode")
		before := l.cusum
		l.observe(false, time.Millisecond)
		assert.Less(t, l.cusum, before, "expect the success to count against the episode")
	})
	t.Run("a success while a cut is under test", func(t *testing.T) {
		l, clock := newLimiter(SendRateOptions{})
		for i := 0; !l.test.active(); i++ {
			require.Less(t, i, 1_000, "expect throttles alone to cut")
			l.observe(true, time.Millisecond)
		}
		clock.moveTo(l.test.countFrom.Sub(t0)) // where the test starts counting
		ok := l.test.after.ok
		l.observe(false, time.Millisecond)
		require.True(t, l.test.active())
		assert.Equal(t, ok+1, l.test.after.ok, "expect the cut's test to count the success")
	})
	t.Run("a send at a rate", func(t *testing.T) {
		l, _ := newLimiter(SendRateOptions{InitialRate: 10})
		var waits []time.Duration
		for range 3 {
			_, wait, _, _ := l.reserve(nil, false)
			waits = append(waits, wait)
		}
		assert.Positive(t, waits[2], "expect the third send in an instant at 10 a second to wait, got %v", waits)
	})
	t.Run("an expected retry", func(t *testing.T) {
		l, _ := newLimiter(SendRateOptions{})
		done := make(chan struct{})
		l.expectRetry(done, 0, failedAttempt{})
		p, _, _, _ := l.reserve(done, false)
		assert.True(t, p.retry, "expect the retry's place in the retries' line")
		assert.Empty(t, l.expected.ops, "expect the retry's expectation claimed")
	})
	t.Run("an expected retry that never came", func(t *testing.T) {
		// Its operation ended during the backoff: once its entry lapsed,
		// sends are counted here again. On the monotonic clock, as the
		// entries are: a second of real time.
		l := newSendRate(SendRateOptions{}, nil)
		l.reserve(nil, false) // the first reading sets the epoch
		l.expectRetry(make(chan struct{}), 0, failedAttempt{})
		l.reserve(nil, false)
		require.False(t, l.quiet.sendsOpen(), "expect sends through the lock while a retry is expected")
		time.Sleep(expectedGrace + 50*time.Millisecond)
		l.reserve(nil, false)
		assert.True(t, l.quiet.sendsOpen(), "expect the tally open again once the retry's entry lapsed")
	})
	t.Run("a send past the window's end", func(t *testing.T) {
		l, clock := newLimiter(SendRateOptions{})
		for range 5 {
			l.reserve(nil, false)
		}
		clock.moveTo(sendWindow + time.Millisecond)
		l.reserve(nil, false)
		l.mu.Lock()
		defer l.mu.Unlock()
		assert.Equal(t, 5.0, l.prev.sent, "expect the window closed by the send after its end, with the sends before it")
		assert.Equal(t, 1.0, l.win.sent+float64(l.quiet.sent.Load()), "expect the send after the end in the next window")
	})
	t.Run("a clock stepped back", func(t *testing.T) {
		l, clock := newLimiter(SendRateOptions{})
		clock.moveTo(sendWindow / 2)
		l.holdsBack() // a reading under the lock: the tally counts from it on
		clock.moveTo(sendWindow / 4)
		assert.False(t, l.quiet.countSend(l.sinceEpoch), "expect a reading before the last one under the lock left to the lock")
	})
	t.Run("an answer after a minute in which the rate went unused", func(t *testing.T) {
		l, clock := newLimiter(SendRateOptions{})
		l.mu.Lock()
		l.setRateLocked(100) // cut, below InitialRate (unlimited)
		l.lastUsed = t0
		l.unlock()
		clock.moveTo(idleReset - sendWindow/2)
		l.observe(false, time.Millisecond) // under the lock: a window opens, and the tally until the rate's minute is up
		clock.moveTo(idleReset + time.Millisecond)
		l.observe(false, time.Millisecond)
		assert.Equal(t, math.Inf(1), l.q.rate, "expect the answer after the minute to start the limiter over at InitialRate, under the lock")
	})
	t.Run("an answer after an idle minute", func(t *testing.T) {
		l, clock := newLimiter(SendRateOptions{})
		clock.moveTo(idleReset - sendWindow/2)
		l.inUse() // a reading under the lock, no send nor answer: a window opens
		clock.moveTo(idleReset + time.Millisecond)
		l.observe(false, time.Millisecond)
		assert.Equal(t, t0.Add(idleReset+time.Millisecond), l.lastSeen, "expect the answer that ends an idle minute to start the limiter over, under the lock")
	})
}

// TestQuietTallyPacesSendsAsTheQueueDoes: a caller of a paced limiter
// whom nobody waits ahead of is sent when the queue would send it: at once
// when the last send is a turn or more ago, else a turn after it, whether
// the tally or the lock takes the turn; and every send is one turn of the
// queue.
func TestQuietTallyPacesSendsAsTheQueueDoes(t *testing.T) {
	const turn = 10 * time.Millisecond
	var clock movableClock
	l := newSendRate(SendRateOptions{InitialRate: 100, MaxRate: 100}, clock.now)
	observeAt(l, t0, false, time.Millisecond) // the first reading opens the tally
	rng := rand.New(rand.NewPCG(1, 2))
	at, lastSent, counted := time.Duration(0), -turn, 0
	const sends = 400
	for i := range sends {
		at += time.Duration(rng.Int64N(int64(5 * turn / 2)))
		clock.moveTo(at)
		p, wait, _, _ := l.reserve(nil, false)
		if p.counted {
			counted++
		}
		if wait > 0 {
			at += wait // the caller sleeps, and asks again
			clock.moveTo(at)
			wait, _ = l.delay(p)
			require.Zero(t, wait, "send %d: expect a place due once its wait is over", i)
		}
		want := max(lastSent+turn, at-wait)
		require.InDelta(t, want, at, float64(time.Microsecond), "send %d: expect it sent at once, or a turn after the last", i)
		lastSent = at
	}
	assert.Greater(t, counted, sends/4, "expect most sends due at once counted by the tally")
	assert.Less(t, counted, sends, "expect the sends that waited to wait in the queue")
	l.holdsBack() // a reading under the lock takes the tally's turns in
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, uint64(sends), l.q.turns, "expect each send one turn of the queue")
}

// TestQuietTallyTakesAPacedTurnWithoutTheLock: a caller whose turn is due
// with nobody waiting is sent without waiting for the limiter's lock
// (every attempt took it: two goroutines sharing a paced client spent
// some 0.1-0.15 of the SDK's failed-attempt decision on an attempt, above
// issue 15's tenth); one whose turn is not due waits for it, in the queue.
func TestQuietTallyTakesAPacedTurnWithoutTheLock(t *testing.T) {
	var clock movableClock
	l := newSendRate(SendRateOptions{InitialRate: 100}, clock.now)
	observeAt(l, t0, false, time.Millisecond)
	reserved := make(chan time.Duration)
	reserve := func() {
		_, wait, _, _ := l.reserve(nil, false)
		reserved <- wait
	}
	l.mu.Lock() // another caller's, for as long as this test needs
	go reserve()
	select {
	case wait := <-reserved:
		assert.Zero(t, wait, "expect the first send at once")
	case <-time.After(10 * time.Second):
		l.mu.Unlock()
		<-reserved
		t.Fatal("expect a send due at once not to wait for the lock")
	}
	clock.moveTo(4 * time.Millisecond) // within the turn of 10 ms
	go reserve()
	l.mu.Unlock()
	assert.Equal(t, 6*time.Millisecond, <-reserved, "expect the next send to wait for its turn")
}

// testClock is a movableClock, or one that embeds it and reads otherwise.
type testClock interface {
	now() time.Time
	moveTo(time.Duration)
}

// pacedAt returns a limiter at 100 a second whose tally paces sends, last
// read under its lock at at on clock.
func pacedAt(t *testing.T, clock testClock, at time.Duration) *sendRate {
	t.Helper()
	l := newSendRate(SendRateOptions{InitialRate: 100, MaxRate: 100}, clock.now)
	l.observe(false, time.Millisecond) // the first reading, at 0
	clock.moveTo(at)
	l.inUse() // a reading under the lock at `at`: the tally paces from it
	require.True(t, l.quietTurns, "expect the tally to pace sends")
	return l
}

// TestQuietTallyPacesRacingSendersATurnApart: goroutines racing for the one
// turn due, on a clock that stands still, get one turn each: one sent at
// once, the others a turn apart, whichever took its turn in the tally and
// whichever under the lock. A turn taken in the tally whose count came after
// the lock took the pace back was given back as the tally opened again,
// and two went at once (helper-240: in 3 of 10 runs of 200 rounds, under
// -race).
func TestQuietTallyPacesRacingSendersATurnApart(t *testing.T) {
	const goroutines, rounds = 8, 200
	want := make([]time.Duration, goroutines)
	for i := range want {
		want[i] = time.Duration(i) * 10 * time.Millisecond
	}
	for round := range rounds {
		var clock movableClock
		l := pacedAt(t, &clock, time.Second)
		waits := make([]time.Duration, goroutines)
		var wg, ready sync.WaitGroup
		ready.Add(goroutines)
		gate := make(chan struct{})
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				<-gate
				_, waits[g], _, _ = l.reserve(nil, false)
			}()
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		slices.Sort(waits)
		require.Equal(t, want, waits, "round %d: expect one turn each, 10 ms apart", round)
	}
}

// TestQuietTallyCountsAPacedTurnAsItTakesIt: a turn taken in the tally is
// counted by the same swap, so a caller at the same instant, under the
// lock, waits a turn after it. Counted apart, a turn taken and not yet
// counted was given back as the lock opened the tally again, and the
// caller sent at once (helper-240); the lock's holder then had to wait
// for such senders.
func TestQuietTallyCountsAPacedTurnAsItTakesIt(t *testing.T) {
	var clock movableClock
	l := pacedAt(t, &clock, time.Second)
	taken, raced := l.quiet.takeTurn(l.quiet.pace.Load(), int64(l.sinceEpoch()), l.quiet.turn.Load())
	require.True(t, taken && !raced, "expect the sender's turn due at once")
	_, wait, _, _ := l.reserve(nil, false) // not due in the tally: to the lock
	assert.Equal(t, 10*time.Millisecond, wait, "expect the caller a turn after the sender's")
}

// TestQuietTallyTakesNoTurnWhileTheLockReads: a send read while the lock's
// holder reads the clock, after the holder took the pace back, is left to
// the lock: counted on a reading after the holder's, its turn was given
// back as the tally opened again from the holder's reading (helper-240).
func TestQuietTallyTakesNoTurnWhileTheLockReads(t *testing.T) {
	var clock hookClock
	l := pacedAt(t, &clock, time.Second)
	counted := true
	clock.hook = func() { // inside the lock holder's reading of 1 s
		counted = l.quiet.countSend(func() time.Duration { return time.Second + 5*time.Millisecond })
	}
	l.inUse()
	assert.False(t, counted, "expect the send left to the lock")
}

// hookClock is a movableClock that runs hook, once, inside its next reading.
type hookClock struct {
	movableClock
	hook func()
}

func (c *hookClock) now() time.Time {
	if h := c.hook; h != nil {
		c.hook = nil
		h()
	}
	return c.movableClock.now()
}

// TestQuietTallyLetsNoFirstAttemptPassAWaiter: a retry waits for its turn;
// a first attempt that comes when that turn is due, before the retry asks
// again, waits behind it, not sent by the tally in its turn (helper-240's
// guard: passes, and fails when the tally paces with places waiting).
func TestQuietTallyLetsNoFirstAttemptPassAWaiter(t *testing.T) {
	var clock movableClock
	l := pacedAt(t, &clock, time.Second)
	_, wait, _, _ := l.reserve(nil, false)
	require.Zero(t, wait)
	clock.moveTo(time.Second + time.Millisecond)
	retry, wait, _, _ := l.reserve(nil, true)
	require.Equal(t, 9*time.Millisecond, wait)
	clock.moveTo(time.Second + 10*time.Millisecond)
	first, wait, _, _ := l.reserve(nil, false)
	assert.False(t, first.counted, "expect the first attempt not sent by the tally while the retry waits")
	assert.Equal(t, 10*time.Millisecond, wait, "expect the first attempt a turn after the retry")
	wait, _ = l.delay(retry)
	assert.Zero(t, wait, "expect the retry's turn its own")
}

// TestQuietTallyKeepsItsTurnsThroughALookUnderTheLock: a holder of the lock
// that does not read the clock (currentRate, cutCount, noteThrottleTime)
// leaves the tally's turns as they are: opened again from the queue's
// state, it would give back the turns taken since the last reading
// (helper-240's guard).
func TestQuietTallyKeepsItsTurnsThroughALookUnderTheLock(t *testing.T) {
	for name, look := range map[string]func(*sendRate){
		"currentRate":      func(l *sendRate) { l.currentRate() },
		"cutCount":         func(l *sendRate) { l.cutCount() },
		"noteThrottleTime": func(l *sendRate) { l.noteThrottleTime(time.Millisecond) },
	} {
		var clock movableClock
		l := pacedAt(t, &clock, time.Second)
		p, wait, _, _ := l.reserve(nil, false)
		require.True(t, p.counted && wait == 0, name)
		look(l)
		_, wait, _, _ = l.reserve(nil, false)
		assert.Equal(t, 10*time.Millisecond, wait, "%s: expect the second send at the same instant a turn later", name)
	}
}

// panicClock is a movableClock whose next reading panics once armed.
type panicClock struct {
	movableClock
	armed atomic.Bool
}

func (c *panicClock) now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		panic("clock failed")
	}
	return c.movableClock.now()
}

// TestQuietTallyKeepsItsTurnsThroughAClockThatPanics: a clock that panics
// under the lock, after the holder took the pace back and before the queue
// had the turns taken without the lock, leaves them taken: opened again
// from the queue without them, the tally gave the turn back, and a second
// send at the same instant went at once (helper-242). A sender whose own
// reading panics takes no turn, and holds nobody up.
func TestQuietTallyKeepsItsTurnsThroughAClockThatPanics(t *testing.T) {
	var clock panicClock
	l := pacedAt(t, &clock, time.Second)
	p, wait, _, _ := l.reserve(nil, false)
	require.True(t, p.counted && wait == 0, "expect the first send at once, by the tally")
	clock.armed.Store(true)
	require.Panics(t, func() { l.inUse() }, "expect the holder's reading to panic")
	_, wait, _, _ = l.reserve(nil, false)
	assert.Equal(t, 10*time.Millisecond, wait, "expect a second send at the same instant to wait a turn")
	clock.armed.Store(true)
	require.Panics(t, func() { l.reserve(nil, false) }, "expect a sender's reading to panic")
	clock.moveTo(time.Second + 20*time.Millisecond)
	l.inUse()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, uint64(2), l.q.turns, "expect each send one turn, the panicking one none")
}

// TestQuietTallyPaceWordWraps: the pace word holds the next turn's reading
// modulo 2^36 ns (about 69 s) and the count of turns modulo 2^27; turns
// taken across both wraps, each read 3 ns after it was due, are told and
// counted as any others.
func TestQuietTallyPaceWordWraps(t *testing.T) {
	const turn, late = 10, 3
	for _, from := range []time.Duration{0, 1<<paceNextBits - 15, 3 * time.Hour, -25} {
		var q quietTally
		q.pace.Store(packPace(0, paceCountMask-1)) // the next opening's count is the last before the wrap
		require.True(t, q.open(from, from+time.Microsecond, 0, from-time.Second, turn), "from %v: expect the tally to pace", from)
		for i := range time.Duration(3) {
			r := from + i*(turn+late)
			require.True(t, q.countSend(func() time.Duration { return r }), "from %v: expect the turn at %v due", from, r)
			require.False(t, q.countSend(func() time.Duration { return r + 1 }), "from %v: expect no second turn at %v", from, r+1)
		}
		next, taken := q.takeTurns()
		assert.Equal(t, from+2*(turn+late)+turn, next, "from %v: expect the next turn a turn after the third", from)
		assert.Equal(t, uint64(3), taken, "from %v: expect three turns counted", from)
		assert.False(t, q.countSend(func() time.Duration { return from + 3*turn }), "from %v: expect no turn once taken back", from)
	}
}

// TestQuietTallyPacesHoursOn: a limiter pacing hours after its first
// reading, and just before its readings' low bits wrap, paces as in its
// first second: a turn at once, the next a turn later, each in the tally,
// and a send before the third waits for it under the lock.
func TestQuietTallyPacesHoursOn(t *testing.T) {
	for _, at := range []time.Duration{time.Second, 1<<paceNextBits - 15*time.Millisecond, 3 * time.Hour} {
		var clock movableClock
		l := pacedAt(t, &clock, at)
		for i := range time.Duration(2) {
			clock.moveTo(at + i*10*time.Millisecond)
			p, wait, _, _ := l.reserve(nil, false)
			require.True(t, p.counted && wait == 0, "at %v: expect send %d at once, by the tally", at, i)
		}
		clock.moveTo(at + 15*time.Millisecond)
		p, wait, _, _ := l.reserve(nil, false)
		assert.False(t, p.counted, "at %v: expect the third send to the lock", at)
		assert.Equal(t, 5*time.Millisecond, wait, "at %v: expect the third send due at its turn", at)
	}
}

// TestQuietTallyCountedPlaceStaysDue: a place the tally sent at once is due
// whenever it is asked again, as a place due under the lock is. Asked, it
// read the queue as a place of the first attempts' line and was told to
// wait a turn (FuzzSendRatePacing, at 15/s: counted as still waiting, it
// came due beside the next caller's place).
func TestQuietTallyCountedPlaceStaysDue(t *testing.T) {
	var clock movableClock
	l := pacedAt(t, &clock, time.Second)
	p, wait, _, _ := l.reserve(nil, false)
	require.True(t, p.counted && wait == 0, "expect the send at once, by the tally")
	wait, _ = l.delay(p)
	assert.Zero(t, wait, "expect the place sent still due")
	_, wait, _, _ = l.reserve(nil, false)
	assert.Equal(t, 10*time.Millisecond, wait, "expect the next send a turn later")
}
