package jitterretry

import (
	"context"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExpectedRetries(t *testing.T) {
	var e expectedRetries
	a, b := make(chan struct{}), make(chan struct{})
	assert.False(t, e.claim(a, t0), "expect nothing expected in the zero value")

	e.expect(nil, t0, t0)
	assert.False(t, e.claim(nil, t0), "expect a context without a Done channel never told apart")

	e.expect(a, t0, t0.Add(time.Second))
	assert.False(t, e.claim(b, t0), "expect another operation's attempt not to be the retry")
	assert.True(t, e.claim(a, t0.Add(time.Second+expectedGrace)), "expect the retry still expected within the grace after its backoff")
	assert.False(t, e.claim(a, t0), "expect one turn in the retries' line per retry")

	// Operations sharing a context share their entry, one claim per retry.
	e.expect(a, t0, t0)
	e.expect(a, t0, t0)
	assert.True(t, e.claim(a, t0))
	assert.True(t, e.claim(a, t0))
	assert.False(t, e.claim(a, t0))

	e.expect(a, t0, t0)
	assert.False(t, e.claim(a, t0.Add(expectedGrace+time.Nanosecond)), "expect a retry that did not come lapsed")
	assert.Empty(t, e.ops)
}

func TestExpectedRetriesStayBounded(t *testing.T) {
	var e expectedRetries
	for range 4 * maxExpected {
		e.expect(make(chan struct{}), t0, t0)
	}
	assert.Len(t, e.ops, maxExpected, "expect at most maxExpected operations at once")
	late := t0.Add(expectedGrace + time.Nanosecond)
	fresh := make(chan struct{})
	e.expect(fresh, late, late)
	assert.Len(t, e.ops, 1, "expect the lapsed ones forgotten to make room")
	assert.True(t, e.claim(fresh, late))
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
