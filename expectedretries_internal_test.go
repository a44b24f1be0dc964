package jitterretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpectedRetries(t *testing.T) {
	var e expectedRetries
	a, b := make(chan struct{}), make(chan struct{})
	assert.False(t, claimed(&e, a, t0), "expect nothing expected in the zero value")

	e.expect(a, t0, t0.Add(time.Second), failedAttempt{})
	assert.False(t, claimed(&e, b, t0.Add(time.Second)), "expect another operation's attempt not to be the retry")
	assert.False(t, claimed(&e, a, t0.Add(time.Second-time.Nanosecond)), "expect an attempt asking during the backoff not to be the retry")
	assert.True(t, claimed(&e, a, t0.Add(time.Second+expectedGrace)), "expect the retry still expected within the grace after its backoff")
	assert.False(t, claimed(&e, a, t0.Add(time.Second)), "expect one turn in the retries' line per retry")

	// Operations sharing a context share its channel, one claim per retry
	// due; context.Background's retries are told apart the same way.
	for _, done := range []chan struct{}{a, nil} {
		e.expect(done, t0, t0.Add(2*time.Second), failedAttempt{})
		e.expect(done, t0, t0.Add(time.Second), failedAttempt{})
		assert.True(t, claimed(&e, done, t0.Add(time.Second)), "expect the earliest backoff's retry")
		assert.False(t, claimed(&e, done, t0.Add(time.Second)), "expect the later one still in its backoff")
		assert.True(t, claimed(&e, done, t0.Add(2*time.Second)))
		assert.False(t, claimed(&e, done, t0.Add(2*time.Second)))
	}

	e.expect(a, t0, t0, failedAttempt{})
	assert.False(t, claimed(&e, a, t0.Add(expectedGrace+time.Nanosecond)), "expect a retry that did not come lapsed")
	assert.Empty(t, e.ops)
	assert.Zero(t, e.count)

	// Retries whose operations ended in their backoffs never claim their
	// entries: pending forgets them once the last has lapsed.
	e.expect(a, t0, t0, failedAttempt{})
	e.expect(b, t0, t0.Add(time.Second), failedAttempt{})
	assert.True(t, e.pending(t0.Add(time.Second+expectedGrace)), "expect the later one still expected")
	assert.Equal(t, 2, e.count)
	assert.False(t, e.pending(t0.Add(time.Second+expectedGrace+time.Nanosecond)))
	assert.Empty(t, e.ops)
	assert.Zero(t, e.count)
}

func TestExpectedRetriesStayBounded(t *testing.T) {
	var e expectedRetries
	for i := range 4 * maxExpected {
		done := make(chan struct{})
		if i%2 == 1 {
			done = nil // a context without a Done channel: one entry each
		}
		e.expect(done, t0, t0, failedAttempt{})
	}
	assert.Equal(t, maxExpected, e.count, "expect at most maxExpected retries at once")
	assert.Len(t, e.ops[nil], maxExpected/2)
	late := t0.Add(expectedGrace + time.Nanosecond)
	fresh := make(chan struct{})
	e.expect(fresh, late, late, failedAttempt{})
	assert.Len(t, e.ops, 1, "expect the lapsed ones forgotten to make room")
	assert.Equal(t, 1, e.count)
	assert.True(t, claimed(&e, fresh, late))
}

// TestAFullSetForgetsOnlyTheRetriesOfEndedOperations: the sweep of a full
// set drops the entries of closed Done channels, whose retries never ask
// (the SDK's middleware stops at the context's end), and keeps those of a
// live channel and of nil (context.Background), however far their
// backoffs' ends: a sweep that dropped them all made room as well
// (helper-237).
func TestAFullSetForgetsOnlyTheRetriesOfEndedOperations(t *testing.T) {
	var e expectedRetries
	due := t0.Add(time.Minute)
	live := make(chan struct{})
	e.expect(live, t0, due, failedAttempt{})
	e.expect(nil, t0, due, failedAttempt{})
	for range maxExpected - 2 {
		ended := make(chan struct{})
		close(ended)
		e.expect(ended, t0, due, failedAttempt{})
	}
	require.Equal(t, maxExpected, e.count)
	fresh := make(chan struct{})
	e.expect(fresh, t0, due, failedAttempt{})
	assert.Equal(t, 3, e.count, "expect the ended ones forgotten, the others kept")
	for name, done := range map[string]<-chan struct{}{"live": live, "nil": nil, "fresh": fresh} {
		assert.True(t, claimed(&e, done, due), "expect the %s channel's retry still expected", name)
	}
}

