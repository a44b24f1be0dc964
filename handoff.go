package jitterretry

// This file owns the hand-off from GetRetryToken, which the SDK's middleware
// gives the context, to RetryDelay, which it gives the attempt number.

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The SDK's retry middleware calls GetRetryToken(ctx, err) and then, on the
// same goroutine and with the same error value, RetryDelay(attempt, err); it
// gives neither call both the context and the attempt number. The deadline
// check needs both, so GetRetryToken leaves what it learnt in a slot chosen
// by the error value and RetryDelay takes it.
//
// Pairing by error value is exact while one operation at a time hands off a
// given value, which is what the SDK's errors are: every response and
// transport failure is a new value; and while no refusal of that value is
// pending (a refused retry's entry, kept for a long poll's RetryDelay,
// makes the value's next entries ambiguous until it is a second old: see
// below; helper-258). When two operations hand off the same
// value at once (a shared sentinel error), the pair cannot be told apart:
// both are marked ambiguous, neither sees the other's deadline or tokens,
// and RetryDelay reports the retry with RetryEvent.Unchecked. Errors that
// are not pointers cannot be told apart at all, so all values of one
// non-pointer type share a key: the pairing is exact while one of them is
// pending.
//
// An entry no RetryDelay took within handoffStale never will be (a refused
// retry's, which only a long-polling operation asks for; one under a
// wrapper that replaces RetryDelay): a put of the same value after that
// replaces it rather than make the two ambiguous, so that one refusal does
// not leave every later operation with its error value unchecked. Unless
// a replaced entry had a deadline check due: its operation, descheduled
// over handoffStale, may still ask, and would take the new entry as its
// own, so the new entry is ambiguous, as beside a forgotten operation's
// (below; helper-256). The age
// of the pending entries is kept (the last four, and the newest of those
// dropped) from the clock reading each put made (an operation with a
// deadline, a refusal), or, for a put into a slot holding its value, one it
// makes there; an entry with no reading is dated when the first put of its
// value finds it. A put replaces the pending entries only when the newest
// of them is a second old, so a fresh entry beside a stale one stays
// ambiguous; a take drops the newest reading, since the last to put takes
// first (operations that take in the other order, each descheduled for
// half a second between its calls, can leave a slot looking a second old
// while one of them is still to ask: helper-64). (Until helper-59's review
// a slot kept four readings and nothing of the rest, and five refusals of
// one value never went stale.)
//
// A slot holds one value's entries; a put of another value evicts them. An
// operation whose entry was evicted may still ask, and its RetryDelay must
// not take a later entry of its value (another operation's deadline,
// partition and tokens: helper-59). The slot counts such absent operations
// by value, for up to four values: a put of one of them within handoffStale
// makes an ambiguous entry for them and itself, and their RetryDelay is
// reported Unchecked. Past four values it forgets the oldest, keeping only
// how many operations it forgot and when: an operation of that value
// descheduled between its two calls while four others of its slot were
// evicted may still take a later entry of its value, and a take that finds
// nothing within handoffStale of the slot's last forgetting is taken for
// one of them and reported Unchecked if any of them had a deadline, or an
// entry a put made ambiguous beside them had one (helper-256). (Until
// helper-122's review such a take was reported checked, its backoff let
// past its deadline unchecked; a RetryDelay with no GetRetryToken before
// it, or of an operation with no deadline, in that slot and window, is now
// reported Unchecked too.) (An outside
// review's stress, eight goroutines on one slot, had an hour-long operation
// refused for another's deadline in 2-127 of 16,000 operations before.
// Declining the put instead of evicting, tried first, moved the loss from
// the one slow operation to every other error of its slot: 33% of the
// deadline checks skipped against main's 8.5% in helper-63's simulation of
// 4,000 retries a second, a tenth of them descheduled for up to 0.4 s. And
// a slot made suspect for a second when it forgot a value made every entry
// ambiguous under a wrapper that replaces RetryDelay, whose entries are
// all evicted unasked.)
//
// The table has a fixed number of slots, so memory and time per call stay
// flat whatever wraps the retryer. An entry no RetryDelay takes (a wrapper
// such as retry.AddWithMaxBackoffDelay replaces it) stays until another
// error needs its slot, or until a second sweep finds it: the entry is then
// evicted and its check counted, and if its RetryDelay comes after all,
// it too is reported Unchecked. The sweep runs on a timer while the table
// holds something (see handoff.sweep): without it, the entries of a client
// gone idle, with their errors and contexts and whatever callers stored in
// those, were kept for good (an outside review: 210 MB of 1 MB context
// values after 400 operations), and their skipped checks never counted.
const handoffSlots = 256

