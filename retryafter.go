package jitterretry

// This file owns the x-amz-retry-after hint: the delay the SDK's retry
// middleware actually sleeps for a given backoff.

import (
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfterExtra is how far the SDK's middleware lets an
// x-amz-retry-after hint stretch a backoff.
const maxRetryAfterExtra = 5 * time.Second

// retryAfter is the x-amz-retry-after hint of a failed attempt's response,
// read once: ms milliseconds when ok.
type retryAfter struct {
	ms int64
	ok bool
}

// retryAfterOf reads the hint from resp (nil when the error carried none).
// A missing, non-numeric or negative value is no hint, as in the SDK.
func retryAfterOf(resp *http.Response) retryAfter {
	if resp == nil {
		return retryAfter{}
	}
	// The header's canonical key, looked up as http.Header.Get would
	// without canonicalising it on every call.
	v := resp.Header["X-Amz-Retry-After"]
	if len(v) == 0 || v[0] == "" {
		return retryAfter{}
	}
	ms, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil || ms < 0 {
		return retryAfter{}
	}
	return retryAfter{ms: ms, ok: true}
}

// wait returns what the SDK's retry middleware (v1.48.0) sleeps after
// RetryDelay returned backoff: the hint clamped to [backoff, backoff+5s];
// backoff when there is no hint.
//
// It is the middleware's own arithmetic, overflow included: a hint of
// 9,223,372,036,855 ms or more wraps around when converted to a Duration,
// and the middleware then sleeps whatever the clamp makes of the wrapped
// value (often the backoff itself); a backoff within 5 s of the largest
// Duration makes the clamp's upper end wrap below zero, and a negative
// sleep is none. Reproducing it keeps the deadline check and OnRetry true
// to what is slept.
func (h retryAfter) wait(backoff time.Duration) time.Duration {
	if !h.ok {
		return backoff
	}
	hint := time.Duration(h.ms) * time.Millisecond // wraps as the SDK's does
	upper := maxRetryAfterExtra + backoff          // and so does this
	switch {
	case hint < backoff:
		return backoff
	case hint > upper:
		return max(upper, 0)
	}
	return hint
}
