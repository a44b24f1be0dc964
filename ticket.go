package jitterretry

// This file owns a retry's tokens from the moment they are taken until they
// are released or refunded, and the tracking that gives back the tokens of a
// retry whose context ended during its backoff.

import (
	"context"
	"math"
	"runtime"
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
	// forConflict: the retry is of a conflict, which a conflict's answer
	// does not refund (see lane.retryRelease).
	forConflict bool
}

// refund gives the cost back without a success, and returns how many tokens
// went back to the lane's own bucket (see lane.refund).
func (t ticket) refund() uint { return t.lane.refund(t.cost, t.foreign) }

// settleLate is the release, with the retry's outcome err, of a sent retry
// that a sweep refunded before it came back, refunded being the tokens that
// refund put back in the lane's bucket (short of the cost when it was
// full): it leaves what the release would have left, net of that refund. A
// success, refunded, gets what the refund could not put back, and leaves
// the skip of the attempt release that follows it; a conflict is refunded
// too, but for a conflict's retry; any other failure spends the cost, so
// what the refund put back is taken back, as far as the bucket still holds
// it. A foreign RateLimiter keeps the refund as it was: taking from it may
// block.
func (t ticket) settleLate(err error, refunded uint) {
	l := t.lane
	conflict := !t.forConflict && err != nil && l.isConflict != nil && l.isConflict(err)
	switch {
	case l.bucket == nil:
	case err == nil || conflict:
		l.bucket.give(t.cost - min(refunded, t.cost))
	default:
		l.bucket.takeUpTo(refunded)
	}
	if err == nil {
		l.pendingSkips().Add(1)
	}
}

// The SDK's middleware drops a retry's release when the backoff sleep ends
// with the context, so without tracking, a cancelled caller's tokens would
// be gone until successes earn them back (with no refill, for good). A
// context.AfterFunc per retry would cost four allocations and a lock of the
// caller's context; instead, a retry whose context can end takes a slot in
// a fixed table (a retry that took no tokens takes none: it has nothing to
// give back), and a sweep walks the table when the bucket runs dry, when the
// table is full, at most once a reclaimGrace as such retries come, and when
// the retryer's Remaining is read. A sweep refunds a held retry whose
// context it finds done when
//
//   - it saw the context done before the retry's backoff was due to end
//     (the sleep was cut short, so the retry was never sent), or
//   - the context has been done for reclaimGrace and the retry is still not
//     released (the SDK releases a sent retry as soon as its attempt
//     returns, which a done context makes prompt; a release later than
//     that finds its tokens refunded, and settles the difference: see
//     ticket.settleLate),
//
// and stops tracking, refunding nothing, a held retry whose context lives
// on when it is still not released abandonAfter after its backoff's end.
//
// A released retry keeps the SDK's accounting: a sent retry has spent its
// cost, even if its context ends before the middleware releases it.
//
// Each slot has its release built once, so a retry allocates nothing. The
// release relies on what the SDK guarantees: it is called at most once. A
// slot whose retry was refunded instead of released is retired, never
// handed out again, and replaced by a new one, so that a release that still
// comes, late, cannot touch another retry's tokens.
const (
	reclaimGrace = 50 * time.Millisecond
	// abandonAfter is how long after its backoff a retry whose context
	// lives on holds its slot at most: the SDK's middleware drops a
	// retry's release without ending its context when it cannot rewind
	// the request's body (an upload from a pipe), and under a context
	// that lives as long as the process the slot was held for good; the
	// table filled, every retry then scanned it twice and a sweep of it
	// ran every millisecond (95-124 µs a retry, against 3.1 µs), and a
	// cancelled backoff's tokens were kept (helper-171). Such a retry is
	// no longer tracked, its tokens left spent, as the SDK leaves them:
	// one still being sent (an attempt of over a minute) releases them
	// itself, and refunded instead, the retries of an outage whose
	// attempts hang would have refilled the budget every minute
	// (helper-172: 350 retries in 10 minutes against 35). Not in a lane
	// with a send-rate limiter, whose queue may hold the attempt longer
	// (see due).
	abandonAfter = time.Minute
	// trackSlots is the size of each of the trackShards shards: at most
	// 4096 retries are tracked at once (a retry whose backoff was cut
	// stays tracked for reclaimGrace after a sweep first sees it, so this
	// covers some 80,000 cuts a second); beyond that, as with the SDK, a
	// cancelled backoff keeps its cost. Slots, about 150 bytes each with
	// their release, are made as they are first needed.
	trackSlots  = 512
	trackShards = 8
	// takeLooks is how many of the slots made a retry looks at before it
	// makes another, while fewer than trackSlots are made: a bound on a
	// decision's cost where free slots are few among those made, paid in
	// slots made beyond those held at once. With 2,048 retries held and 8
	// goroutines' 32,000 taken and released beside them (helper-248's
	// stress), 8 looks made 3,077 slots and 32 made 2,888; 64 made 2,059
	// to 2,062, as looking at every slot made did (2,063).
	takeLooks = 64
	// fullRecheck is how long a table found full is taken as full: the
	// retries in that time are not tracked (as with the SDK, a cancelled
	// backoff keeps its cost) without looking, but for the last slot that
	// came free in each shard (see trackShard.freed), and the table is
	// swept at most once in it. Scanning all 4,096 slots twice for each retry and
	// sweeping them every millisecond, with more live retries in their
	// backoffs than that (an outage's throttles on a busy host), cost each
	// retry decision some 96 µs, against 0.95 µs with 4,000 and 5.6 µs for
	// the SDK's (helper-200).
	fullRecheck = 10 * time.Millisecond
)