// handoffStale is how long a RetryDelay may still come for an entry: the
// SDK's middleware calls it right after GetRetryToken on the same
// goroutine, so this only covers one descheduled on a busy machine.
const handoffStale = time.Second

// handoffSweepEvery is how long after a put that finds the timer unset,
// in real time, the table is swept; and again as long as the sweep leaves
// something. An entry goes at the second sweep that finds it: pending for
// twice handoffStale at least, so that only a RetryDelay that will not
// come loses it; the slots are walked at most every two seconds (256
// locks, some microseconds).
const handoffSweepEvery = 2 * handoffStale

type handoff struct {
	// slots is the table, made by the first put, and each slot by the
	// first put that lands on it: 256 slots of some 640 bytes were three
	// quarters of what New allocated (225 KB against the SDK's 0.7 KB),
	// for a retryer that may never retry, and made whole by the first
	// retry, 170 KB for a retryer that retried once (one per tenant, a
	// service with many paid it per tenant).
	slots atomic.Pointer[[handoffSlots]atomic.Pointer[handoffSlot]]

	// onSweep is the retryer's sweep (Retryer.sweepHandoff, through a
	// weak pointer to the Retryer), which the timer runs; sweepArmed is
	// set while the timer is.
	onSweep    func()
	sweepArmed atomic.Bool
	sweepMu    sync.Mutex // guards sweepTimer
	sweepTimer *time.Timer
}

// disarmSweep is the first thing the timer's run does: a put from then on
// sets the timer again.
func (h *handoff) disarmSweep() { h.sweepArmed.Store(false) }

// armSweep sets the sweep's timer unless it is set: one atomic load on a
// put's path.
func (h *handoff) armSweep() {
	if h.sweepArmed.Load() || !h.sweepArmed.CompareAndSwap(false, true) {
		return
	}
	h.sweepMu.Lock()
	defer h.sweepMu.Unlock()
	if h.sweepTimer == nil {
		h.sweepTimer = time.AfterFunc(handoffSweepEvery, h.onSweep)
		return
	}
	h.sweepTimer.Reset(handoffSweepEvery)
}

// sweptChecks are the deadline checks, due and not yet counted, of the
// entries a sweep dropped from one slot, and their partition.
type sweptChecks struct {
	n         int
	partition string
}

// sweep drops, from every slot, the pending entries and the records of
// absent operations that were there at the sweep before and that no put
// has touched since (so, pending for one whole handoffSweepEvery at
// least: 2 to 4 s), with their errors and contexts, and marks what it
// finds for the next. It reads no clock: the Retryer's Clock, which may be
// a test's unsynchronised fake, is never called from the timer's
// goroutine (helper-196's review's fix did, and raced such a clock in this
// module's own tests). Where what it drops had a deadline check due, it
// leaves the slot's record of forgotten operations, dated by the first
// take or put that finds it, so that a RetryDelay still coming is
// reported Unchecked, as after an eviction (without it, one descheduled
// past the sweep went ahead unchecked and was reported checked:
// helper-196). It returns the dropped entries' checks that no count held,
// and whether anything is left to sweep.
func (h *handoff) sweep() (swept []sweptChecks, left bool) {
	slots := h.slots.Load()
	if slots == nil {
		return nil, false
	}
	for i := range slots {
		s := slots[i].Load()
		if s == nil {
			continue // nothing was ever put there
		}
		s.mu.Lock()
		n, partition, l := s.sweep()
		s.mu.Unlock()
		if n > 0 {
			swept = append(swept, sweptChecks{n, partition})
		}
		left = left || l
	}
	return swept, left
}

