// Package inflight counts the requests a server is answering, so that a
// test or a scenario can wait until every request it caused, abandoned ones
// included, has been answered before it checks what the server holds.
package inflight

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Counter counts the requests its handlers are serving. The zero value is
// ready to use; a Counter must not be copied after first use.
type Counter struct {
	n atomic.Int64
}

// Handler returns next, counting the requests it serves.
func (c *Counter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		defer c.n.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// Quiesce waits until no request has been served for settle (a request a
// proxy accepted may reach the server a little after the proxy answered),
// looking every poll. When ctx ends first, it returns ctx's error, saying
// how many requests were still being served.
func (c *Counter) Quiesce(ctx context.Context, settle, poll time.Duration) error {
	idleSince := time.Now()
	for {
		if c.n.Load() != 0 {
			idleSince = time.Now()
		} else if time.Since(idleSince) >= settle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d requests still in flight: %w", c.n.Load(), ctx.Err())
		case <-time.After(poll):
		}
	}
}
