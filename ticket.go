package jitterretry

// This file owns a retry's tokens from the moment they are taken until they
// are released or refunded, and the tracking that gives back the tokens of a
// retry whose context ended during its backoff.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// ticket is a paid retry: its lane, its cost and the ways to give the cost
// back.
type ticket struct {
	lane    *lane
	cost    uint
	foreign func() error      // a foreign RateLimiter's release; nil with the bucket
	release func(error) error // the SDK-style release: a refund on success
}

// refund gives the cost back without a success.
func (t ticket) refund() { t.lane.refund(t.cost, t.foreign) }

// The SDK's middleware drops a retry's release when the backoff sleep ends
// with the context, so without tracking, a cancelled caller's tokens would
// be gone until successes earn them back (with no refill, for good). A
// context.AfterFunc per retry would cost four allocations and a lock of the
// caller's context; instead, retries whose context can end take a slot in
// a table that a sweep walks when the table needs room or the bucket runs
// dry. A sweep refunds a held retry whose context it finds done when
//
//   - it saw the context done before the retry's backoff was due to end
//     (the sleep was cut short, so the retry was never sent), or
//   - the context has been done for reclaimGrace and the retry is still not
//     released (the SDK releases a sent retry as soon as its attempt
//     returns, which a done context makes prompt).
//
// A released retry keeps the SDK's accounting: a sent retry has spent its
// cost, even if its context ends before the middleware releases it.
const (
	reclaimGrace = time.Second
	// maxTracked bounds the table; retries beyond it are not tracked and,
	// as with the SDK, a cancelled backoff keeps their cost.
	maxTracked = 4096
)

// tracked is the table of held retries whose context can end.
type tracked struct {
	now   func() time.Time
	epoch time.Time

	mu    sync.Mutex
	slots []*trackSlot
	free  []*trackSlot
}

// trackSlot is one held retry. state is gen<<1 | held: claiming a retry is
// one compare-and-swap, and a release from a retry the slot held before
// (an older gen) cannot touch the current one.
type trackSlot struct {
	state atomic.Uint64
	// wake is when the backoff ends, in microseconds since the epoch, with
	// the slot's gen in the low 16 bits; 0 until known.
	wake atomic.Uint64

	// Set under tracked.mu when the slot is taken; read by sweeps.
	ctx      context.Context
	t        ticket
	doneSeen time.Duration // since the epoch, when a sweep first saw ctx done; 0 before
	isFree   bool
}

// trackRef names a held retry in the table: its slot and gen. The zero
// value names none.
type trackRef struct {
	slot *trackSlot
	gen  uint64
	t    ticket // a copy, so that a refund never reads a slot another retry may hold
}

func newTracked(now func() time.Time) *tracked {
	return &tracked{now: now, epoch: now()}
}

// since returns the monotonic time since the table's epoch.
func (tr *tracked) since(t time.Time) time.Duration { return t.Sub(tr.epoch) }

// track holds t for a retry whose context ctx can end, and returns its
// reference and the release to hand to the SDK: the first of the release and
// a sweep's refund claims the tokens. When the table is full the retry is
// not tracked: the zero reference and t's own release.
func (tr *tracked) track(ctx context.Context, t ticket) (trackRef, func(error) error) {
	tr.mu.Lock()
	s := tr.slotLocked()
	if s == nil {
		tr.mu.Unlock()
		return trackRef{}, t.release
	}
	gen := s.state.Load()>>1 + 1
	s.ctx, s.t, s.doneSeen, s.isFree = ctx, t, 0, false
	s.wake.Store(0)
	s.state.Store(gen<<1 | 1)
	tr.mu.Unlock()

	release := t.release
	return trackRef{slot: s, gen: gen, t: t}, func(err error) error {
		if s.state.CompareAndSwap(gen<<1|1, gen<<1) {
			return release(err)
		}
		return nil
	}
}

// slotLocked returns a free slot, sweeping or growing the table when none
// is free, or nil when the table is full.
func (tr *tracked) slotLocked() *trackSlot {
	if len(tr.free) == 0 {
		tr.sweepLocked(tr.now())
	}
	if len(tr.free) < len(tr.slots)/4 || len(tr.free) == 0 {
		// Mostly held: grow by doubling, so sweeps stay rare.
		grow := min(max(len(tr.slots), 16), maxTracked-len(tr.slots))
		for range grow {
			s := &trackSlot{isFree: true}
			tr.slots = append(tr.slots, s)
			tr.free = append(tr.free, s)
		}
	}
	if len(tr.free) == 0 {
		return nil
	}
	s := tr.free[len(tr.free)-1]
	tr.free = tr.free[:len(tr.free)-1]
	return s
}

// backoffEnds records when the backoff of the retry ref ends.
func (tr *tracked) backoffEnds(ref trackRef, at time.Time) {
	if ref.slot == nil {
		return
	}
	us := uint64(max(tr.since(at), 0) / time.Microsecond)
	ref.slot.wake.Store(us<<16 | ref.gen&0xffff)
}

// refund gives the tokens of retry ref back, unless its release or an
// earlier refund claimed them.
func (tr *tracked) refund(ref trackRef) {
	if ref.slot != nil && ref.slot.state.CompareAndSwap(ref.gen<<1|1, ref.gen<<1) {
		ref.t.refund()
	}
}

// reclaim sweeps the table: it refunds the retries whose context ended
// during their backoff, as the comment above the table says.
func (tr *tracked) reclaim() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.sweepLocked(tr.now())
}

func (tr *tracked) sweepLocked(now time.Time) {
	at := tr.since(now)
	for _, s := range tr.slots {
		st := s.state.Load()
		if st&1 == 1 && s.ctx.Err() != nil {
			if s.doneSeen == 0 {
				s.doneSeen = max(at, 1)
			}
			gen := st >> 1
			wake, known := time.Duration(0), false
			if w := s.wake.Load(); w != 0 && w&0xffff == gen&0xffff {
				wake, known = time.Duration(w>>16)*time.Microsecond, true
			}
			if (known && s.doneSeen < wake) || at-s.doneSeen >= reclaimGrace {
				if s.state.CompareAndSwap(st, gen<<1) {
					s.t.refund()
					st = gen << 1
				}
			}
		}
		if st&1 == 0 && !s.isFree {
			s.ctx, s.t, s.isFree = nil, ticket{}, true
			tr.free = append(tr.free, s)
		}
	}
}