type handoffSlot struct {
	mu        sync.Mutex
	key       error // the pending entry's error; kept alive while pending
	pending   int   // hand-offs of key not yet taken
	ambiguous bool  // more than one operation handed key off at once
	deadlines bool  // one of the pending hand-offs had a deadline to check
	// uncounted is how many of the pending hand-offs had a deadline to
	// check and are not yet in the skipped checks' metric: an eviction
	// counts them, or the takes of an ambiguous entry do, one each, so
	// that each skipped check is counted once.
	uncounted int
	// absent counts, by value, the operations whose entry was evicted and
	// whose RetryDelay may still come.
	absent [4]absentOps
	// forgotten is what the slot keeps of the operations whose absent
	// record made room for another's: no key, no count.
	forgotten forgottenOps
	entry     pendingRetry
	puts      putTimes // when the pending entries of key were put
	// swept: the last sweep found entries or records here, and no put has
	// come since; the next drops them.
	swept bool
}

// absentOps are n operations of key whose entries were evicted, the newest
// put at at; deadline: one of them had a deadline to check.
type absentOps struct {
	key      error
	n        int
	deadline bool
	at       time.Time
}

// putTimes are the clock readings of the puts of a slot's last pending
// entries, oldest first (zero: the put made none), and the newest of the
// readings dropped to keep len(at): a bound on every entry older than the
// kept ones; with whether each put had a deadline check due (dueDropped:
// one of those dropped had), taken off with its reading, the last first.
type putTimes struct {
	at         [4]time.Time
	due        [4]bool
	n          int
	dropped    time.Time
	dueDropped bool
}

// anyDue reports whether a pending put had a deadline check due.
func (p *putTimes) anyDue() bool {
	return p.dueDropped || slices.Contains(p.due[:p.n], true)
}

func (p *putTimes) reset(at time.Time, due bool) {
	*p = putTimes{}
	p.push(at, due)
}

func (p *putTimes) push(at time.Time, due bool) {
	if p.n == len(p.at) {
		p.dropped = p.at[0]
		p.dueDropped = p.dueDropped || p.due[0]
		copy(p.at[:], p.at[1:])
		copy(p.due[:], p.due[1:])
		p.n--
	}
	p.at[p.n] = at
	p.due[p.n] = due
	p.n++
}

func (p *putTimes) pop() {
	if p.n > 0 {
		p.n--
	}
}

// newest returns the reading of the newest pending entry's put.
func (p *putTimes) newest() *time.Time {
	if p.n > 0 {
		return &p.at[p.n-1]
	}
	return &p.dropped
}

// allStale reports whether the newest pending entry, and so each of them,
// was put handoffStale or more before at. A reading the put did not make
// is taken as at: the time the entry was first seen pending, so that it
// too goes stale.
func (p *putTimes) allStale(at time.Time) bool {
	return stale(p.newest(), at)
}

// stale reports whether a put at *put was handoffStale or more before at,
// dating a put that made no reading at at, and one after at (a clock that
// stepped back) too: it ages from there.
func stale(put *time.Time, at time.Time) bool {
	if put.IsZero() || at.Before(*put) {
		*put = at
	}
	return at.Sub(*put) >= handoffStale
}

// pendingRetry is what GetRetryToken hands to RetryDelay.
type pendingRetry struct {
	ctx         context.Context
	lane        *lane
	class       ErrorClass
	hint        retryAfter // the failed attempt's x-amz-retry-after
	at          time.Time  // when GetRetryToken ran; zero when it did not read the clock
	deadline    time.Time
	hasDeadline bool
	margin      time.Duration // what the attempt after the backoff needs
	cutMargin   bool          // margin is the time an attempt ran before AttemptTimeout cut it at the deadline
	fits        bool          // a conflict backoff, fitted into the time left before the margin when there is any: a refusal is the margin's
	floored     bool          // a conflict's wait is the throttle floor (see Do): a deadline refusal holds its caller as a throttle's
	uncounted   bool          // a Do loop's throttle that the send-rate limiter did not count: no near miss (see Retryer.throttleBackoff)
	paced       bool          // the retry's attempt will wait its turn at the send-rate limiter: GetRetryToken's (the SDK's middleware sends it through GetAttemptToken), or Do's whose fn's last call waited there; never within a minute of a call of GetInitialToken
	cost        uint          // the tokens the retry took
	ticket      trackRef      // the paid retry, when tracked
	paid        ticket        // the paid retry, when not tracked
	refused     bool          // GetRetryToken refused the retry and already backed off
	waited      time.Duration // how long GetRetryToken backed off on an empty bucket, refused or not
}

