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

	e.expect(nil, t0, t0, failedAttempt{})
	assert.False(t, claimed(&e, nil, t0), "expect a context without a Done channel never told apart")

	e.expect(a, t0, t0.Add(time.Second), failedAttempt{})
	assert.False(t, claimed(&e, b, t0), "expect another operation's attempt not to be the retry")
	assert.True(t, claimed(&e, a, t0.Add(time.Second+expectedGrace)), "expect the retry still expected within the grace after its backoff")
	assert.False(t, claimed(&e, a, t0), "expect one turn in the retries' line per retry")

	// Operations sharing a context share their entry, one claim per retry.
	e.expect(a, t0, t0, failedAttempt{})
	e.expect(a, t0, t0, failedAttempt{})
	assert.True(t, claimed(&e, a, t0))
	assert.True(t, claimed(&e, a, t0))
	assert.False(t, claimed(&e, a, t0))

	e.expect(a, t0, t0, failedAttempt{})
	assert.False(t, claimed(&e, a, t0.Add(expectedGrace+time.Nanosecond)), "expect a retry that did not come lapsed")
	assert.Empty(t, e.ops)
}

func TestExpectedRetriesStayBounded(t *testing.T) {
	var e expectedRetries
	for range 4 * maxExpected {
		e.expect(make(chan struct{}), t0, t0, failedAttempt{})
	}
	assert.Len(t, e.ops, maxExpected, "expect at most maxExpected operations at once")
	late := t0.Add(expectedGrace + time.Nanosecond)
	fresh := make(chan struct{})
	e.expect(fresh, late, late, failedAttempt{})
	assert.Len(t, e.ops, 1, "expect the lapsed ones forgotten to make room")
	assert.True(t, claimed(&e, fresh, late))
}

// TestExpectedRetriesKnowTheFailedAttemptOfTheOneRetryDue: the attempt
// that claims an expected retry's place once its backoff has ended gets the
// failed attempt it follows; one that asks during the backoff (another
// operation's first attempt, on a shared context) gets the place but no
// cause, nor does either of two retries expected of one context at once.
func TestExpectedRetriesKnowTheFailedAttemptOfTheOneRetryDue(t *testing.T) {
	var e expectedRetries
	a := make(chan struct{})
	throttled := failedAttempt{err: errors.New("throttled"), number: 2}
	e.expect(a, t0, t0.Add(time.Second), throttled)
	ok, after := e.claim(a, t0.Add(time.Second))
	assert.True(t, ok)
	assert.Equal(t, throttled, after, "expect the retry due to get its failed attempt")

	e.expect(a, t0, t0.Add(time.Second), throttled)
	ok, after = e.claim(a, t0.Add(time.Second-time.Nanosecond))
	assert.True(t, ok, "expect an attempt during the backoff to take the retry's place")
	assert.Zero(t, after, "expect it no cause: the retry is still in its backoff")

	e.expect(a, t0, t0, throttled)
	e.expect(a, t0, t0, failedAttempt{err: errors.New("5xx"), number: 1})
	for range 2 {
		ok, after = e.claim(a, t0)
		assert.True(t, ok)
		assert.Zero(t, after, "expect no cause when two retries of the context are expected at once")
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
