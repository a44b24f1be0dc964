//go:build linux

package emulator

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/server"

	"github.com/jitterretry/jitterretry/examples/internal/fault"
	"github.com/jitterretry/jitterretry/examples/internal/inflight"
	"github.com/jitterretry/jitterretry/internal/capacity"
)

// backend is DynamoDB as the function reaches it: the embedded minidyn
// server, a capacity proxy in front of it that throttles and injects 500s,
// and toxiproxy in front of that, stalling and delaying responses.
type backend struct {
	// Endpoint is the function's AWS_ENDPOINT_URL_DYNAMODB: toxiproxy.
	Endpoint string
	// Admin reaches the server directly, with no proxy.
	Admin *dynamodb.Client

	server    *http.Server
	inflight  inflight.Counter // requests at the server
	transport *http.Transport  // the admin client's and the capacity proxy's, to the server
	capacity  *capacity.Proxy
	front     *http.Server // serves the capacity proxy
	faults    *fault.Proxy
}

// faults is what backend puts between the function and DynamoDB.
type faults struct {
	capacity func(*capacity.Options)
	// toxics are added to toxiproxy. Each connection draws once, when it
	// opens, whether a toxic with a toxicity below 1 applies to it; the
	// capacity proxy closes the connection after every response (as load
	// balancers close connections now and then), so every request opens
	// one and draws afresh. (Changing toxics at run time instead, with
	// toxiproxy v2.5.0, races with its links and can block for good on a
	// link whose client left.)
	toxics []fault.Toxic
}

func startBackend(f faults) (_ *backend, err error) {
	b := &backend{}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator: listen on loopback: %w", err)
	}
	minidyn := withCRC32(server.NewServer())
	b.server = &http.Server{Handler: b.inflight.Handler(minidyn), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.server.Serve(ln) }()
	serverURL := "http://" + ln.Addr().String()

	b.transport = http.DefaultTransport.(*http.Transport).Clone()
	b.Admin = dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(serverURL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "emulator"}, nil
		}),
		HTTPClient: &http.Client{Transport: b.transport, Timeout: 30 * time.Second},
	})

	b.capacity, err = capacity.New(serverURL, f.capacity, func(o *capacity.Options) { o.Transport = b.transport })
	if err != nil {
		return nil, err
	}
	frontLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("emulator: listen on loopback: %w", err)
	}
	b.front = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		b.capacity.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.front.Serve(frontLn) }()
	b.faults, err = fault.Start("http://" + frontLn.Addr().String())
	if err != nil {
		return nil, err
	}
	for _, t := range f.toxics {
		if err := b.faults.Add(t); err != nil {
			return nil, err
		}
	}
	b.Endpoint = b.faults.URL()
	return b, nil
}

// createTable creates an on-demand table with the string partition key pk.
func (b *backend) createTable(ctx context.Context, name string) error {
	_, err := b.Admin.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	return err
}

// stopFaults closes toxiproxy and the capacity proxy, waiting until every
// request they accepted has been answered, so that nothing reaches the
// server once it is read.
func (b *backend) stopFaults() {
	if b.faults != nil {
		b.faults.Close()
	}
	if b.front != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.front.Shutdown(ctx); err != nil {
			_ = b.front.Close()
		}
	}
}

// quiesce waits until no request has been at the server for 50 ms: a
// request a proxy had accepted may reach it after the proxy closed.
func (b *backend) quiesce(ctx context.Context) error {
	if err := b.inflight.Quiesce(ctx, 50*time.Millisecond, 5*time.Millisecond); err != nil {
		return fmt.Errorf("emulator: at the server: %w", err)
	}
	return nil
}

func (b *backend) close() {
	b.stopFaults()
	if b.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.server.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
			_ = b.server.Close()
		}
	}
	if b.transport != nil {
		b.transport.CloseIdleConnections()
	}
}

// withCRC32 adds the X-Amz-Crc32 header real DynamoDB sends to the
// embedded server's responses, which have none: the function's client, as
// in production, validates it (an SDK client takes a missing header for a
// checksum of 0 and fails).
func withCRC32(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}