// TestALoopsRetryClaimsNoExpectedRetry: a Do loop's retry is told by its
// loop, and goes ahead without an entry of its own (Do records none); on a
// context it shares with SDK operations (context.Background), it claimed
// the entry of another operation's retry whose backoff had ended, which
// then waited with the first attempts, and took that retry's cause.
func TestALoopsRetryClaimsNoExpectedRetry(t *testing.T) {
	l := newSendRate(SendRateOptions{}, nil)
	cause := errors.New("throttled")
	l.expectRetry(nil, 0, failedAttempt{err: cause, number: 1}) // its backoff over
	loop, _, _, loopAfter := l.reserve(nil, true)
	assert.True(t, loop.retry, "expect the loop's retry in the retries' line")
	assert.Zero(t, loopAfter, "expect no other operation's cause")
	sdk, _, _, after := l.reserve(nil, false)
	assert.True(t, sdk.retry, "expect the SDK operation's retry still expected")
	assert.Same(t, cause, after.err)
}

// TestExpectedRetriesKnowTheFailedAttemptOfTheOneRetryDue: the attempt
// that claims an expected retry's place once its backoff has ended gets the
// failed attempt it follows, unless another retry of its context was due
// at the same time: either may ask first.
func TestExpectedRetriesKnowTheFailedAttemptOfTheOneRetryDue(t *testing.T) {
	var e expectedRetries
	a := make(chan struct{})
	throttled := failedAttempt{err: errors.New("throttled"), number: 2}
	e.expect(a, t0, t0.Add(time.Second), throttled)
	ok, after := e.claim(a, t0.Add(time.Second))
	assert.True(t, ok)
	assert.Equal(t, throttled, after, "expect the retry due to get its failed attempt")

	fiveXX := failedAttempt{err: errors.New("5xx"), number: 1}
	e.expect(a, t0, t0.Add(2*time.Second), throttled)
	e.expect(a, t0, t0.Add(time.Second), fiveXX)
	ok, after = e.claim(a, t0.Add(time.Second))
	assert.True(t, ok)
	assert.Equal(t, fiveXX, after, "expect the one retry due its own cause, the other still backing off")
	ok, after = e.claim(a, t0.Add(2*time.Second))
	assert.True(t, ok)
	assert.Equal(t, throttled, after)

	e.expect(a, t0, t0, throttled)
	e.expect(a, t0, t0, fiveXX)
	for range 2 {
		ok, after = e.claim(a, t0)
		assert.True(t, ok)
		assert.Zero(t, after, "expect no cause when two retries of the context are due at once")
	}
}

// claimed reports whether e.claim found done's attempt an expected retry.
func claimed(e *expectedRetries, done <-chan struct{}, now time.Time) bool {
	ok, _ := e.claim(done, now)
	return ok
}

// TestRetryDelayExpectsOnlyRetriesThatWait: behind a decorator of the older
// aws.Retryer interface, whose attempts come through GetInitialToken and
// never wait, RetryDelay records no expected retry: none would claim it,
// and the set would stay full (helper-157).
func TestRetryDelayExpectsOnlyRetriesThatWait(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for _, older := range []bool{false, true} {
		r := New(func(o *Options) { o.SendRate = &SendRateOptions{} })
		if older {
			r.GetInitialToken()
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, err := r.GetRetryToken(ctx, throttle)
		require.NoError(t, err)
		_, err = r.RetryDelay(1, throttle)
		require.NoError(t, err)
		cancel()
		expected := &r.lanes.main.sender.expected
		if older {
			assert.Empty(t, expected.ops, "expect no entry once GetInitialToken was called")
		} else {
			assert.Len(t, expected.ops, 1, "expect the retry's attempt expected")
		}
	}
}