// Slot states. A slot's word holds its state in the low stateBits bits,
// its generation (counting the retries that held it, modulo 2^genBits) in
// the next genBits, and, while a retry holds it, when that retry's backoff
// ends (since the table's epoch in wakeUnits, 0 until known) in the rest,
// so that one atomic operation moves them together: taking a slot,
// recording the backoff's end and a sweep's look each cost one. A
// reference carries the generation it was given, so one kept past its
// retry's release (a hand-off no RetryDelay took) cannot claim the slot
// from the retry that holds it next.
const (
	slotFree     uint64 = iota
	slotSetup           // being filled by track, or emptied by its release
	slotHeld            // a retry holds it
	slotSweeping        // a sweep refunds it; the owner waits, other sweeps pass it by
	slotRetired         // refunded; never handed out again
	slotLooking         // a sweep asks whether its retry is due; the owner and other sweeps wait

	stateBits = 3
	genBits   = 13
	wakeShift = stateBits + genBits
	stateMask = 1<<stateBits - 1
	genMask   = (1<<genBits - 1) << stateBits
	// wakeUnit is the backoff end's unit in the word. maxWake is the
	// latest it holds, some 8.9 years after the epoch: a later one (a
	// clock or a backoff far out) is taken as that, which only delays its
	// refund to reclaimGrace.
	wakeUnit = time.Microsecond
	maxWake  = time.Duration(1<<(64-wakeShift)-1) * wakeUnit

	// anyGeneration matches a slot held by any retry: the release handed
	// to the SDK, which only the slot's current holder has.
	anyGeneration = ^uint64(0)
)

// tracked is the table of held retries whose context can end.
type tracked struct {
	now       func() time.Time
	epoch     atomic.Pointer[time.Time] // see since
	lastSweep atomic.Int64              // since the epoch
	// fullAt is when a retry last found every slot taken, since the
	// epoch; 0 when the last retry that looked found one (see
	// fullRecheck). freedSinceFull counts the slots that came free since.
	fullAt         atomic.Int64
	freedSinceFull atomic.Int32
	shards         [trackShards]trackShard
}

