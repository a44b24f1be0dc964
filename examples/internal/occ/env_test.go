package occ

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"
	"github.com/truora/minidyn/server"

	"github.com/jitterretry/jitterretry/internal/capacity"
	"github.com/jitterretry/jitterretry/internal/ddbwire"
)

// server is a DynamoDB-compatible server under test: the embedded minidyn,
// or dynalite at AWS_ENDPOINT_URL_DYNAMODB.
type testServer struct {
	URL string
	// embedded is true for minidyn, which sends no CRC32 and supports
	// transactions and ALL_OLD.
	embedded bool
	ops      *opCounter
}

// opCounter counts requests by operation on their way to the server.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *opCounter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		op = op[strings.LastIndexByte(op, '.')+1:]
		c.mu.Lock()
		c.ops[op]++
		c.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (c *opCounter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops[op]
}

// minidyn starts an embedded minidyn server for the test, counting
// operations.
func minidyn(t *testing.T) *testServer {
	t.Helper()
	ops := &opCounter{ops: map[string]int{}}
	srv := httptest.NewServer(ops.wrap(server.NewServer()))
	t.Cleanup(srv.Close)
	return &testServer{URL: srv.URL, embedded: true, ops: ops}
}

// dynalite returns the dynalite server the test command started, and skips
// the test when there is none.
func dynalite(t *testing.T) *testServer {
	t.Helper()
	endpoint := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if endpoint == "" {
		t.Skip("AWS_ENDPOINT_URL_DYNAMODB is not set: run `make test`, which starts dynalite and sets it, " +
			"or start dynalite yourself (tools/dynalite/run.sh start out/dynalite) and export its URL")
	}
	// Count operations through a loopback reverse proxy in front of it.
	u, err := url.Parse(endpoint)
	require.NoError(t, err)
	ops := &opCounter{ops: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(ops.wrap(rp))
	t.Cleanup(srv.Close)
	return &testServer{URL: srv.URL, ops: ops}
}

func (s *testServer) client(endpoint string, retryer aws.Retryer) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
		Retryer:                         retryer,
		DisableValidateResponseChecksum: s.embedded,
	})
}

// admin returns a client that reaches the server directly, with the SDK's
// default retryer.
func (s *testServer) admin() *dynamodb.Client {
	return s.client(s.URL, nil)
}

var tableSeq atomic.Int64

// table creates a fresh table with items hot items, deleted when the test
// ends.
func (s *testServer) table(t *testing.T, items int) string {
	t.Helper()
	name := fmt.Sprintf("occ-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	ctx := context.Background()
	require.NoError(t, Setup(ctx, s.admin(), name, items, 100, 100))
	t.Cleanup(func() { _ = Teardown(context.Background(), s.admin(), name) })
	return name
}

// proxy starts a capacity proxy in front of the server.
func (s *testServer) proxy(t *testing.T, optFns ...func(*capacity.Options)) (*capacity.Proxy, string) {
	t.Helper()
	p, err := capacity.New(s.URL, optFns...)
	require.NoError(t, err)
	u, err := p.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, u
}

// fastPolicy is a policy with delays scaled down a hundredfold, so tests
// stay short while the retry behaviour is the same.
func fastPolicy(t *testing.T, name string, seed uint64) *Policy {
	t.Helper()
	p, err := NewPolicy(name, PolicyOptions{
		Seed:              seed,
		BaseDelay:         time.Millisecond,
		ThrottleBaseDelay: 25 * time.Millisecond,
		MaxBackoff:        250 * time.Millisecond,
		RequeueCap:        100 * time.Millisecond,
	})
	require.NoError(t, err)
	return p
}

// loseFirstWrite is a loopback proxy that forwards everything to upstream
// and, for the first write only, replaces the server's response with HTTP
// 500 InternalServerError: the write landed, the client cannot know.
func loseFirstWrite(t *testing.T, upstream string) string {
	var lost atomic.Bool
	return losingProxy(t, upstream, func(write bool, status int) bool {
		return write && status == http.StatusOK && lost.CompareAndSwap(false, true)
	})
}

// blackoutAfterFirstWrite is a loopback proxy that forwards everything to
// upstream and answers normally until a write has reached the server; from
// then on it replaces every response with HTTP 500 InternalServerError. The
// first write lands, and no worker can ever learn it.
func blackoutAfterFirstWrite(t *testing.T, upstream string) string {
	var dark atomic.Bool
	return losingProxy(t, upstream, func(write bool, _ int) bool {
		if write {
			dark.Store(true)
		}
		return dark.Load()
	})
}

// losingProxy forwards everything to upstream and replaces with HTTP 500
// InternalServerError each response for which lose, told whether the request
// was a write and the server's status, returns true.
func losingProxy(t *testing.T, upstream string, lose func(write bool, status int) bool) string {
	t.Helper()
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		op := resp.Request.Header.Get("X-Amz-Target")
		write := strings.HasSuffix(op, ".UpdateItem") || strings.HasSuffix(op, ".TransactWriteItems")
		if lose(write, resp.StatusCode) {
			return errLost
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		ddbwire.WriteError(w, http.StatusInternalServerError, ddbwire.InternalServerError, "response lost: "+err.Error())
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

var errLost = fmt.Errorf("injected by the test")
