package jitterretry

// This file owns the lanes: one per partition key, each with its retry
// token bucket (or the caller's RateLimiter) and its send-rate limiter, and
// the table that finds them by key and forgets idle ones.

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	awsmiddle "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// lane is one retry budget, and one send-rate limiter when that is on.
//
// The SDK adds NoRetryIncrement only when an operation's first attempt
// succeeds, and learns which attempt it is from retry metadata that only its
// own package can read. The middleware releases a retry's token right before
// the same attempt's token, with the same error; so a successful retry
// refunds its cost in full and leaves a skip that the next attempt release
// on this lane consumes instead of adding the increment. Under concurrency
// another goroutine may consume it first, but the totals are the SDK's: one
// increment per first-attempt success, one refund per successful retry.
// Two paths have no such attempt release, and are approximate: Do refunds
// a successful retry without a skip; the older aws.Retryer interface's
// GetInitialToken release (which adds the increment on every success, as
// the SDK's does) takes a pending skip first, so that it does not outlive
// the operation. Interleaved with direct use of the same bucket, that release
// may take another operation's skip (one increment too many), and with
// PartitionKey it sees only the shared lane (a partition's skip stays
// until a direct attempt there takes it). The lanes of a partition's SDK
// services (see lanes.getFor) share the partition's skips with its
// bucket: left on a service's lane, the skips of retries made through
// GetInitialToken, which takes the shared lane's, piled up there and ate
// the increments of later first attempts (helper-219: 20 direct
// successes added none).
type lane struct {
	key     string
	bucket  *TokenBucket      // nil with a foreign limiter
	foreign retry.RateLimiter // the caller's RateLimiter, or nil
	// ownBucket: the bucket is the retryer's, not a RateLimiter of the
	// caller's (which may be shared, and is the caller's to spend).
	ownBucket bool
	// bucketOf is the lane whose bucket (or RateLimiter) this one shares,
	// and whose gauge reports it: the partition's lane, for the lane of
	// one of its SDK services but the first (see lanes.getFor);
	// nil for a lane with its own.
	bucketOf *lane
	// paced is the SDK service and region whose attempts the lane's
	// send-rate limiter paces (see lanes.getFor and paceKey): a service
	// lane's own, or the first service a partition's operations were of
	// (in its region); nil before one came. Set
	// once, under the owning partition's servicesMu.
	paced atomic.Pointer[paceKey]
	// services holds the lanes of the SDK services of the partition (see
	// lanes.getFor), replaced whole under servicesMu when one is
	// added.
	services   atomic.Pointer[[]*lane]
	servicesMu sync.Mutex
	// unpaced is the lane, made on first need under servicesMu, of the
	// partition's SDK services past its bound (see serviceLane): no
	// limiter, the partition's bucket.
	unpaced atomic.Pointer[lane]
	sender  *sendRate // nil when the send-rate limiter is off
	// queued: an attempt took a place in sender's queue.
	queued atomic.Bool
	costs  costs
	// skips counts the successful retries whose attempt release is yet to
	// come (see above); a lane with bucketOf uses that lane's (see
	// pendingSkips).
	skips atomic.Int64
	// isConflict tells a retry's release that its answer was a conflict.
	isConflict func(error) bool
	// used is the table's clock when the lane was last used (see lanes).
	used atomic.Uint64
	// loops counts the Do loops under way whose partition this lane is
	// (see lanes.holdForLoop): the table does not forget it meanwhile.
	loops atomic.Int32
	// attempts estimates how long the lane's attempts take, for the
	// deadline margin.
	attempts attemptTimes
	// throttles hears of the retry decisions after a throttle, refused
	// ones included: a Do loop in a named partition looks at it around a
	// call to learn whether the partition was throttled meanwhile. Read
	// by every throttle's decision, it has cache lines of its own.
	_         cacheLinePad
	throttles throttleNews
	_         cacheLinePad
	// service is the SDK service the lane serves, an attribute of its
	// gauges, "" once it served two (see noteService); recorded only when
	// the retryer has metrics.
	service atomic.Pointer[string]

	// Built once, so that handing them out allocates nothing.
	attemptRelease              func(error) error
	sendRelease                 func(error) error // attemptRelease that also tells the limiter
	retryRefund, throttleRefund func(error) error
	// pacedRetryRelease is the release of a throttle's retry that the
	// limiter holds back instead of the bucket (see admit): it took
	// nothing and gives nothing back, and as every successful retry it
	// earns no NoRetryIncrement.
	pacedRetryRelease func(error) error
}