// checksDeadline reports whether RetryDelay has a deadline check to make
// for p. A refusal's entry, kept for a long-polling operation, has none:
// its deadline only bounds the backoff before the refusal returns, and most
// refused operations never ask for it.
func (p *pendingRetry) checksDeadline() bool { return p.hasDeadline && !p.refused }

// countsDeadline is 1 when p has a deadline check to make, else 0: what it
// adds to its slot's uncounted checks.
func (p *pendingRetry) countsDeadline() int {
	if p.checksDeadline() {
		return 1
	}
	return 0
}

// refund gives the tokens of the retry back, unless they were claimed, and
// forgets them: a second refund (a Do loop's, after a hook that panicked)
// gives nothing.
func (p *pendingRetry) refund(tr *tracked) {
	switch {
	case p.ticket.slot != nil:
		tr.refund(p.ticket)
	case p.paid.lane != nil:
		p.paid.refund()
	}
	p.ticket, p.paid = trackRef{}, ticket{}
}

// handoffStatus is what take found.
type handoffStatus uint8

const (
	handoffMissing   handoffStatus = iota // nothing was handed off for this error
	handoffFound                          // the entry of this operation
	handoffAmbiguous                      // entries of several operations: none is used
	handoffLost                           // this operation's entry was evicted
)

// skippedCheck is whether a retry's deadline check was due but could not be
// made, and whether the skipped checks' metric holds it already (counted at
// the eviction of its hand-off, or at another take of its ambiguous entry).
type skippedCheck struct{ skipped, counted bool }

// put hands e off under err, whose keyHash is hash, reading clock only when
// e has no reading and the slot needs one (a pending entry of the same
// value to date, another value's entries to age, evicted operations of the
// value to tell). It returns how many of the entries it evicted (another
// error's, or its own value's gone stale) had a deadline check due that no
// count holds yet, and their partition ("" when several operations had
// handed the evicted error off at once).
func (h *handoff) put(err error, hash uintptr, e *pendingRetry, clock func() time.Time) (evicted int, partition string) {
	s := tableOf(&tableOf(&h.slots)[hash%handoffSlots])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.swept = false
	at := e.at
	reading := func() time.Time {
		if at.IsZero() {
			at = clock()
		}
		return at
	}
	if s.pending > 0 && sameKey(s.key, err) {
		// Every pending entry of the value gets a reading, so that its age
		// is known: a put that made none reads the clock here, on this
		// rare path.
		if s.puts.allStale(reading()) {
			// Their RetryDelay will not come, unless an operation was
			// descheduled between its calls: their checks are skipped.
			evicted, partition = s.evictedChecks()
			due := s.puts.anyDue()
			s.replace(err, e, at)
			if due {
				// One that had a check due and still asks would take
				// this entry as its own, and judge its operation by this
				// one's deadline (helper-256: an hour-long operation
				// refused for a 100 ms one's), as a forgotten operation
				// would: which is whose is lost. Whether one was due is
				// each put's own (helper-260: the slot's uncounted checks
				// were counted by an earlier take). It is recorded
				// without its value: kept, it made every put of the
				// value ambiguous for another second (helper-258: 99.8%
				// of a neighbour's retries Unchecked, from 66.5%); a late
				// one asking after a second new put may take that one.
				s.forget(absentOps{deadline: true}, reading())
				s.ambiguous, s.deadlines, s.entry = true, true, pendingRetry{}
			}
			return evicted, partition
		}
		s.puts.push(at, e.checksDeadline())
		s.pending++
		s.ambiguous = true
		s.deadlines = s.deadlines || e.checksDeadline()
		s.uncounted += e.countsDeadline()
		s.entry = pendingRetry{}
		return 0, ""
	}
	// The absent operations of this value, if recent, may still ask: their
	// RetryDelay must not take this entry. (Taken first, so that their
	// record does not count against the four a slot keeps.)
	lost, lostDeadline := s.forgetAbsent(err, reading)
	if s.pending > 0 {
		// Another value's entries: evicted. Their operations may still
		// ask, unless the entries are stale.
		evicted, partition = s.evictedChecks()
		if !s.puts.allStale(reading()) {
			s.addAbsent(s.key, s.pending, s.deadlines, reading())
		} else if s.deadlines {
			// Stale: not asked for in a second, but one that still asks
			// is told its check was not made (helper-197).
			s.forget(absentOps{deadline: true}, reading())
		}
	}
	s.replace(err, e, at)
	if lost > 0 {
		s.pending += lost
		s.ambiguous, s.deadlines, s.entry = true, s.deadlines || lostDeadline, pendingRetry{}
		for range min(lost, len(s.puts.at)) {
			s.puts.push(at, lostDeadline)
		}
	} else if forgotten, deadline := s.forgottenOf(err, reading); forgotten {
		// An operation of this value that the slot forgot may still ask:
		// its RetryDelay would take this entry as its own, and judge its
		// operation by this one's deadline (helper-249: an hour-long
		// operation refused for a 300 ms one's). Which is whose is lost:
		// the one that asks second finds nothing, and is told a check
		// was skipped if this entry had one due, whoever it is
		// (helper-256: the newer one's, taken by a forgotten operation
		// with no deadline, was reported checked).
		s.ambiguous, s.deadlines, s.entry = true, s.deadlines || deadline, pendingRetry{}
		s.forgotten.deadline = s.forgotten.deadline || e.checksDeadline()
	}
	return evicted, partition
}

