package clienttest_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry"
)

// TestFinishedRequestsAreNotKept: once an operation of a real client is
// over, the retryer keeps nothing that reaches its request's context, whose
// values (a Lambda event, a request-scoped cache) it cannot size. The SDK's
// errors hold their response, its request and the request's context, so an
// error kept is a context kept. Under retry.AddWithMaxBackoffDelay, which
// replaces RetryDelay, no hand-off is ever taken: each slot kept its last
// entry (error and context) and up to four evicted errors, some 1,300
// requests' contexts for the retryer's life (helper-68: 408 MB with 1 MB
// values); now the table empties once RetryDelay is seen not to come.
func TestFinishedRequestsAreNotKept(t *testing.T) {
	type payloadKey struct{}
	cases := []struct {
		name   string
		wrap   func(aws.Retryer) aws.Retryer
		script []reply
		bound  int
	}{
		{"the SDK's middleware", func(r aws.Retryer) aws.Retryer { return r }, []reply{serverErr, ok}, 0},
		{"under retry.AddWithMaxBackoffDelay", func(r aws.Retryer) aws.Retryer {
			return retry.AddWithMaxBackoffDelay(r, time.Microsecond)
		}, []reply{serverErr, ok}, 0},
		// The last attempt's error, which no GetRetryToken asks for, stays
		// in the classification cache until another error takes its slot.
		{"every attempt failing", func(r aws.Retryer) aws.Retryer { return r }, []reply{serverErr}, 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newScriptServer(t, c.script...)
			srv.cycle = true
			r := jitterretry.New(func(o *jitterretry.Options) {
				o.BaseDelay, o.MaxBackoff = time.Microsecond, time.Microsecond
				o.BucketCapacity = 1 << 30 // every retry paid, whatever fails
			})
			client := newClient(srv.URL, c.wrap(r))
			const operations = 1500
			payloads := make([]weak.Pointer[[1024]byte], 0, operations)
			for range operations {
				payload := new([1024]byte)
				payloads = append(payloads, weak.Make(payload))
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), payloadKey{}, payload), time.Hour)
				err := putItem(ctx, client)
				cancel()
				if len(c.script) > 1 {
					require.NoError(t, err)
				}
			}
			runtime.GC()
			runtime.GC()
			alive := 0
			for _, p := range payloads {
				if p.Value() != nil {
					alive++
				}
			}
			// The runtime and the HTTP client may still hold a few requests
			// (idle connections, stopped timers).
			assert.LessOrEqual(t, alive, c.bound+8, "expect the contexts of finished requests collected")
			runtime.KeepAlive(r)
		})
	}
}