type costs struct{ retry, throttle, success uint }

// bucketOwner returns the lane whose bucket l uses: bucketOf, or l.
func (l *lane) bucketOwner() *lane {
	if l.bucketOf != nil {
		return l.bucketOf
	}
	return l
}

// pendingSkips returns the skips of l's bucket: l's own, or those of the
// lane whose bucket it shares, whose GetInitialToken release may be the
// one that takes them.
func (l *lane) pendingSkips() *atomic.Int64 {
	return &l.bucketOwner().skips
}

// newLane returns the lane named key, with a bucket of its own, or, when
// bucketOf is not nil, sharing that lane's.
func newLane(key string, cfg *laneConfig, bucketOf *lane) *lane {
	l := &lane{key: key, costs: cfg.costs, foreign: cfg.foreign, isConflict: cfg.isConflict, bucketOf: bucketOf}
	if cfg.sendRate != nil {
		l.sender = newSendRate(*cfg.sendRate, cfg.limiterClock)
	}
	switch tb, ok := cfg.foreign.(*TokenBucket); {
	case bucketOf != nil:
		l.bucket, l.foreign, l.ownBucket = bucketOf.bucket, bucketOf.foreign, bucketOf.ownBucket
	case ok:
		l.bucket, l.foreign = tb, nil
	case cfg.foreign == nil:
		l.bucket, l.ownBucket = newTokenBucket(cfg.capacity, cfg.refill, cfg.now), true
	}
	l.attemptRelease = onSuccess(func() {
		if !l.consumeSkip() {
			l.give(l.costs.success)
		}
	})
	l.retryRefund = l.refundOnSuccess(l.costs.retry, false)
	l.throttleRefund = l.refundOnSuccess(l.costs.throttle, false)
	l.pacedRetryRelease = l.refundOnSuccess(0, false)
	release := l.attemptRelease
	if l.sender != nil {
		// The limiter learns from successes, conflicts and throttles (see
		// classifier.rateSignal); other failures say nothing of the rate.
		l.sendRelease = func(err error) error {
			if err == nil {
				l.sender.observe(false, l.attempts.estimate())
			} else if throttled, counted := cfg.rateSignal(err); counted {
				l.sender.observe(throttled, l.attempts.estimate())
			}
			return l.attemptRelease(err)
		}
		release = l.sendRelease
	}
	var failed func(error, time.Duration)
	if l.sender != nil {
		// How long throttles take to come back, which the attempt time
		// learnt mostly from successes does not say (see
		// sendRate.noteThrottleTime).
		failed = func(err error, d time.Duration) {
			if throttled, counted := cfg.rateSignal(err); counted && throttled {
				l.sender.noteThrottleTime(d)
			}
		}
	}
	l.attempts.init(cfg.now, release, failed)
	return l
}

// laneConfig is what every lane of a Retryer is built from.
type laneConfig struct {
	costs    costs
	capacity uint
	refill   float64
	foreign  retry.RateLimiter
	sendRate *SendRateOptions
	now      func() time.Time
	// limiterClock is the send-rate limiter's: now when Options.Clock was
	// set, nil (the monotonic clock alone) when it was left to time.Now.
	limiterClock func() time.Time
	partition    func(context.Context) string
	// rateSignal classifies a failed attempt's error for the limiter;
	// isConflict a retry's answer for its release (see retryRelease).
	rateSignal func(error) (throttled, counted bool)
	isConflict func(error) bool
}

// initialRelease is the release of the deprecated GetInitialToken: as the
// SDK's, it adds NoRetryIncrement on every successful attempt, since a
// caller of the aws.Retryer interface asks for it once per attempt. It
// still takes the skip a successful retry left for the attempt release
// that follows it, which on this path is this one: left, the skip would
// cancel the increment of a later first attempt on the direct path.
func (l *lane) initialRelease() func(error) error {
	return onSuccess(func() {
		l.consumeSkip()
		l.give(l.costs.success)
	})
}