// sweep drops the slot's pending entries and absent records when the sweep
// before found them and no put came since, leaving an undated record of
// the operations forgotten (with their errors, which the sweep after lets
// go of, and whether one had a deadline check due), and otherwise marks
// them for the next sweep. It returns the dropped entries' checks that no
// count held, their partition, and whether anything is left for the next
// sweep.
func (s *handoffSlot) sweep() (evicted int, partition string, left bool) {
	held := s.pending > 0 || slices.ContainsFunc(s.absent[:], func(a absentOps) bool { return a.key != nil }) ||
		s.forgotten.holdsKeys()
	switch {
	case !held:
		s.swept = false
		return 0, "", false
	case !s.swept:
		s.swept = true
		return 0, "", true
	}
	s.forgotten.dropKeys() // those of the sweep before
	if s.pending > 0 {
		evicted, partition = s.evictedChecks()
		s.forgetUndated(s.key, s.deadlines)
		s.clear()
	}
	for i := range s.absent {
		if a := &s.absent[i]; a.key != nil {
			s.forgetUndated(a.key, a.deadline)
			*a = absentOps{}
		}
	}
	s.swept = false
	return evicted, partition, s.forgotten.holdsKeys()
}

// clear empties the slot of its pending entries.
func (s *handoffSlot) clear() {
	s.key, s.pending, s.ambiguous, s.deadlines, s.uncounted, s.entry = nil, 0, false, false, 0, pendingRetry{}
	s.puts = putTimes{}
}

// evictedChecks returns how many of the pending entries, about to be
// evicted, had a deadline check due that no count holds yet, and their
// partition ("" when the entry is ambiguous).
func (s *handoffSlot) evictedChecks() (n int, partition string) {
	if s.entry.lane != nil {
		partition = s.entry.lane.key
	}
	return s.uncounted, partition
}

// replace makes e, put at at, the slot's only entry, under err.
func (s *handoffSlot) replace(err error, e *pendingRetry, at time.Time) {
	s.key, s.pending, s.ambiguous, s.deadlines, s.uncounted, s.entry = err, 1, false, e.checksDeadline(), e.countsDeadline(), *e
	s.puts.reset(at, e.checksDeadline())
}

// addAbsent counts n operations of key whose entries were evicted, the
// newest put at now; with four other values' absent operations that may
// still ask, it forgets the oldest.
func (s *handoffSlot) addAbsent(key error, n int, deadline bool, now time.Time) {
	free := -1
	for i := range s.absent {
		a := &s.absent[i]
		switch {
		case a.key == nil || stale(&a.at, now):
			if free < 0 || s.absent[free].key != nil {
				free = i
			}
		case sameKey(a.key, key):
			a.n, a.deadline, a.at = a.n+n, a.deadline || deadline, now
			return
		}
	}
	if free < 0 {
		oldest := 0
		for i := range s.absent {
			if s.absent[i].at.Before(s.absent[oldest].at) {
				oldest = i
			}
		}
		free = oldest
		s.forget(s.absent[oldest], now)
	}
	s.absent[free] = absentOps{key: key, n: n, deadline: deadline, at: now}
}

