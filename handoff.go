package jitterretry

// This file owns the hand-off from GetRetryToken, which the SDK's middleware
// gives the context, to RetryDelay, which it gives the attempt number.

import (
	"context"
	"reflect"
	"sync"
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
// transport failure is a new value. When two operations hand off the same
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
// not leave every later operation with its error value unchecked. The age
// of the pending entries is kept (the last four, and the newest of those
// dropped) from the clock reading each put made (an operation with a
// deadline, a refusal), or, for a put into a slot holding its value, one it
// makes there; an entry with no reading is dated when the first put of its
// value finds it. A put replaces the pending entries only when the newest
// of them is a second old, so a fresh entry beside a stale one stays
// ambiguous; a take drops the newest reading, since the last to put takes
// first. (Until helper-59's review a slot kept four readings and nothing of
// the rest, and five refusals of one value never went stale.)
//
// An entry evicted before its RetryDelay came may still be asked for: a put
// of the same value within handoffStale of the evicted entry's newest put
// makes an ambiguous entry for both, so that the evicted operation's
// RetryDelay cannot take the new one's (it took another operation's
// deadline, partition and tokens). An older one is taken for a refusal's
// ghost, never asked for. A slot remembers one eviction: a second one
// before the first's RetryDelay comes forgets the first.
//
// The table has a fixed number of slots, so memory and time per call stay
// flat whatever wraps the retryer. An entry no RetryDelay takes (a wrapper
// such as retry.AddWithMaxBackoffDelay replaces it) stays until another
// error needs its slot; the entry is then evicted and counted, and if its
// RetryDelay comes after all, it too is reported Unchecked.
const handoffSlots = 256

// handoffStale is how long a RetryDelay may still come for an entry: the
// SDK's middleware calls it right after GetRetryToken on the same
// goroutine, so this only covers one descheduled on a busy machine.
const handoffStale = time.Second

type handoff struct {
	slots [handoffSlots]handoffSlot
}

type handoffSlot struct {
	mu        sync.Mutex
	key       error // the pending entry's error; kept alive while pending
	pending   int   // hand-offs of key not yet taken
	ambiguous bool  // more than one operation handed key off at once
	deadlines bool  // one of the pending hand-offs had a deadline to check
	evicted   error // the key of the last entry evicted before it was taken
	// evictedDeadline: the evicted entry had a deadline to check.
	evictedDeadline bool
	// evictedAt: when the evicted entry's newest put was; zero when it
	// made no reading, until a put of its value dates it.
	evictedAt time.Time
	entry     pendingRetry
	puts      putTimes // when the pending entries of key were put
}

// putTimes are the clock readings of the puts of a slot's last pending
// entries, oldest first (zero: the put made none), and the newest of the
// readings dropped to keep len(at): a bound on every entry older than the
// kept ones.
type putTimes struct {
	at      [4]time.Time
	n       int
	dropped time.Time
}

func (p *putTimes) reset(at time.Time) {
	*p = putTimes{}
	p.push(at)
}

func (p *putTimes) push(at time.Time) {
	if p.n == len(p.at) {
		p.dropped = p.at[0]
		copy(p.at[:], p.at[1:])
		p.n--
	}
	p.at[p.n] = at
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
// dating a put that made no reading at at.
func stale(put *time.Time, at time.Time) bool {
	if put.IsZero() {
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

// refund gives the tokens of the retry back, unless they were claimed.
func (p *pendingRetry) refund(tr *tracked) {
	switch {
	case p.ticket.slot != nil:
		tr.refund(p.ticket)
	case p.paid.lane != nil:
		p.paid.refund()
	}
}

// handoffStatus is what take found.
type handoffStatus uint8

const (
	handoffMissing   handoffStatus = iota // nothing was handed off for this error
	handoffFound                          // the entry of this operation
	handoffAmbiguous                      // entries of several operations: none is used
	handoffLost                           // this operation's entry was evicted
)

// unchecked reports whether a deadline check was due but could not be made.
func (s handoffStatus) unchecked(hadDeadline bool) bool {
	return hadDeadline && (s == handoffAmbiguous || s == handoffLost)
}

// put hands e off under err, whose keyHash is hash, reading clock only when a
// pending entry of the same value needs a time and e has none (see
// handoffStale). It reports whether it
// evicted an entry of another error that no RetryDelay took and that had
// a deadline to check, and that entry's partition ("" when several
// operations had handed its error off at once).
func (h *handoff) put(err error, hash uintptr, e *pendingRetry, clock func() time.Time) (evicted bool, partition string) {
	s := &h.slots[hash%handoffSlots]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending > 0 {
		if sameKey(s.key, err) {
			// Every pending entry of the value gets a reading, so that
			// its age is known: a put that made none reads the clock
			// here, on this rare path.
			at := e.at
			if at.IsZero() {
				at = clock()
			}
			if s.puts.allStale(at) {
				s.key, s.pending, s.ambiguous, s.deadlines, s.entry = err, 1, false, e.checksDeadline(), *e
				s.puts.reset(at)
				return false, ""
			}
			s.puts.push(at)
			s.pending++
			s.ambiguous = true
			s.deadlines = s.deadlines || e.checksDeadline()
			s.entry = pendingRetry{}
			return false, ""
		}
	}
	// The evicted entry of this value, if there is one and it is recent,
	// may still be asked for: its RetryDelay must not take this entry.
	lost, lostDeadline := false, false
	if s.evicted != nil && sameKey(s.evicted, err) {
		at := e.at
		if at.IsZero() {
			at = clock() // rare: a value put again after its eviction
		}
		lost = !stale(&s.evictedAt, at)
		lostDeadline = lost && s.evictedDeadline
		s.evicted, s.evictedDeadline, s.evictedAt = nil, false, time.Time{}
	}
	if s.pending > 0 {
		// Only an entry with a deadline check had one to skip.
		s.evicted, s.evictedDeadline, s.evictedAt, evicted = s.key, s.deadlines, *s.puts.newest(), s.deadlines
		if s.entry.lane != nil {
			partition = s.entry.lane.key
		}
	}
	s.key, s.pending, s.ambiguous, s.deadlines, s.entry = err, 1, false, e.checksDeadline(), *e
	s.puts.reset(e.at)
	if lost {
		// The evicted entry's reading is gone: dated as this one.
		s.pending, s.ambiguous, s.deadlines, s.entry = 2, true, s.deadlines || lostDeadline, pendingRetry{}
		s.puts.push(e.at)
	}
	return evicted, partition
}

// take takes the entry handed off under err. For an ambiguous or lost
// entry, hadDeadline reports whether a deadline check was due.
func (h *handoff) take(err error) (e pendingRetry, status handoffStatus, hadDeadline bool) {
	s := &h.slots[keyHash(err)%handoffSlots]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending > 0 && sameKey(s.key, err) {
		s.pending--
		s.puts.pop() // under the SDK's middleware, the last to put takes first
		status, e, hadDeadline = handoffFound, s.entry, s.deadlines
		if s.ambiguous {
			status, e = handoffAmbiguous, pendingRetry{}
		}
		if s.pending == 0 {
			s.key, s.ambiguous, s.deadlines, s.entry = nil, false, false, pendingRetry{}
			s.puts = putTimes{}
		}
		return e, status, hadDeadline
	}
	if s.evicted != nil && sameKey(s.evicted, err) {
		hadDeadline = s.evictedDeadline
		s.evicted, s.evictedDeadline, s.evictedAt = nil, false, time.Time{}
		return pendingRetry{}, handoffLost, hadDeadline
	}
	return pendingRetry{}, handoffMissing, false
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