func (l *lane) refundOnSuccess(cost uint, forConflict bool) func(error) error {
	return l.retryRelease(func() { l.give(cost) }, forConflict)
}

// retryRelease returns the release of a paid retry, which refunds its
// tokens when the retry succeeds, as the SDK's does, and also when it was
// answered with a conflict (a conditional check failed), which the SDK's
// does not: the service answered as a healthy one does, and on a hot item
// the retries of 5xx and throttles come back as conflicts often enough to
// drain the bucket (Do retries the conflicts without tokens). Only a
// success leaves a skip, for the attempt release that follows it under the
// SDK's middleware: a conflict earns no NoRetryIncrement to skip. The
// retry of a conflict (one the caller made retryable, with
// retry.AddWithErrorCodes, say) is answered by a conflict as often as the
// item stays hot, and refunded, such retries never drained the bucket (an
// outside review: 40 operations on an item that always conflicted, 120
// attempts and the bucket full, against the SDK's 75, 10 left and 23
// refused): forConflict keeps the SDK's accounting for them.
func (l *lane) retryRelease(refund func(), forConflict bool) func(error) error {
	return func(err error) error {
		switch {
		case err == nil:
			refund()
			l.pendingSkips().Add(1)
		case !forConflict && l.isConflict != nil && l.isConflict(err):
			refund()
		}
		return nil
	}
}