type trackShard struct {
	cursor atomic.Uint32
	// made counts the places of slots that were made: slots[made:] were
	// never needed (see take). A retired slot's place stays counted; the
	// next retry that comes to it makes a new slot there.
	made atomic.Uint32
	// slots is made by the first retry the shard tracks (see tableOf):
	// made by New, the eight shards' 4 KB each were most of a retryer's
	// 53 KB, for retries a client may never make.
	slots   atomic.Pointer[[trackSlots]atomic.Pointer[trackSlot]]
	sweepMu sync.Mutex // one sweep of the shard at a time
	// freedSlot is the index, plus one, of the shard's slot that last came
	// free; 0 when none, or once a retry took the hint. While the table is
	// marked full a retry tries these alone (see track).
	freedSlot atomic.Uint32
	table     *tracked
	// The shards were 4 KB apart while their slots were arrays; made on
	// first use, they would share cache lines, which the retries landing
	// on different shards write (cursor, freedSlot): the sharding is there
	// to keep them apart (helper-232).
	_ [64]byte
}

// freed notes that slot i of the shard came free: while the table is
// marked full, a retry takes it without a scan. (Cleared instead, the mark
// made the retry after the one that took the slot scan the whole table
// twice again: 40 µs a decision where slots came free one at a time in a
// full table, helper-207. Only the last freed slot of a shard is noted:
// the others wait for the next scan, fullRecheck at most.)
//
// While the table is marked, the frees are counted: once more slots came
// free than there are shards, the mark no longer holds, and the next retry
// scans (a mass release, an outage's retries released as the service
// recovered, left all but 8 of the next 10 ms's retries untracked,
// helper-208).
func (sh *trackShard) freed(i int) {
	sh.freedSlot.Store(uint32(i) + 1)
	if sh.table.fullAt.Load() != 0 {
		sh.table.freedSinceFull.Add(1)
	}
}

// trackSlot is one held retry.
type trackSlot struct {
	word atomic.Uint64 // state, generation and backoff end; see the slot states

	// Written by track, and emptied by the release, in slotSetup; read by
	// the owner and by sweeps in slotHeld, slotLooking or slotSweeping.
	ctx context.Context
	t   ticket
	// doneSeen is when a sweep first saw the context done, since the
	// epoch, and heldSeen when one first saw it live; 0 before. Written by
	// track in slotSetup and by sweeps in slotLooking or slotSweeping,
	// which the state makes exclusive.
	doneSeen, heldSeen time.Duration
	// swept: a sweep refunded the retry, putting refunded tokens back in
	// the bucket (both written before the slot is retired, read after), so
	// a release that still comes was sent. abandoned: a sweep stopped
	// tracking the retry, refunding nothing (see abandonAfter), so a
	// release that still comes is the retry's own.
	swept, abandoned bool
	refunded         uint

	release func(error) error // built once: claims the slot and releases t
}

// trackRef names a held retry in the table: its slot, the slot's
// generation while the retry holds it, and its shard; the zero value names
// none.
type trackRef struct {
	slot  *trackSlot
	gen   uint64
	shard *trackShard
}

func newTracked(now func() time.Time) *tracked {
	tr := &tracked{now: now}
	epoch := now()
	tr.epoch.Store(&epoch)
	for i := range tr.shards {
		tr.shards[i].table = tr
	}
	return tr
}

func newTrackSlot(sh *trackShard, i int) *trackSlot {
	s := &trackSlot{}
	s.release = func(err error) error {
		// Claimed for setup, the slot is the releaser's alone: it lets go
		// of the retry's context and ticket (the caller's request-scoped
		// values may be large, and 4096 slots would keep them for as long
		// as the retryer lives), then frees the slot.
		if !s.claim(anyGeneration, slotSetup) {
			if s.word.Load()&stateMask == slotRetired {
				// Retired for good, the slot keeps this retry's ticket.
				switch {
				case s.abandoned:
					return s.t.release(err)
				case s.swept:
					s.t.settleLate(err, s.refunded)
				}
			}
			return nil
		}
		t := s.t
		s.ctx, s.t = nil, ticket{}
		s.word.Store(s.word.Load()&genMask | slotFree)
		sh.freed(i)
		return t.release(err)
	}
	return s
}