// forgottenOps are operations a slot forgot, at the last forgetting (zero:
// none), of which one had a deadline to check if deadline; all start over
// once at is handoffStale old.
type forgottenOps struct {
	at       time.Time
	deadline bool
	// undated: left by a sweep, which reads no clock; the first take or
	// put that finds it dates it.
	undated bool
	// keys are the values forgotten (nil: none), so that a put of one of
	// them makes an entry its forgotten operations cannot take as their
	// own; with more values than places, the oldest is let go (counting
	// them all made every put of a busy slot ambiguous). The errors
	// themselves, not their hashes: a hash is an address, and a freed
	// error's is soon another's (a hash made fresh errors ambiguous, and
	// their evicted checks lost their partition). Held, while the late
	// operation may still ask, its error cannot be another's; the sweeps
	// let go of them as of the entries (see handoffSlot.sweep).
	keys [1 + 4]error // oldest first, the nil places last
}

// noteKey adds key to the values forgotten.
func (f *forgottenOps) noteKey(key error) {
	if f.indexOf(key) >= 0 {
		return
	}
	if f.keys[len(f.keys)-1] != nil {
		f.letGo(0)
	}
	f.keys[slices.Index(f.keys[:], nil)] = key
}

// indexOf returns the place of key's value among those kept, or -1.
func (f *forgottenOps) indexOf(key error) int {
	return slices.IndexFunc(f.keys[:], func(k error) bool { return k != nil && sameKey(k, key) })
}

// askedBy lets go of key's value, kept for its forgotten operation, when
// a take of it finds nothing: that operation has asked, and a later put of
// the value is a new operation's alone (kept, the value's own operation,
// called again, found its next entry ambiguous).
func (f *forgottenOps) askedBy(key error) {
	if i := f.indexOf(key); i >= 0 {
		f.letGo(i)
	}
}

// letGo removes the value in place i, keeping the others in order.
func (f *forgottenOps) letGo(i int) {
	copy(f.keys[i:], f.keys[i+1:])
	f.keys[len(f.keys)-1] = nil
}

// holdsKeys reports whether f holds errors a sweep is to let go of.
func (f *forgottenOps) holdsKeys() bool { return f.keys[0] != nil }

// dropKeys lets go of the errors forgotten; a put of their values then
// makes an entry as any other. Their operations, if they still ask, find
// nothing and are told as before (forgottenAsked).
func (f *forgottenOps) dropKeys() { f.keys = [len(f.keys)]error{} }

// forgetUndated counts, among the operations that may still ask, those of
// key that a sweep drops, with a deadline check due if deadline.
func (s *handoffSlot) forgetUndated(key error, deadline bool) {
	f := &s.forgotten
	f.deadline, f.undated = f.deadline || deadline, true
	f.noteKey(key)
}

// forget counts the operations of record a, whose key the slot forgets at
// now, among those that may still ask.
func (s *handoffSlot) forget(a absentOps, now time.Time) {
	f := &s.forgotten
	if f.undated {
		f.at, f.undated = now, false
	}
	if !f.at.IsZero() && stale(&f.at, now) {
		*f = forgottenOps{}
	}
	f.deadline, f.at = f.deadline || a.deadline, now
	if a.key != nil {
		f.noteKey(a.key)
	}
}

// forgottenOf reports whether operations of key's value that the slot
// forgot may still ask (within handoffStale of the last forgetting), and
// whether one of the forgotten had a deadline to check.
func (s *handoffSlot) forgottenOf(key error, now func() time.Time) (found, deadline bool) {
	if s.forgotten.indexOf(key) < 0 {
		return false, false
	}
	return s.forgottenAsked(now)
}