func (l *lane) consumeSkip() bool {
	skips := l.pendingSkips()
	for {
		n := skips.Load()
		if n <= 0 {
			return false
		}
		if skips.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// give adds n tokens back, and returns how many went into the lane's own
// bucket (a full one takes fewer; 0 with a foreign limiter, which does not
// say).
func (l *lane) give(n uint) uint {
	if l.bucket != nil {
		return l.bucket.give(n)
	}
	_ = l.foreign.AddTokens(n)
	return 0
}

// releaseNothing is the release of a grant that came without one.
func releaseNothing() error { return nil }

// refusal is why a lane refused a retry's tokens: the tokens available,
// and a foreign limiter's own error.
type refusal struct {
	available uint
	err       error
}

// take takes cost tokens for a retry, of a conflict when forConflict. It
// returns the SDK-style release (refund when the retry succeeds, or is
// answered by a conflict: see retryRelease), the foreign limiter's own
// release (nil with the bucket), and, when refused, why.
func (l *lane) take(ctx context.Context, cost uint, forConflict bool) (release func(error) error, foreignRelease func() error, refused refusal, ok bool) {
	if l.bucket == nil {
		rel, err := l.foreign.GetToken(ctx, cost)
		if err != nil {
			return nil, nil, refusal{l.remaining(), err}, false
		}
		if rel == nil {
			// A limiter that grants without a release (retry.NewStandard
			// calls it when the retry succeeds, and panics): nothing to
			// give back.
			rel = releaseNothing
		}
		return l.retryRelease(func() { _ = rel() }, forConflict), rel, refusal{}, true
	}
	avail, ok := l.bucket.take(cost)
	if !ok {
		return nil, nil, refusal{available: avail}, false
	}
	switch {
	case forConflict:
		release = l.refundOnSuccess(cost, true)
	case cost == l.costs.retry:
		release = l.retryRefund
	case cost == l.costs.throttle:
		release = l.throttleRefund
	default:
		release = l.refundOnSuccess(cost, false)
	}
	return release, nil, refusal{}, true
}

// refund gives a retry's tokens back without a success: the retry was
// refused after it was paid for, or never sent. It returns how many went
// back to the lane's own bucket (a full one takes fewer; 0 with a foreign
// limiter, which does not say).
func (l *lane) refund(cost uint, foreignRelease func() error) uint {
	if foreignRelease != nil {
		_ = foreignRelease()
		return 0
	}
	return l.give(cost)
}

// remaining returns the tokens in the lane's bucket, or what a foreign
// limiter reports through a Remaining method (0 when it has none).
func (l *lane) remaining() uint {
	n, _ := l.tokens()
	return n
}

// tokens returns the tokens left in the lane's bucket, and whether it can
// tell: a custom RateLimiter without a Remaining() uint method cannot.
func (l *lane) tokens() (uint, bool) {
	if l.bucket != nil {
		return l.bucket.Remaining(), true
	}
	if v, ok := l.foreign.(interface{ Remaining() uint }); ok {
		return v.Remaining(), true
	}
	return 0, false
}

// noteService records s, the SDK service of an attempt's operation: the one service
// the lane serves, or "" once it has served two. One retryer from
// config.WithRetryer serves every client of the configuration, an
// assume-role profile's STS client first: its bucket is no one service's.
// A lane that shares another's bucket notes the service there too: that
// lane's gauge reports the bucket.
func (l *lane) noteService(s string) {
	if s == "" {
		return
	}
	noteServiceIn(&l.service, s)
	if l.bucketOf != nil {
		noteServiceIn(&l.bucketOf.service, s)
	}
}

// noteServiceIn records s in p: the first service, or "" once a second
// came.
func noteServiceIn(p *atomic.Pointer[string], s string) {
	for {
		switch had := p.Load(); {
		case had == nil:
			first := s // escapes; s, read on every attempt, must not
			if p.CompareAndSwap(nil, &first) {
				return
			}
			// another service came first: look again
		case *had != s && *had != "":
			several := ""
			p.Store(&several) // from any service to none: never back
			return
		default:
			return
		}
	}
}

// serviceName returns the service noteService recorded, or "".
func (l *lane) serviceName() string {
	if s := l.service.Load(); s != nil {
		return *s
	}
	return ""
}

// limiterSeries returns the service whose attempts ln's send-rate limiter
// paces, as its gauge names it (see lane.paced), and whether the gauge
// reports it at all: a partition's limiter that paced no SDK service's
// attempts is reported once an attempt (outside an SDK operation) took a
// place in its queue: reported from the start, a retryer with InitialRate
// showed a series for a limiter that paced nothing (helper-219).
func limiterSeries(ln *lane) (k paceKey, report bool) {
	if p := ln.paced.Load(); p != nil {
		return *p, true
	}
	return paceKey{}, ln.queued.Load()
}

// paceKey is what a send-rate limiter paces in its partition: an SDK
// service's attempts in one region. Clients of one service in two
// regions, one retryer's, shared a limiter: with us-east-1 throttling
// every other request, eu-west-1 made 27-29 successes a second and
// 175-177 deadline refusals in 4 s, against 11,408 and none apart
// (helper-228).
type paceKey struct{ service, region string }

// idle reports whether forgetting the lane now loses nothing: its bucket is
// full, no skip is pending and its limiters, its services' too, have
// nothing to remember.
func (l *lane) idle() bool {
	if l.pendingSkips().Load() != 0 || l.loops.Load() != 0 {
		return false
	}
	if l.bucket != nil && l.bucket.Remaining() < l.bucket.capacity {
		return false
	}
	remembers := func(s *sendRate) bool { return !s.forgettable() }
	return l.sender == nil || !l.anyLimiter(remembers)
}

// limiterInUse reports whether a limiter of the lane, or of its services,
// has callers waiting.
func (l *lane) limiterInUse() bool {
	return l.sender != nil && l.anyLimiter((*sendRate).inUse)
}

// anyLimiter reports whether f holds for the lane's limiter or one of its
// services' lanes'.
func (l *lane) anyLimiter(f func(*sendRate) bool) bool {
	if f(l.sender) {
		return true
	}
	for _, sl := range l.serviceLanes() {
		if f(sl.sender) {
			return true
		}
	}
	return false
}

// serviceLanes returns the lanes of the partition's SDK services.
func (l *lane) serviceLanes() []*lane {
	if p := l.services.Load(); p != nil {
		return *p
	}
	return nil
}

// onSuccess adapts fn to the SDK's release signature: it runs only when the
// attempt succeeded.
func onSuccess(fn func()) func(error) error {
	return func(err error) error {
		if err == nil {
			fn()
		}
		return nil
	}
}

// Partition table bounds: maxSharedServices SDK services' lanes at most in
// the shared partition, maxPartitionServices in another, besides the first
// service's, the partition's own (see lane.serviceLane); maxPartitions keys
// at most, and a key unused for
// partitionIdleTimeout is forgotten once its lane has nothing to remember.
// A full table forgets its evictBatch least recently used lanes at once, so
// that the keys that follow find room without a scan each (a scan of the
// full table per new key cost 4 µs under the table's lock).
const (
	maxSharedServices    = 64
	maxPartitionServices = 4
	maxPartitions        = 1024
	partitionIdleTimeout = 5 * time.Minute
	evictBatch           = maxPartitions / 16
)

// A partition key longer than maxKeyLen bytes is kept as its first
// keyPrefixLen bytes (whole characters), "…" and 128 bits of its SHA-256,
// at most shortKeyLen bytes: maxPartitions keys of any length then hold
// little memory (1024 keys of 256 KB kept 266 MB), and the metrics, events
// and errors that name the partition stay readable. So is a key that is
// not valid UTF-8, without its invalid bytes: named as it was, it made
// every Prometheus scrape of the process fail, the SDK's own metrics with
// it, for as long as the exporter kept the series (helper-182). (A key of
// the caller's spelled as another's short form shares its partition.)
const (
	maxKeyLen    = 256
	keyPrefixLen = 64
	shortKeyLen  = keyPrefixLen + len("…") + 2*16
)

// appendShortKey appends to dst the form a key longer than maxKeyLen, or
// not valid UTF-8, is kept in. It allocates nothing: it runs on every call
// that names such a key.
func appendShortKey(dst []byte, key string) []byte {
	// Sum256 only reads its input: hashing the string's bytes in place
	// spares a copy of a key that may be large.
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))
	for p := key[:min(len(key), keyPrefixLen)]; p != ""; {
		r, n := utf8.DecodeRuneInString(p)
		if r != utf8.RuneError || n > 1 { // not an invalid byte, nor a character cut at the end
			dst = append(dst, p[:n]...)
		}
		p = p[n:]
	}
	dst = append(dst, "…"...)
	return hex.AppendEncode(dst, sum[:16])
}