// claim moves the slot, held by the retry of generation gen (or by any,
// with anyGeneration), to state to, waiting out a sweep that looks at it.
// It fails when that retry no longer holds it: released or refunded.
func (s *trackSlot) claim(gen, to uint64) bool {
	return s.whileHeld(gen, func(w uint64) uint64 { return w&genMask | to })
}

// whileHeld moves the word w of the slot, held by the retry of generation
// gen (or by any, with anyGeneration), to next(w), waiting out a sweep that
// looks at it. It fails when that retry no longer holds it.
func (s *trackSlot) whileHeld(gen uint64, next func(w uint64) uint64) bool {
	for {
		w := s.word.Load()
		if gen != anyGeneration && w&genMask != gen {
			return false
		}
		switch w & stateMask {
		case slotHeld:
			if s.word.CompareAndSwap(w, next(w)) {
				return true
			}
		case slotLooking, slotSweeping:
			runtime.Gosched()
		default:
			return false
		}
	}
}

// since returns the time from the table's epoch to t, monotonic when the
// clock's readings are; saturated for a t some 292 years away.
func (tr *tracked) since(t time.Time) time.Duration { return t.Sub(*tr.epoch.Load()) }

// read returns since(now) for a reading now of the clock. A reading before
// the epoch (a clock without a monotonic reading that stepped back) or so
// far after it that the difference saturates (a clock that read zero when
// the table was made) becomes the epoch: what the table keeps as times
// since the old one is then ahead of every reading, which due and
// reclaimEvery take as a clock that stepped, where negative or saturated
// readings would hold a done retry's tokens for as long as the step, or for
// good. Only clock readings move the epoch, never a time computed from one
// (a backoff's end, which a Backoff of "forever" saturates).
func (tr *tracked) read(now time.Time) time.Duration {
	epoch := tr.epoch.Load()
	d := now.Sub(*epoch)
	if d < 0 || d == math.MaxInt64 {
		moved := new(time.Time)
		*moved = now
		tr.epoch.CompareAndSwap(epoch, moved)
		return 0
	}
	return d
}

// track holds t for a retry whose context ctx can end, and returns its
// reference and the release to hand to the SDK: the first of the release and
// a refund claims the tokens. When the table has no free slot the retry is
// not tracked: the zero reference and t's own release.
//
// now is the time the caller read, or zero; with it, track sweeps the table
// when the last sweep is more than reclaimGrace old.
//
// spread, any number that differs between concurrent retries (the hash of
// their error), picks the shard to look in first.
func (tr *tracked) track(ctx context.Context, t ticket, now time.Time, spread uintptr) (trackRef, func(error) error) {
	if !now.IsZero() {
		tr.reclaimEvery(reclaimGrace, now)
	}
	if full := tr.fullAt.Load(); full != 0 {
		if now.IsZero() {
			now = tr.now()
		}
		// A reading before the mark (another caller's, or a clock
		// stepped back) looks again.
		if d := int64(tr.read(now)) - full; d >= 0 && d < int64(fullRecheck) && tr.freedSinceFull.Load() <= trackShards {
			for i := range tr.shards {
				sh := &tr.shards[i]
				if f := sh.freedSlot.Swap(0); f != 0 {
					if s := sh.takeAt(int(f - 1)); s != nil {
						return holdSlot(ctx, t, sh, s)
					}
				}
			}
			return trackRef{}, t.release
		}
	}
	// Mixed, since aligned addresses vary little in their low bits.
	start := uint32(uint64(spread)*0x9E3779B97F4A7C15>>32) % trackShards
	for try := range 2 {
		for i := range uint32(trackShards) {
			sh := &tr.shards[(start+i)%trackShards]
			if s := sh.take(); s != nil {
				if tr.fullAt.Load() != 0 {
					tr.fullAt.Store(0)
				}
				return holdSlot(ctx, t, sh, s)
			}
		}
		if try == 0 {
			// Full: sweep once, unless a sweep ran in the last
			// fullRecheck (a table full of live retries would make
			// every retry sweep).
			tr.reclaimEvery(fullRecheck, tr.now())
		}
	}
	// Every slot taken: the retries of the next fullRecheck are not
	// tracked without looking. (1 for a mark at the epoch itself, which
	// 0 would read as none.)
	tr.freedSinceFull.Store(0)
	tr.fullAt.Store(max(int64(tr.read(tr.now())), 1))
	return trackRef{}, t.release
}