// forgottenAsked reports whether a take that found nothing of its value
// may be one of the forgotten operations' (within handoffStale of the
// last forgetting), and whether one of them had a deadline to check. It
// counts none as asked: a take with nothing put before it (a refused
// long-polling operation's, which the middleware asks after any refusal)
// would use up a forgotten one's place and leave it reported checked
// (helper-123). So every such take in the window is reported Unchecked
// when any forgotten operation had a deadline, its own or not: the keys
// are gone, and so is the telling.
func (s *handoffSlot) forgottenAsked(now func() time.Time) (found, deadline bool) {
	f := &s.forgotten
	if f.undated {
		f.at, f.undated = now(), false
	}
	if f.at.IsZero() {
		return false, false
	}
	if stale(&f.at, now()) {
		*f = forgottenOps{}
		return false, false
	}
	return true, f.deadline
}

// forgetAbsent removes the record of key's absent operations, whose value a
// put hands off again, and returns how many of them may still ask (none
// when the record is stale, read with reading) and whether one had a
// deadline to check.
func (s *handoffSlot) forgetAbsent(key error, reading func() time.Time) (n int, deadline bool) {
	a := s.absentOf(key)
	if a == nil {
		return 0, false
	}
	if !stale(&a.at, reading()) {
		n, deadline = a.n, a.deadline
	}
	*a = absentOps{}
	return n, deadline
}

// absentAsked counts one of key's absent operations as asked, its
// RetryDelay come, and reports whether there was one and whether the
// record had a deadline to check.
func (s *handoffSlot) absentAsked(key error) (found, deadline bool) {
	a := s.absentOf(key)
	if a == nil {
		return false, false
	}
	deadline = a.deadline
	if a.n--; a.n <= 0 {
		*a = absentOps{}
	}
	return true, deadline
}

// absentOf returns the record of key's absent operations, or nil.
func (s *handoffSlot) absentOf(key error) *absentOps {
	for i := range s.absent {
		if a := &s.absent[i]; a.key != nil && sameKey(a.key, key) {
			return a
		}
	}
	return nil
}

// take takes the entry handed off under err, and tells whether its
// deadline check, if one was due, could not be made (an ambiguous or lost
// entry) and is counted already. An ambiguous entry's takes count the
// skipped checks its puts brought, one each, whichever of its operations
// asks: the pairing is lost, the total is not. It reads clock only when it
// finds nothing and the slot forgot operations that may still ask.
func (h *handoff) take(err error, clock func() time.Time) (e pendingRetry, status handoffStatus, check skippedCheck) {
	slots := h.slots.Load()
	if slots == nil {
		return pendingRetry{}, handoffMissing, skippedCheck{} // nothing was ever put
	}
	s := slots[keyHash(err)%handoffSlots].Load()
	if s == nil {
		return pendingRetry{}, handoffMissing, skippedCheck{} // nothing was ever put there
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending > 0 && sameKey(s.key, err) {
		s.pending--
		s.puts.pop() // under the SDK's middleware, the last to put takes first
		status, e = handoffFound, s.entry
		if s.ambiguous {
			status, e = handoffAmbiguous, pendingRetry{}
			check = skippedCheck{skipped: s.deadlines, counted: s.uncounted == 0}
			s.uncounted = max(s.uncounted-1, 0)
		}
		if s.pending == 0 {
			s.clear()
		}
		return e, status, check
	}
	// A lost entry's skipped check was counted at its eviction.
	if found, deadline := s.absentAsked(err); found {
		return pendingRetry{}, handoffLost, skippedCheck{skipped: deadline, counted: true}
	}
	s.forgotten.askedBy(err)
	if found, deadline := s.forgottenAsked(clock); found {
		return pendingRetry{}, handoffLost, skippedCheck{skipped: deadline, counted: true}
	}
	return pendingRetry{}, handoffMissing, skippedCheck{}
}

// keyHash spreads pointers (by address) and other errors (by dynamic type)
// over the slots of a table. A nil error has slot 0.
func keyHash(err error) uintptr {
	if err == nil {
		return 0
	}
	v := reflect.ValueOf(err)
	var p uintptr
	if v.Kind() == reflect.Pointer {
		p = v.Pointer()
	} else {
		p = reflect.ValueOf(v.Type()).Pointer()
	}
	// Allocations are aligned: drop the low bits, then mix.
	p >>= 4
	return p ^ p>>8 ^ p>>16
}

// sameKey reports whether a and b are the same pointer, or, for errors that
// are not pointers, of the same dynamic type. It never compares two values
// of a type that may not be comparable.
func sameKey(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta.Kind() == reflect.Pointer {
		return a == b
	}
	return true
}