// lanes finds the lane of a context's partition key. The lane of key "" is
// never forgotten. Other lanes are forgotten by a sweep, which a new key
// makes once partitionIdleTimeout has passed since the last one or when it
// finds maxPartitions keys: the lanes with nothing to remember (a full
// bucket, an idle limiter) unused since the sweep before go, and, if the
// table is still full, the evictBatch least recently used whatever they
// hold: they start again full. (At a full table, with keys that keep
// coming, sweeps come every evictBatch new keys, and "unused since the
// sweep before" means in the last evictBatch arrivals: an outside review
// saw 860 idle keys go at once. They lose only their learnt attempt
// times.)
//
// A lane's last use is the table's clock then, a logical clock that ticks
// with every new key: lanes are forgotten only when a new key arrives, so
// ordering the uses between arrivals is all the LRU needs, and a use costs a
// load and, once a tick, a store, where a timestamp would cost a clock read
// per attempt.
type lanes struct {
	cfg  laneConfig
	main *lane

	clock atomic.Uint64

	mu         sync.RWMutex
	m          map[string]*lane
	lastSweep  time.Time
	sweptClock uint64 // the clock at the last sweep
	crowded    bool   // the last sweep left the table full: its lanes' callers wait

	// unpacedAt is when (by cfg.now, to within unpacedStamp) an attempt
	// last waited at no send-rate limiter: one of GetInitialToken, whose
	// caller (a decorator written for the older aws.Retryer interface)
	// has no context to wait with; nil when none has. A time, not
	// UnixNano, which a custom Clock's zero time would overflow; stored
	// at most once per unpacedStamp, its allocation is rare. For
	// unpacedFor after it no throttle's retry is left to the limiter's
	// pacing unpaid, in any partition: which retries follow such attempts
	// cannot be told, and theirs were sent at once, as often as the
	// backoff allowed (an outside review: some 8 requests a call, never
	// refused for the budget, while a client using the retryer directly
	// waited in the queue). Until 2026-12-06 one such attempt turned the
	// pacing off for good.
	unpacedAt atomic.Pointer[time.Time]
}

