// Package ddbtest is test support for the examples: DynamoDB-compatible
// servers (the embedded minidyn, or dynalite when AWS_ENDPOINT_URL_DYNAMODB
// is set), DynamoDB clients whose connections the test owns and closes, and
// a capacity proxy in front of a server. Everything listens on loopback and
// is closed when the test ends, so tests using it can check for leaked
// goroutines.
package ddbtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/server"

	"github.com/jitterretry/jitterretry/examples/internal/inflight"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// EndpointEnv names the variable that points the tests at dynalite; `make
// test` starts dynalite and sets it.
const EndpointEnv = "AWS_ENDPOINT_URL_DYNAMODB"

// Backend is a DynamoDB-compatible server for one test. Requests reach it
// through an in-process handler that counts those in flight, so a test can
// wait until every request it caused, abandoned ones included, has been
// answered (Quiesce) before it checks the table.
type Backend struct {
	// URL is the server's endpoint, with no fault or capacity proxy.
	URL string
	// Name is "minidyn" or "dynalite".
	Name string
	// Embedded is true for minidyn, which sends no CRC32 header.
	Embedded bool

	inflight inflight.Counter
}

// Minidyn starts an embedded minidyn server for the test.
func Minidyn(t testing.TB) *Backend {
	t.Helper()
	b := &Backend{Name: "minidyn", Embedded: true}
	srv := httptest.NewServer(b.inflight.Handler(server.NewServer()))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// MinidynTable starts an embedded minidyn server for the test with a fresh
// table named after prefix, whose partition key is the string key, and
// returns both.
func MinidynTable(t testing.TB, prefix, key string) (*Backend, string) {
	t.Helper()
	b := Minidyn(t)
	table := TableName(prefix)
	b.CreateTable(t, table, key)
	return b, table
}

// Dynalite returns the dynalite server the test command started, behind an
// in-process reverse proxy, and skips the test when EndpointEnv is unset.
func Dynalite(t testing.TB) *Backend {
	t.Helper()
	endpoint := os.Getenv(EndpointEnv)
	if endpoint == "" {
		t.Skip(EndpointEnv + " is not set, so the dynalite half is skipped: `make test` starts dynalite and sets it; " +
			"or run tools/dynalite/run.sh start out/dynalite and export the URL it prints")
	}
	u, err := url.Parse(endpoint)
	if err != nil || !loopback(u.Hostname()) {
		t.Fatalf("%s=%q: expect a loopback http URL", EndpointEnv, endpoint)
	}
	b := &Backend{Name: "dynalite"}
	transport := newTransport()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = transport
	srv := httptest.NewServer(b.inflight.Handler(rp))
	t.Cleanup(func() {
		srv.Close()
		transport.CloseIdleConnections()
	})
	b.URL = srv.URL
	return b
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// Quiesce waits until no request has been in flight at the server for a few
// milliseconds, or ctx ends.
func (b *Backend) Quiesce(ctx context.Context) error {
	if err := b.inflight.Quiesce(ctx, 20*time.Millisecond, 2*time.Millisecond); err != nil {
		return fmt.Errorf("ddbtest: at %s: %w", b.Name, err)
	}
	return nil
}

// ClientOptions configures NewClient.
type ClientOptions struct {
	// Retryer is the client's retryer. Nil keeps the SDK's default.
	Retryer aws.Retryer
	// AttemptTimeout bounds each HTTP attempt, reading the response body
	// included (http.Client.Timeout), so that a stalled connection fails the
	// attempt and the retryer can retry it. Zero means none.
	AttemptTimeout time.Duration
	// CloseIdleEvery, when positive, closes the client's idle connections at
	// this period, as a load balancer dropping idle connections would, so
	// that the client keeps opening new ones. Zero means never.
	CloseIdleEvery time.Duration
}

// Client is a DynamoDB client with its own connection pool.
type Client struct {
	*dynamodb.Client
	transport *http.Transport
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

// NewClient returns a client of endpoint (the backend itself or a proxy in
// front of it) with static credentials. Close closes its connections; the
// test's cleanup does too.
func (b *Backend) NewClient(t testing.TB, endpoint string, optFns ...func(*ClientOptions)) *Client {
	t.Helper()
	var o ClientOptions
	for _, fn := range optFns {
		fn(&o)
	}
	c := &Client{transport: newTransport(), stop: make(chan struct{}), done: make(chan struct{})}
	c.Client = dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "ddbtest"}, nil
		}),
		HTTPClient:                      &http.Client{Transport: c.transport, Timeout: o.AttemptTimeout},
		Retryer:                         o.Retryer,
		DisableValidateResponseChecksum: b.Embedded,
	})
	go c.closeIdle(o.CloseIdleEvery)
	t.Cleanup(c.Close)
	return c
}

func (c *Client) closeIdle(every time.Duration) {
	defer close(c.done)
	if every <= 0 {
		<-c.stop
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			c.transport.CloseIdleConnections()
		}
	}
}

// Close closes the client's idle connections and stops closing them
// periodically. Call it once no request is in flight. It is idempotent.
func (c *Client) Close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.transport.CloseIdleConnections()
	})
}

// Admin returns a client that reaches the server directly, with the SDK's
// default retryer.
func (b *Backend) Admin(t testing.TB) *Client {
	t.Helper()
	return b.NewClient(t, b.URL)
}

func newTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return tr
}

var tableSeq atomic.Int64

// TableName returns a table name no other test of this process uses.
func TableName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), tableSeq.Add(1))
}

// CreateTable creates an on-demand table whose partition key is the string
// attribute key, and deletes it when the test ends.
func (b *Backend) CreateTable(t testing.TB, name, key string) {
	t.Helper()
	admin := b.Admin(t)
	_, err := admin.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = admin.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	// dynalite answers CreateTable with the table CREATING and makes it
	// ACTIVE on a timer, even with --createTableMs 0: on a busy machine the
	// first GetItem found no table (ResourceNotFoundException, one CI run).
	// (minidyn creates it at once, and reports no status to wait for.)
	if b.Name != "dynalite" {
		return
	}
	waiter := dynamodb.NewTableExistsWaiter(admin, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 100*time.Millisecond
	})
	if err := waiter.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatalf("wait for table %s: %v", name, err)
	}
}

// CapacityProxy is a capacity proxy served on loopback for one test.
type CapacityProxy struct {
	*capacity.Proxy
	// URL is the proxy's base URL.
	URL string

	srv       *http.Server
	transport *http.Transport
	once      sync.Once
}

// Capacity starts a capacity proxy in front of upstream, closed when the
// test ends.
func Capacity(t testing.TB, upstream string, optFns ...func(*capacity.Options)) *CapacityProxy {
	t.Helper()
	c := &CapacityProxy{transport: newTransport()}
	p, err := capacity.New(upstream, append(optFns, func(o *capacity.Options) { o.Transport = c.transport })...)
	if err != nil {
		t.Fatalf("capacity proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("capacity proxy: %v", err)
	}
	c.Proxy, c.URL = p, "http://"+ln.Addr().String()
	c.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Close stops the proxy and waits, for up to a minute, until every request
// it accepted has been answered, so that nothing it forwards reaches the
// server afterwards. It is idempotent.
func (c *CapacityProxy) Close() error {
	var err error
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = c.srv.Shutdown(ctx)
		c.transport.CloseIdleConnections()
	})
	return err
}