// holdSlot gives slot s of shard sh, taken for setup, to the retry of t
// under ctx, and returns its reference and release.
func holdSlot(ctx context.Context, t ticket, sh *trackShard, s *trackSlot) (trackRef, func(error) error) {
	s.ctx, s.t, s.doneSeen, s.heldSeen = ctx, t, 0, 0
	gen := (s.word.Load() + 1<<stateBits) & genMask
	s.word.Store(gen | slotHeld)
	return trackRef{slot: s, gen: gen, shard: sh}, s.release
}

// reclaimEvery sweeps the table unless a sweep ran less than every ago.
func (tr *tracked) reclaimEvery(every time.Duration, now time.Time) {
	at := int64(tr.read(now))
	last := tr.lastSweep.Load()
	// A last sweep ahead of a reading that did not step back was made
	// after it, and covered it.
	if at-last < int64(every) && !steppedBack(time.Duration(at), time.Duration(last)) || !tr.lastSweep.CompareAndSwap(last, at) {
		return
	}
	_ = tr.sweep(now)
}

// take returns a free slot of the shard in slotSetup, or nil when every
// slot is taken. It makes a slot only when takeLooks looks among those
// made find none free, so that a shard holds about as many slots as retries
// were held in it at once: made wherever the cursor came next, one retry
// at a time made all 512 over 512 retries (0.8 MB a retryer once its
// errors had spread over the eight shards). It looks first at the slot
// freed last, which is the one free slot when the others are held by
// retries that stay (their backoffs long): the cursor, just past it, went
// round every slot made to find it (helper-248: 128 looks a decision with
// 1,000 retries held, 6 times the time of a decision, against 1.3 when
// the places not yet made were found ahead of the cursor).
func (sh *trackShard) take() *trackSlot {
	made := sh.made.Load()
	if f := sh.freedSlot.Load(); f != 0 && f <= made {
		if s := sh.takeAt(int(f - 1)); s != nil {
			return s
		}
	}
	looks := made
	if made < trackSlots {
		looks = min(made, takeLooks)
	}
	for {
		for range looks {
			if s := sh.takeAt(int(sh.cursor.Add(1) % made)); s != nil {
				return s
			}
		}
		// Each turn makes a slot, or finds another retry made one: at
		// most trackSlots turns.
		for made < trackSlots {
			if sh.made.CompareAndSwap(made, made+1) {
				if s := sh.takeAt(int(made)); s != nil {
					return s
				}
			}
			made = sh.made.Load()
		}
		if looks == made {
			return nil // every slot made, and every one looked at is taken
		}
		looks = made // all made meanwhile: look at every one
	}
}

// takeAt returns slot i of the shard in slotSetup when it is free, making
// it when it was not made yet (or was retired), or nil when it is taken.
func (sh *trackShard) takeAt(i int) *trackSlot {
	p := &tableOf(&sh.slots)[i]
	s := p.Load()
	if s == nil {
		s = newTrackSlot(sh, i)
		s.word.Store(slotSetup)
		if p.CompareAndSwap(nil, s) {
			return s
		}
		return nil
	}
	if w := s.word.Load(); w&stateMask == slotFree && s.word.CompareAndSwap(w, w&^stateMask|slotSetup) {
		return s
	}
	return nil
}

// backoffEnds records when the backoff of the retry ref ends.
func (tr *tracked) backoffEnds(ref trackRef, at time.Time) {
	if ref.slot != nil {
		wake := uint64(min(max(tr.since(at), wakeUnit), maxWake)/wakeUnit) << wakeShift
		ref.slot.whileHeld(ref.gen, func(w uint64) uint64 { return wake | w&genMask | slotHeld })
	}
}