const (
	// unpacedFor is how long after the last attempt through
	// GetInitialToken began retries are not left to the limiter: an
	// operation of such a decorator begins one at least every MaxBackoff
	// (20 s by default) plus its attempt's time while it lasts. An
	// attempt longer than that may leave one retry to the limiter that
	// its next attempt does not wait at (helper-159).
	unpacedFor = time.Minute
	// unpacedStamp is how stale unpacedAt may be: it is written at most
	// once in that time, not on every attempt of the older interface.
	unpacedStamp = time.Second
)

// attemptsWait reports whether every attempt of the last unpacedFor
// waited its turn at the send-rate limiter (none came through
// GetInitialToken), so that a throttle's retry may be left to its pacing.
// A custom Clock stepped back behind the stamp moves the stamp back with
// it: the minute counts from then, not from a time the clock will take
// the step's length to reach again (helper-159: an hour's step kept the
// pacing off for 61 minutes).
func (t *lanes) attemptsWait() bool {
	at := t.unpacedAt.Load()
	if at == nil {
		return true
	}
	now := t.cfg.now()
	if now.Before(*at) {
		t.unpacedAt.CompareAndSwap(at, &now)
		return false
	}
	return now.Sub(*at) > unpacedFor
}

// initialRelease is GetInitialToken's: the shared partition's
// initialRelease, after noting that attempts go unpaced.
func (t *lanes) initialRelease() func(error) error {
	now, at := t.cfg.now(), t.unpacedAt.Load()
	if at == nil || now.Sub(*at) >= unpacedStamp || now.Before(*at) {
		t.unpacedAt.Store(&now)
	}
	return t.main.initialRelease()
}

func newLanes(cfg laneConfig) *lanes {
	return &lanes{cfg: cfg, main: newLane("", &cfg, nil)}
}

// get returns the lane of ctx's partition key (the shared lane for ""),
// or, with the send-rate limiter, that of ctx's SDK service in it (see
// getFor).
func (t *lanes) get(ctx context.Context) *lane {
	return t.getFor(ctx, t.paceOf(ctx, t.serviceOf(ctx)))
}

// serviceOf returns the SDK service of ctx's operation when the lanes need
// it, with the send-rate limiter; "" otherwise.
func (t *lanes) serviceOf(ctx context.Context) string {
	if t.cfg.sendRate == nil {
		return ""
	}
	return awsmiddle.GetServiceID(ctx)
}

// paceOf returns the key of service s's limiter for ctx's operation: s in
// the operation's region (none outside an SDK operation).
func (t *lanes) paceOf(ctx context.Context, s string) paceKey {
	if s == "" || t.cfg.sendRate == nil {
		return paceKey{} // no lookup for the gauges' service alone
	}
	return paceKey{s, awsmiddle.GetRegion(ctx)}
}

// getFor returns the lane of ctx's partition key (the shared lane for ""),
// or, with the send-rate limiter, that of s (an SDK service in a region)
// in it; the partition's own for no service (outside an SDK operation),
// which is its first service's. With the limiter, each SDK service's
// attempts in a partition have a lane of their own (see lane.serviceLane),
// sharing the partition's bucket: one limiter per partition, service and
// region, one retry budget per partition. A service's throttles say
// nothing of another's capacity: in
// one lane, an assume-role credential refresh (STS, through the retryer
// that config.WithRetryer gives every client, under the context, and so in
// the partition, of the operation that needed it) waited in a throttled
// table's queue, while every caller waited on it (a scratch test of
// 2026-12-07: 178 failures in 8 s against 10 with the STS client on a
// retryer of its own).
func (t *lanes) getFor(ctx context.Context, s paceKey) *lane {
	l := t.main
	if t.cfg.partition != nil {
		if key := t.cfg.partition(ctx); key != "" {
			l = t.partition(key)
		}
	}
	if t.cfg.sendRate != nil {
		if s.service != "" {
			most := maxPartitionServices
			if l == t.main {
				most = maxSharedServices
			}
			return l.serviceLane(s, most, &t.cfg)
		}
	}
	return l
}

