package ddbtest_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jitterretry/jitterretry/examples/internal/ddbtest"
)

// TestDynaliteOutlivesAnAbortedRequest: a client that closes its
// connection halfway through a request's body (an attempt timeout over a
// slow link) leaves the server answering. dynalite itself rethrows the
// request's "aborted" error, which ended the process and failed every
// dynalite test after the fault matrix's first such cut (make test,
// 2026-12-05); tools/dynalite/serve.js keeps it up.
func TestDynaliteOutlivesAnAbortedRequest(t *testing.T) {
	b := ddbtest.Dynalite(t)
	u, err := url.Parse(b.URL)
	require.NoError(t, err)
	for range 3 {
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"+
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Limit\":", u.Host)
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // the server has begun to read the body
		require.NoError(t, conn.Close())
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get(b.URL)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 100*time.Millisecond, "expect dynalite still answering")
}
