package jitterretry

// This file owns the end of a successful attempt under AttemptTimeout: its
// context ends when the response body is closed, not at its limit.

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// bodyWatch is the Deserialize-step middleware AttemptTimeout adds next to
// the transport: it wraps each attempt's response body in a watchedBody,
// which the deserializers and the caller then read and close, and hands it
// to AttemptTimeout's Finalize middleware through the attempt's metadata.
type bodyWatch struct{}

func (bodyWatch) ID() string { return "jitterretry.AttemptTimeoutBody" }

func (bodyWatch) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil && resp.Response != nil &&
		resp.Body != nil && resp.Body != http.NoBody {
		body := &watchedBody{ReadCloser: resp.Body}
		resp.Body = body
		md.Set(watchedBodyKey{}, body)
	}
	return out, md, err
}

// watchedBodyKey keys the attempt's watchedBody in its metadata.
type watchedBodyKey struct{}

// takeWatchedBody returns the attempt's watchedBody, nil when it had none
// (no HTTP response, no body), and sets its key in md to nil (Metadata has
// no delete): the metadata ends up in the operation's result, which need
// not hold the body.
func takeWatchedBody(md *middleware.Metadata) *watchedBody {
	body, _ := md.Get(watchedBodyKey{}).(*watchedBody)
	if body != nil {
		md.Set(watchedBodyKey{}, nil)
	}
	return body
}

// The states of a watchedBody.
const (
	bodyOpen   int32 = iota // not closed, no end set
	bodyClosed              // closed
	bodyEnding              // not closed; end runs on Close
)

// watchedBody is a response body that runs end once when it is closed,
// whether it was closed before end was set (a deserializer that read it in
// the attempt) or after (a body the caller streams), and from whichever
// goroutine closes it.
type watchedBody struct {
	io.ReadCloser
	state atomic.Int32
	end   context.CancelFunc // written before the state becomes bodyEnding
}

// Close closes the body, and runs end if it was set.
func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.state.Swap(bodyClosed) == bodyEnding {
		b.end()
	}
	return err
}

// endOnClose runs end when the body is closed, at once if it was already.
// It is called once, after the attempt.
func (b *watchedBody) endOnClose(end context.CancelFunc) {
	b.end = end
	if !b.state.CompareAndSwap(bodyOpen, bodyEnding) {
		end()
	}
}