// serviceLane returns the lane of SDK service s in l's partition (see
// lanes.getFor): l itself for the first service its operations
// were of, whose limiter l's is, and for each other a lane made on its
// first call, from cfg. So a partition of one service in one region, the
// usual one, keeps one limiter (with two for each, PartitionByOperation's
// 1024 keys held 8 MiB, not 4: helper-221). A process calls a handful of services, and a
// partition's operations mostly one (and the credential refresh they need,
// another): their lanes are forgotten with the partition's, never alone,
// and are found without a lock. Past most services besides the first,
// the lanes kept stay bounded: the others share one lane with no limiter
// (their attempts unpaced, as without SendRate) over the partition's
// bucket. Sharing the partition's own limiter, the first service's, an
// assume-role credential refresh in a partition of six services (STS
// last) waited in its table's throttled queue, 167 failures in 8 s
// against 5-9 (helper-223); and those services' throttles would cut the
// first's rate.
func (l *lane) serviceLane(s paceKey, most int, cfg *laneConfig) *lane {
	if sl := l.pacing(s); sl != nil {
		return sl
	}
	if u := l.unpaced.Load(); u != nil && len(l.serviceLanes()) >= most {
		return u // past the bound: no lock for each attempt
	}
	l.servicesMu.Lock()
	defer l.servicesMu.Unlock()
	if l.paced.Load() == nil {
		first := s.clone()
		l.paced.Store(&first)
		return l
	}
	if sl := l.pacing(s); sl != nil {
		return sl
	}
	ls := l.serviceLanes()
	if len(ls) >= most {
		if u := l.unpaced.Load(); u != nil {
			return u
		}
		unlimited := *cfg
		unlimited.sendRate = nil
		u := newLane(l.key, &unlimited, l)
		l.unpaced.Store(u)
		return u
	}
	// Named as the partition: only its limiter is the service's own.
	sl := newLane(l.key, cfg, l)
	name := s.clone()
	sl.paced.Store(&name)
	ls = append(slices.Clip(ls), sl)
	l.services.Store(&ls)
	return sl
}

// pacing returns the lane of l's partition whose limiter paces service s,
// if there is one yet.
func (l *lane) pacing(s paceKey) *lane {
	if p := l.paced.Load(); p != nil && *p == s {
		return l
	}
	for _, sl := range l.serviceLanes() {
		if *sl.paced.Load() == s {
			return sl
		}
	}
	return nil
}

// clone returns k with strings of its own: the lanes outlive the call
// whose context k was read from.
func (k paceKey) clone() paceKey {
	return paceKey{strings.Clone(k.service), strings.Clone(k.region)}
}

// partition returns the lane of partition key key, not "", made on its
// first call.
func (t *lanes) partition(key string) *lane {
	var (
		l     *lane
		ok    bool
		short []byte
	)
	if len(key) > maxKeyLen {
		var buf [shortKeyLen]byte
		short = appendShortKey(buf[:0], key)
	}
	t.mu.RLock()
	if short == nil {
		// Every key kept is valid UTF-8: one found as it is needs no
		// check (one on every call cost 11-15 ns of an attempt's 84).
		if l, ok = t.m[key]; !ok && !utf8.ValidString(key) {
			var buf [shortKeyLen]byte
			short = appendShortKey(buf[:0], key)
		}
	}
	if short != nil {
		l, ok = t.m[string(short)] // no copy for a lookup
	}
	t.mu.RUnlock()
	if !ok {
		if short != nil {
			key = string(short)
		} else {
			// The table outlives the call: keep a key of our own, not
			// one cut from a larger string the caller holds (a table
			// name read out of a request's body), which would keep all
			// of it.
			key = strings.Clone(key)
		}
		l = t.add(key)
	}
	if now := t.clock.Load(); l.used.Load() != now {
		l.used.Store(now)
	}
	return l
}

