package inflight

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuiesceWaitsForARequestInFlight: Quiesce returns only once the
// request being served was answered, and a context that ends first gives
// its error with the count.
func TestQuiesceWaitsForARequestInFlight(t *testing.T) {
	var c Counter
	release := make(chan struct{})
	entered := make(chan struct{})
	srv := httptest.NewServer(c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})))
	defer srv.Close()
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Quiesce(ctx, 10*time.Millisecond, time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "1 requests still in flight")

	close(release)
	require.NoError(t, <-done)
	require.NoError(t, c.Quiesce(context.Background(), 10*time.Millisecond, time.Millisecond))
}
