package main

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/metrics"
)

// client is one client of a run: its own retryer, connections and
// dynamodb.Client, as a separate process of a fleet would have.
type client struct {
	ddb       *dynamodb.Client
	retryer   aws.Retryer // nil for the client's own default
	transport *http.Transport
}

// newClient returns a client of mode m for k goroutines, talking to
// endpoint; when sent is not nil it counts the requests the client sends,
// and with stamp it stamps each request's send time into its operation's
// sendStamp.
// When meter is not nil and m is one of ours, the retryer records into
// meter; the dynamodb.Client records nothing either way, so that only the
// retryer's instruments cost.
func newClient(endpoint string, m mode, k int, sent *atomic.Int64, stamp bool, meter metrics.MeterProvider) client {
	c := client{transport: clientTransport(k)}
	switch {
	case meter != nil && m.metered != nil:
		c.retryer = m.metered(meter)
	case m.retryer != nil:
		c.retryer = m.retryer()
	}
	var transport http.RoundTripper = c.transport
	if sent != nil || stamp {
		transport = observingTransport{next: c.transport, sent: sent}
	}
	c.ddb = dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "throttlebench", SecretAccessKey: "throttlebench", Source: "throttlebench"}, nil
		}),
		HTTPClient: &http.Client{Transport: transport},
		Retryer:    c.retryer, // nil: the client's own default
	})
	return c
}

// clientTransport returns the HTTP transport of one run's client: enough idle
// connections for every goroutine to keep its own, so that no run measures
// connection churn.
func clientTransport(k int) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0, // no limit but the per-host one
		MaxIdleConnsPerHost:   max(k, 2),
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
}

// sendStamp is an operation's context key for an *atomic.Pointer[time.Time]
// that observingTransport sets to the time its last attempt was sent.
type sendStamp struct{}

// withSendStamp returns ctx carrying at as its sendStamp.
func withSendStamp(ctx context.Context, at *atomic.Pointer[time.Time]) context.Context {
	return context.WithValue(ctx, sendStamp{}, at)
}

// observingTransport counts the requests it sends when sent is not nil,
// and stamps the send time of each into its operation's sendStamp, if any.
type observingTransport struct {
	next http.RoundTripper
	sent *atomic.Int64
}

func (t observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.sent != nil {
		t.sent.Add(1)
	}
	if at, ok := req.Context().Value(sendStamp{}).(*atomic.Pointer[time.Time]); ok {
		now := time.Now()
		at.Store(&now)
	}
	return t.next.RoundTrip(req)
}