// holdForLoop returns the lane of ctx's partition, as get does, for a Do
// loop, and the lane it holds, whose letGo the loop calls when it ends:
// until then the table does not forget the partition's lane. A loop sleeps in its backoffs and waits on
// its fn's calls without looking its lane up; forgotten meanwhile by a
// churn of new keys, it went on paying from a bucket the partition's new
// calls no longer saw, which then spent twice the capacity, and heard none
// of the partition's throttles (helper-255). The hold is counted, then the
// lane found in the table still: a sweep between the lookup and the count
// had forgotten it, and the lookup is made again.
func (t *lanes) holdForLoop(ctx context.Context) (l, held *lane) {
	for {
		l = t.get(ctx)
		held = l.bucketOwner()
		held.loops.Add(1)
		if kept, ok := t.lookup(held.key); ok && kept == held {
			return l, held
		}
		held.letGo()
	}
}

// letGo ends a Do loop's hold of l (see lanes.holdForLoop).
func (l *lane) letGo() { l.loops.Add(-1) }

// lookup returns the lane of key, if it exists.
func (t *lanes) lookup(key string) (*lane, bool) {
	if key == "" {
		return t.main, true
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	l, ok := t.m[key]
	return l, ok
}

// each calls fn for every lane, the main one first, each partition's
// before its services'.
func (t *lanes) each(fn func(*lane)) {
	t.mu.RLock()
	ls := make([]*lane, 1, len(t.m)+1)
	ls[0] = t.main
	for _, l := range t.m {
		ls = append(ls, l)
	}
	t.mu.RUnlock()
	for _, l := range ls {
		fn(l)
		for _, sl := range l.serviceLanes() {
			fn(sl)
		}
	}
}

func (t *lanes) add(key string) *lane {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.m[key]; ok {
		return l
	}
	if t.m == nil {
		t.m = map[string]*lane{}
	}
	t.clock.Add(1)
	now := t.cfg.now()
	if now.Before(t.lastSweep) {
		// A clock stepped back (only a custom Clock can): the interval
		// starts over from the new time, rather than wait out the step.
		t.lastSweep = now
	}
	// A table whose last sweep left it full (too few lanes to forget:
	// their callers wait) sweeps again once in evictBatch new keys: it
	// swept, a sort and every limiter's lock under the table's, for every
	// new key (helper-201: 961 µs a key at 3,000 lanes in use). Any other
	// full table sweeps at once (counted from the last sweep of any kind,
	// an idle sweep just below the bound let it hold 1078 lanes with nobody
	// waiting: helper-202).
	if now.Sub(t.lastSweep) >= partitionIdleTimeout || len(t.m) >= maxPartitions && (!t.crowded || t.clock.Load()-t.sweptClock >= evictBatch) {
		t.sweepLocked(now)
	}
	l := newLane(key, &t.cfg, nil)
	l.used.Store(t.clock.Load())
	t.m[key] = l
	return l
}

// sweepLocked forgets the lanes with nothing to remember that were unused
// since the sweep before it, and, if the table is still full, the
// evictBatch least recently used lanes whatever they hold, but for those
// that Do loops under way hold (see holdForLoop) and those
// whose send-rate limiter has callers waiting: forgotten, the callers in
// its queue kept to its pace while the key's new callers got a new
// limiter at InitialRate, two limiters for one key (helper-200: a MaxRate
// of 10/s sent 20/s under a churn of 1,100 new keys, a rate cut to 12/s
// went back to 160/s). The table then holds more than maxPartitions lanes
// only while so many have callers waiting, and evictBatch new keys more:
// a bound set by the callers' goroutines.
func (t *lanes) sweepLocked(now time.Time) {
	for k, l := range t.m {
		if l.used.Load() < t.sweptClock && l.idle() {
			delete(t.m, k)
		}
	}
	t.lastSweep, t.sweptClock = now, t.clock.Load()
	t.crowded = false
	if len(t.m) < maxPartitions {
		return
	}
	type use struct {
		key string
		at  uint64
	}
	uses := make([]use, 0, len(t.m))
	for k, l := range t.m {
		if !l.limiterInUse() && l.loops.Load() == 0 {
			uses = append(uses, use{k, l.used.Load()})
		}
	}
	slices.SortFunc(uses, func(a, b use) int { return cmp.Compare(a.at, b.at) })
	for _, u := range uses[:min(len(uses), len(t.m)-maxPartitions+evictBatch)] {
		delete(t.m, u.key)
	}
	t.crowded = len(t.m) >= maxPartitions
}
