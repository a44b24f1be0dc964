package jitterretry

// This file owns the x-amz-retry-after hint: the delay the SDK's retry
// middleware actually sleeps for a given backoff.

import (
	"errors"
	"strconv"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// maxRetryAfterExtra is how far the SDK's middleware lets an
// x-amz-retry-after hint stretch a backoff.
const maxRetryAfterExtra = 5 * time.Second

// withRetryAfter returns what the SDK's retry middleware (v1.48.0) sleeps
// after RetryDelay returned backoff: the x-amz-retry-after hint, in
// milliseconds, clamped to [backoff, backoff+5s]; backoff when the hint is
// missing, not a number or negative.
//
// It is the middleware's own arithmetic, overflow included: a hint of
// 9,223,372,036,855 ms or more wraps around when converted to a Duration,
// and the middleware then sleeps whatever the clamp makes of the wrapped
// value (often the backoff itself). Reproducing it keeps the deadline check
// and OnRetry true to what is slept.
func withRetryAfter(backoff time.Duration, err error) time.Duration {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return backoff
	}
	v := re.Response.Header.Get("X-Amz-Retry-After")
	if v == "" {
		return backoff
	}
	ms, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || ms < 0 {
		return backoff
	}
	hint := time.Duration(ms) * time.Millisecond // wraps as the SDK's does
	upper := maxRetryAfterExtra + backoff
	switch {
	case hint < backoff:
		return backoff
	case hint > upper:
		return upper
	}
	return hint
}