// refund gives the tokens of retry ref back, unless its release or an
// earlier refund claimed them, and retires its slot.
func (tr *tracked) refund(ref trackRef) {
	if ref.slot == nil {
		return
	}
	if ref.slot.claim(ref.gen, slotRetired) {
		ref.slot.t.refund() // the slot is retired: its ticket is this retry's for good
		ref.shard.forget(ref.slot)
	}
}

// forget empties the place of the retired slot s; a new slot is made there
// when one is next needed.
func (sh *trackShard) forget(s *trackSlot) {
	slots := sh.slots.Load() // made: s was taken from it
	for i := range slots {
		if slots[i].CompareAndSwap(s, nil) {
			return
		}
	}
}

// reclaim sweeps the table: it refunds the retries whose context ended
// during their backoff, as the comment above the table says, and reports
// whether it refunded any.
func (tr *tracked) reclaim() bool {
	now := tr.now()
	tr.lastSweep.Store(int64(tr.read(now)))
	return tr.sweep(now)
}

func (tr *tracked) sweep(now time.Time) (refunded bool) {
	at := tr.read(now)
	for i := range tr.shards {
		sh := &tr.shards[i]
		for _, d := range sh.sweepLocked(at) {
			refunded = sh.retire(d, tr) || refunded
		}
	}
	return refunded
}

// sweptSlot is a slot a sweep found due for a refund, with the generation
// of the retry that held it then.
type sweptSlot struct {
	slot  *trackSlot
	index int
	gen   uint64
}

// sweepLocked looks at the shard's held slots under its lock, and returns
// those whose retry is due for a refund (see due); every slot is given
// back to its retry before the lock is let go.
func (sh *trackShard) sweepLocked(at time.Duration) (due []sweptSlot) {
	slots := sh.slots.Load()
	if slots == nil {
		return nil // no retry tracked here yet
	}
	sh.sweepMu.Lock()
	defer sh.sweepMu.Unlock()
	for j := range slots {
		s := slots[j].Load()
		if s == nil {
			continue
		}
		// The owner may record its backoff's end between the load and
		// the swap: load again rather than skip a held slot.
		w := s.word.Load()
		for w&stateMask == slotHeld && !s.word.CompareAndSwap(w, w&^stateMask|slotLooking) {
			w = s.word.Load()
		}
		if w&stateMask == slotHeld && s.sweptDue(at, w) {
			due = append(due, sweptSlot{slot: s, index: j, gen: w & genMask})
		}
	}
	return due
}

// sweptDue reports whether the retry of s, which a sweep moved from word w
// to slotLooking, is due for a refund, and gives the slot back (w) even
// when due panics: it asks the caller's context.
func (s *trackSlot) sweptDue(at time.Duration, w uint64) bool {
	defer s.word.Store(w)
	return s.due(at, time.Duration(w>>wakeShift)*wakeUnit)
}

// retire refunds the retry of a slot a sweep found due, unless its release
// or a refund claimed it since (or, its context still live, held past
// abandonAfter, only stops tracking it), and retires the slot, even when
// the refund panics; it reports whether it refunded. It runs outside the
// shard's lock and claims one slot at a time: a refund runs the caller's
// code (a custom RateLimiter's release, Options.Clock through a bucket's
// refill), which may call the retryer back (Remaining sweeps), take long
// or panic. Under the lock, the first deadlocked and a panic left the lock
// held, so that every later sweep, and retry, blocked (helper-112); slots
// held in slotSweeping through another's refund kept their releases
// waiting for it (helper-113). A slot another sweep is refunding is left
// to it, not waited for (helper-114); one another sweep only looks at is
// waited for (helper-115); a slot no longer due when claimed (its retry
// released and the slot taken by a new one of the same generation, 2^13
// takes later) is given back (helper-114). A refund that panics retires its slot as
// having refunded nothing; the panic goes on to the caller. Refunded
// before it is retired: a release that finds the slot retired finds the
// refund made (it waits while the slot is swept) and settles against it.
func (sh *trackShard) retire(d sweptSlot, tr *tracked) bool {
	s := d.slot
	w, ok := s.claimHeld(d.gen)
	if !ok || !s.stillDue(tr, w) {
		return false
	}
	defer func() {
		s.word.Store(slotRetired)
		sh.slots.Load()[d.index].CompareAndSwap(s, nil) // made: the sweep found s in it
		sh.freed(d.index)
	}()
	if s.ctx.Err() == nil {
		// Held past abandonAfter: no longer tracked, nothing refunded.
		s.abandoned = true
		return false
	}
	s.swept, s.refunded = true, 0
	s.refunded = s.t.refund()
	return true
}

// claimHeld moves the slot, held by the retry of generation gen, to
// slotSweeping for a sweep's refund, and returns its word before; unlike
// claim it does not wait out another sweep's refund: a slot in slotSweeping
// is that sweep's to refund. It waits out another sweep's look
// (slotLooking), which may give it back held: passed by then, a slot both
// sweeps found due at different times was left unrefunded by both
// (helper-115).
func (s *trackSlot) claimHeld(gen uint64) (uint64, bool) {
	for {
		w := s.word.Load()
		switch {
		case w&genMask != gen:
			return 0, false
		case w&stateMask == slotLooking:
			runtime.Gosched()
		case w&stateMask != slotHeld:
			return 0, false
		case s.word.CompareAndSwap(w, w&^stateMask|slotSweeping):
			return w, true
		}
	}
}

// stillDue reports whether the retry of s, which a sweep claimed from word
// w, is still due for a refund at a reading of tr's clock taken now,
// after the claim, and gives the slot back (w) when it is not, or when
// asking or reading panics: between
// the sweep's look and its claim the slot may have been released and
// taken 2^13 times, back to the same generation, by a retry whose context
// lives, or ended after it was sent (helper-114, helper-115). Judged at the
// sweep's own reading, older than that retry's backoff end, a sent retry
// looked cut short and was refunded, and one not due had its first sight
// of a done context back-dated (helper-116); read before the claim, the
// slot could still come round in between (helper-117). The claimed slot's
// release waits meanwhile: the Clock must not wait for one (see
// Options.Clock).
func (s *trackSlot) stillDue(tr *tracked, w uint64) (due bool) {
	defer func() {
		if !due {
			s.word.Store(w)
		}
	}()
	return s.due(tr.read(tr.now()), time.Duration(w>>wakeShift)*wakeUnit)
}

// steppedBack reports whether a reading at, since the epoch, behind an
// earlier one, last, is a clock that stepped back: by reclaimGrace or more.
// Less is a reading taken before another caller's, which took the table's
// lock first; taking it for a step would sweep again, or start a grace
// over from a time already past.
func steppedBack(at, last time.Duration) bool { return last-at >= reclaimGrace }

// due reports whether a sweep at time at should refund the slot's retry,
// whose backoff ends at wake (0 when not known yet), one whose context
// ended (see the table's comment), or stop tracking it, one held
// abandonAfter past its backoff's end (when not known, since a sweep
// first saw it held).
func (s *trackSlot) due(at, wake time.Duration) bool {
	if s.ctx.Err() == nil {
		s.doneSeen = 0
		if s.t.lane != nil && s.t.lane.sender != nil {
			// Its attempt may be waiting its turn in the send-rate
			// limiter's queue, for longer than abandonAfter: refused
			// there, the SDK drops the retry's release, and only a
			// sweep that sees the context end gives its tokens back
			// (helper-175: untracked first, they were lost).
			return false
		}
		if s.heldSeen == 0 || steppedBack(at, s.heldSeen) {
			s.heldSeen = max(at, 1)
		}
		since := s.heldSeen
		if wake != 0 {
			since = wake
		}
		return at-since >= abandonAfter
	}
	if s.doneSeen == 0 || steppedBack(at, s.doneSeen) {
		// First seen done; or seen at a reading far ahead of this one (a
		// clock that stepped, an epoch that moved), which would hold the
		// grace for as long as the step: it counts from now.
		s.doneSeen = max(at, 1)
	}
	return (wake != 0 && s.doneSeen < wake) || at-s.doneSeen >= reclaimGrace
}
